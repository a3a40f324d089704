package main

import (
	"fmt"

	"github.com/multirail/multirail/internal/token"
	"github.com/spf13/cobra"
)

func newToken(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print a new random token (32 bytes, base64url) for MULTIRAIL_TOKEN",
		Long: `token prints a new shared secret: 32 random bytes from the system's secure
source, base64url without padding (43 characters), one line. Give it to both
ends of a connection (and to every rank of a communicator) in MULTIRAIL_TOKEN,
or put it in a file only its owner may read and name that file in
MULTIRAIL_TOKEN_FILE:

  multirail token > ~/.multirail-token && chmod 600 ~/.multirail-token
  export MULTIRAIL_TOKEN_FILE=~/.multirail-token`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(g.stdout, token.Generate())
			return err
		},
	}
}
