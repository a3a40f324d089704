package netif

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseFilter: ParseFilter never panics, errors are one line naming
// the variable, and a parsed filter survives String and Candidates.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "eth", "^docker,lo", "=eth0,eth1", "^=eth1", "10.0.0.0/16,fd00::/8", "^10.9.0.0/16,ib", "fe80::1%eth0", "eth*", ",", "^", "10.0.0.1"} {
		f.Add(s)
	}
	ifs := testIfaces()
	f.Fuzz(func(t *testing.T, spec string) {
		flt, err := ParseFilter(spec)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "netif: "+EnvVar+"=") {
				t.Fatalf("error %q: want one line starting with netif: %s=", msg, EnvVar)
			}
			return
		}
		again, err := ParseFilter(flt.String())
		if err != nil || !reflect.DeepEqual(again, flt) {
			t.Fatalf("ParseFilter(%q).String() = %q reparses to %+v, %v", spec, flt.String(), again, err)
		}
		cands, skipped := Candidates(ifs, flt)
		if len(cands)+len(skipped) != len(ifs) {
			t.Fatalf("%d + %d != %d", len(cands), len(skipped), len(ifs))
		}
	})
}
