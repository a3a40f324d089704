package main

import "github.com/spf13/cobra"

func newDemo(g *globals) *cobra.Command { return &cobra.Command{Use: "demo"} }
