package coll

import (
	"testing"

	"pgregory.net/rapid"
)

// TestProperty checks random calls (collective, algorithm, size, count,
// root, op, type, transport behaviour) against the reference.
func TestProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := rapid.SampledFrom(collectives).Draw(t, "collective")
		n := rapid.IntRange(1, 20).Draw(t, "n")
		typ := rapid.SampledFrom(types).Draw(t, "type")
		s := spec{
			c:     c,
			algo:  rapid.SampledFrom(withAuto(c)).Draw(t, "algo"),
			n:     n,
			count: rapid.IntRange(0, 4*n+9).Draw(t, "count"),
			root:  rapid.IntRange(0, n-1).Draw(t, "root"),
			op:    rapid.SampledFrom(opsOf(typ)).Draw(t, "op"),
			typ:   typ,
			opts: meshOpts{
				failRank:   -1,
				misalign:   rapid.Bool().Draw(t, "misalign"),
				rendezvous: rapid.Bool().Draw(t, "rendezvous"),
				try:        rapid.Bool().Draw(t, "try"),
			},
			seed: rapid.Uint64().Draw(t, "seed"),
		}
		if err := runSpec(s); err != nil {
			t.Fatal(err)
		}
	})
}
