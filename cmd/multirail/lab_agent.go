package main

import (
	"encoding/json"
	"strings"

	"github.com/multirail/multirail/lab/labbench"
	"github.com/spf13/cobra"
)

func newLabAgent(g *globals) *cobra.Command {
	var spec string
	cmd := &cobra.Command{
		Use:    "agent --spec JSON",
		Short:  "One end of a lab bench run (started by lab bench inside a namespace)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var s labbench.Spec
			if err := json.Unmarshal([]byte(spec), &s); err != nil {
				return usagef("--spec: %v", err)
			}
			if err := s.Validate(); err != nil {
				return usagef("--spec: %s", strings.TrimPrefix(err.Error(), labbench.ErrSpec.Error()+": "))
			}
			ctx, stop := labSignals(cmd.Context())
			defer stop()
			return labbench.RunAgent(ctx, s, g.stdout, g.logger())
		},
	}
	cmd.Flags().StringVar(&spec, "spec", "", "what to do, as JSON")
	return cmd
}
