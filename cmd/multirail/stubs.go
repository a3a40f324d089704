package main

import "github.com/spf13/cobra"

func newServe(g *globals) *cobra.Command { return &cobra.Command{Use: "serve"} }
func newSend(g *globals) *cobra.Command  { return &cobra.Command{Use: "send"} }
func newDemo(g *globals) *cobra.Command  { return &cobra.Command{Use: "demo"} }
