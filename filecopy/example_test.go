package filecopy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/filecopy"
)

// Copy a directory over a one-rail connection on loopback into a served
// directory.
func Example() {
	src, _ := os.MkdirTemp("", "src")
	dst, _ := os.MkdirTemp("", "dst")
	defer os.RemoveAll(src)
	defer os.RemoveAll(dst)
	_ = os.MkdirAll(filepath.Join(src, "data", "sub"), 0o755)
	_ = os.WriteFile(filepath.Join(src, "data", "sub", "hello.txt"), []byte("hello"), 0o644)

	ctx := context.Background()
	cfg := filecopy.ConnConfig(multirail.Config{Token: multirail.NewToken()})
	ln, _ := multirail.Listen("127.0.0.1:0", cfg)
	defer ln.Close()
	served := make(chan filecopy.Result)
	go func() {
		c, _ := ln.Accept(ctx)
		defer c.Close()
		root, _ := os.OpenRoot(dst)
		defer root.Close()
		r, _ := filecopy.Serve(ctx, c, root, filecopy.ServeConfig{})
		served <- r
	}()
	dcfg := cfg
	dcfg.Rails = []multirail.Rail{{Addr: ln.Addr().String()}}
	c, err := multirail.Dial(ctx, dcfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	m, locals, _, err := filecopy.Plan([]string{filepath.Join(src, "data")})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := filecopy.Send(ctx, c, m, locals, filecopy.SendConfig{})
	<-served
	b, _ := os.ReadFile(filepath.Join(dst, "data", "sub", "hello.txt"))
	fmt.Println(r.Files, r.Bytes, r.Synced, err, string(b))
	// Output: 1 5 true <nil> hello
}
