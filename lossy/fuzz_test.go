package lossy

import (
	"errors"
	"testing"
)

// FuzzSplitPackets: ConnLink's decoder either refuses with ErrPeer or
// returns packets that re-encode to the input.
func FuzzSplitPackets(f *testing.F) {
	f.Add(appendPackets(nil, [][]byte{{1, 2}, {}, {3}}))
	f.Add(appendPackets(nil, [][]byte{make([]byte, 8)}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := splitPackets(b)
		if err != nil {
			if !errors.Is(err, ErrPeer) {
				t.Fatalf("error %v does not wrap ErrPeer", err)
			}
			return
		}
		if got := appendPackets(nil, ps); string(got) != string(b) {
			t.Fatalf("re-encoding gives %x, input %x", got, b)
		}
	})
}
