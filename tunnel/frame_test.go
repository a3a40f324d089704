package tunnel

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		tag  uint32
		m    []byte
		want Frame
		err  string // substring of the error; "" = valid
	}{
		{"open", 3, appendOpen(nil, MinWindow), Frame{Kind: KindOpen, Stream: 3, Window: MinWindow}, ""},
		{"data", 9, []byte{KindData, 'x', 'y'}, Frame{Kind: KindData, Stream: 9, Data: []byte("xy")}, ""},
		{"fin", 9, []byte{KindFin}, Frame{Kind: KindFin, Stream: 9}, ""},
		{"reset", 2, appendReset(nil, "dial target: refused"), Frame{Kind: KindReset, Stream: 2, Reason: "dial target: refused"}, ""},
		{"window", 0, appendWindow(nil, 7, 1<<20), Frame{Kind: KindWindow, Stream: 7, Window: 1 << 20}, ""},
		{"empty", 1, nil, Frame{}, "empty message"},
		{"data on tag 0", 0, []byte{KindData, 1}, Frame{}, "only WINDOW"},
		{"window on a stream tag", 4, appendWindow(nil, 4, 1), Frame{}, "frame kind 5"},
		{"unknown kind", 4, []byte{99}, Frame{}, "frame kind 99"},
		{"short window", 0, []byte{KindWindow, 0, 0, 0, 1}, Frame{}, "WINDOW of 4 bytes"},
		{"window for stream 0", 0, appendWindow(nil, 0, 1), Frame{}, "stream 0"},
		{"zero increment", 0, appendWindow(nil, 1, 0), Frame{}, "increment 0"},
		{"huge increment", 0, appendWindow(nil, 1, MaxWindow+1), Frame{}, "increment"},
		{"open of another version", 1, []byte{KindOpen, Version + 1, 0, 4, 0, 0}, Frame{}, "version"},
		{"open window too small", 1, appendOpen(nil, MinWindow-1), Frame{}, "OPEN window"},
		{"open too long", 1, append(appendOpen(nil, MinWindow), 0), Frame{}, "OPEN of 6 bytes"},
		{"empty data", 1, []byte{KindData}, Frame{}, "empty DATA"},
		{"fin with payload", 1, []byte{KindFin, 0}, Frame{}, "FIN with 1 bytes"},
		{"reset not UTF-8", 1, []byte{KindReset, 0xff}, Frame{}, "UTF-8"},
		{"reset too long", 1, append([]byte{KindReset}, strings.Repeat("a", MaxReason+1)...), Frame{}, "RESET reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Decode(tc.tag, tc.m)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Decode = %+v, %v; want an ErrProtocol containing %q", f, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != tc.want.Kind || f.Stream != tc.want.Stream || f.Window != tc.want.Window || !bytes.Equal(f.Data, tc.want.Data) || f.Reason != tc.want.Reason {
				t.Fatalf("Decode = %+v, want %+v", f, tc.want)
			}
		})
	}
}

// TestAppendResetCutsOnRuneBoundary: a long reason is cut to MaxReason
// bytes without splitting a character, so it still decodes.
func TestAppendResetCutsOnRuneBoundary(t *testing.T) {
	m := appendReset(nil, strings.Repeat("é", MaxReason)) // 2 bytes each
	f, err := Decode(1, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Reason) != MaxReason || !strings.HasPrefix(strings.Repeat("é", MaxReason), f.Reason) {
		t.Fatalf("reason of %d bytes: %q", len(f.Reason), f.Reason)
	}
	m = appendReset(nil, "a"+strings.Repeat("é", MaxReason))
	if f, err = Decode(1, m); err != nil || len(f.Reason) != MaxReason-1 {
		t.Fatalf("odd cut: %d bytes, %v", len(f.Reason), err)
	}
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to the
// same message.
func FuzzDecode(f *testing.F) {
	f.Add(uint32(1), appendOpen(nil, DefaultWindow))
	f.Add(uint32(0), appendWindow(nil, 1, 4096))
	f.Add(uint32(5), []byte{KindData, 1, 2, 3})
	f.Add(uint32(5), []byte{KindFin})
	f.Add(uint32(5), appendReset(nil, "read: connection reset by peer"))
	f.Fuzz(func(t *testing.T, tag uint32, m []byte) {
		fr, err := Decode(tag, m)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		var re []byte
		switch fr.Kind {
		case KindOpen:
			re = appendOpen(nil, fr.Window)
		case KindData:
			re = append([]byte{KindData}, fr.Data...)
		case KindFin:
			re = []byte{KindFin}
		case KindReset:
			re = appendReset(nil, fr.Reason)
		case KindWindow:
			re = appendWindow(nil, fr.Stream, fr.Window)
		default:
			t.Fatalf("accepted kind %d", fr.Kind)
		}
		if !bytes.Equal(re, m) {
			t.Fatalf("tag %d: %x decoded to %+v, re-encoded as %x", tag, m, fr, re)
		}
	})
}
