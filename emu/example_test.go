package emu_test

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/multirail/multirail/emu"
)

func ExampleParseSpecs() {
	specs, err := emu.ParseSpecs("emu:200mbit/2ms,emu:1.5gbit,loop")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range specs {
		fmt.Printf("%s: %s %g bit/s, delay %v\n", s, s.Kind, s.RateBps, s.Delay)
	}
	_, err = emu.ParseSpec("emu:fast")
	fmt.Println(err)
	// Output:
	// emu:200mbit/2ms: emu 2e+08 bit/s, delay 2ms
	// emu:1.5gbit: emu 1.5e+09 bit/s, delay 0s
	// loop: loop 0 bit/s, delay 0s
	// emu: bad rail spec "emu:fast": units: rate "fast": no number; allowed: a rate in bits per second: a number with an optional unit bit, kbit, mbit, gbit (decimal; bps, kbps, mbps, gbps are synonyms; /s may follow), case-insensitive, like 200mbit, 1.5Gbit/s or 2e8; no unit means bit/s
}

func ExampleProfile() {
	// Rail 0 of 200 Mbit/s loses half of its capacity from 4 s to 8 s.
	loads, _ := emu.ParseLoads("0:0.5@4s,0:0@8s", 1)
	p := emu.NewProfile(200e6, emu.RailLoads(loads, 0))
	fmt.Println(p.RateAt(5*time.Second), p.MeanRate(0, 8*time.Second))
	// Output: 1e+08 1.5e+08
}

func ExampleNewLink() {
	// An echo server stands for the far end of the rail.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()

	link, err := emu.NewLink(ln.Addr().String(), emu.LinkConfig{RateBps: 100e6, Delay: time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer link.Close()

	c, _ := net.Dial("tcp", link.Addr()) // instead of ln.Addr()
	defer c.Close()
	c.Write([]byte("hello over an emulated rail"))
	c.(*net.TCPConn).CloseWrite()
	echo, _ := io.ReadAll(c)
	fmt.Println(string(echo))
	// Output: hello over an emulated rail
}
