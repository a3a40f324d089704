package comm

import (
	"errors"
	"testing"
)

// FuzzHeader: the communicator's header decoder either refuses with
// errHeader or returns a header that re-encodes to the input's first
// headerSize bytes, and the rest as the payload.
func FuzzHeader(f *testing.F) {
	f.Add(appendHeader(nil, header{kind: kindP2P, ctx: worldID, tag: 7, root: -1}))
	f.Add(append(appendHeader(nil, header{kind: kindColl, coll: 3, dtype: dtFloat32, algo: 2, ctx: 5, seq: 9, tag: 1, root: -1, count: 1000}), 1, 2, 3))
	f.Add(append(appendHeader(nil, header{kind: kindNotice, ctx: worldID, seq: 2, tag: 3, root: -1, coll: noticeAbort}), "reason"...))
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, payload, err := parseHeader(b)
		if err != nil {
			if !errors.Is(err, errHeader) {
				t.Fatalf("error %v does not wrap errHeader", err)
			}
			return
		}
		if got := appendHeader(nil, h); string(got) != string(b[:headerSize]) {
			t.Fatalf("re-encoding gives %x, input %x", got, b[:headerSize])
		}
		if string(payload) != string(b[headerSize:]) {
			t.Fatalf("payload %x, want %x", payload, b[headerSize:])
		}
	})
}
