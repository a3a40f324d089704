package launch

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestExpandHostList(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"x", []string{"x"}},
		{"vm", []string{"vm"}},
		{"gnode[01-04,7],b5", []string{"gnode01", "gnode02", "gnode03", "gnode04", "gnode7", "b5"}},
		{"a[1-2]b[3-4]", []string{"a1b3", "a1b4", "a2b3", "a2b4"}},
		{"clh[0-3]", []string{"clh0", "clh1", "clh2", "clh3"}},
		{"n[08-11]", []string{"n08", "n09", "n10", "n11"}},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}},
		{"n[001-2]", []string{"n001", "n002"}},
		{"n[007]", []string{"n007"}},
		{"n[3]", []string{"n3"}},
		{"[1-3]", []string{"1", "2", "3"}},
		{"rack[1-2]-n[1-2].cl", []string{"rack1-n1.cl", "rack1-n2.cl", "rack2-n1.cl", "rack2-n2.cl"}},
		{"a,b,c", []string{"a", "b", "c"}},
		{"b5,gnode[01-02]", []string{"b5", "gnode01", "gnode02"}},
		{"gpu[017-018]", []string{"gpu017", "gpu018"}},
		{"h_1.x-y", []string{"h_1.x-y"}},
		{"n[1-2,2]", []string{"n1", "n2", "n2"}}, // as given: Slurm does not dedupe within one expression either
		{"n[0-65535]", nil},                      // exactly MaxHosts: checked by length below
	}
	for _, c := range cases {
		got, err := ExpandHostList(c.in)
		if err != nil {
			t.Errorf("ExpandHostList(%q): %v", c.in, err)
			continue
		}
		if c.want == nil {
			if len(got) != MaxHosts || got[0] != "n0" || got[MaxHosts-1] != "n65535" {
				t.Errorf("ExpandHostList(%q): %d hosts, %q..%q", c.in, len(got), got[0], got[len(got)-1])
			}
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ExpandHostList(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestExpandHostListErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "host list is empty"},
		{"a,,b", `host list "a,,b": empty host name`},
		{"a,", `host list "a,": empty host name`},
		{"n[1-", `host list "n[1-": unclosed '['`},
		{"n1-2]", `host list "n1-2]": ']' without '['`},
		{"n[1-[2]]", `nested '['`},
		{"n[]", `empty brackets`},
		{"n[4-2]", `descending range "4-2"`},
		{"n[a-b]", `"a" in brackets is not a number`},
		{"n[1-2-3]", `"2-3" in brackets is not a number`},
		{"n[,1]", `empty number in brackets`},
		{"n[1:2]", `"1:2" in brackets is not a number`},
		{"n[0-65536]", "more than 65536 hosts"},
		{"n[0-99999999999]", "more than 65536 hosts"},
		{"a[0-999]b[0-999]", "more than 65536 hosts"},
		{"a[0-40000],b[0-40000]", "more than 65536 hosts"},
		{"n[1234567890123456789]", "longer than 18 digits"},
		{"host name", `character ' ' not allowed`},
		{"h/x", `character '/' not allowed`},
		{"h\n", `character '\n' not allowed`},
	}
	for _, c := range cases {
		got, err := ExpandHostList(c.in)
		if err == nil {
			t.Errorf("ExpandHostList(%q) = %d hosts, want an error", c.in, len(got))
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "launch: ") {
			t.Errorf("ExpandHostList(%q): %v, want %q", c.in, err, c.want)
		}
		if strings.ContainsAny(err.Error(), "\n") {
			t.Errorf("ExpandHostList(%q): error spans lines: %q", c.in, err)
		}
	}
}

func TestParseTasksPerNode(t *testing.T) {
	cases := []struct {
		in   string
		want []int
	}{
		{"4", []int{4}},
		{"2(x3),1", []int{2, 2, 2, 1}},
		{"2(x3),1(x3)", []int{2, 2, 2, 1, 1, 1}},
		{"1,2,3", []int{1, 2, 3}},
		{"2(x1)", []int{2}},
		{"16(x2),8", []int{16, 16, 8}},
	}
	for _, c := range cases {
		got, err := parseTasksPerNode("SLURM_TASKS_PER_NODE", c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseTasksPerNode(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if got, err := parseTasksPerNode("V", "1(x65536)"); err != nil || len(got) != MaxHosts {
		t.Errorf("1(x65536): %d, %v", len(got), err)
	}
	for _, in := range []string{"", "x", "2(x)", "2(x0)", "2(3)", "2(x3", "2x3", "-1", "2(x3),", ",1", "1(x65537)",
		"1(x65536),1", "1(x40000),1(x40000)", "2 ", "1234567890", "2(x3)(x2)"} {
		got, err := parseTasksPerNode("SLURM_STEP_TASKS_PER_NODE", in)
		if err == nil {
			t.Errorf("parseTasksPerNode(%q) = %d nodes, want an error", in, len(got))
			continue
		}
		want := "launch: SLURM_STEP_TASKS_PER_NODE=" + strconv.Quote(in) + ": "
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("parseTasksPerNode(%q): %v, want prefix %q", in, err, want)
		}
	}
}

// FuzzExpandHostList: never panics, never more than MaxHosts hosts, every
// host non-empty and free of brackets, commas and anything outside the
// host name characters; a plain list of valid names expands to itself;
// and compressing the first expansion's hosts again (as a plain list)
// gives the same hosts.
func FuzzExpandHostList(f *testing.F) {
	for _, s := range []string{"gnode[01-04,7],b5", "a[1-2]b[3-4]", "x", "n[0-65535]", "n[1-", "[1-3]", "a,,b", "n[08-11]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ExpandHostList(s)
		if err != nil {
			if hosts != nil {
				t.Fatalf("error %v with %d hosts", err, len(hosts))
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if len(hosts) == 0 || len(hosts) > MaxHosts {
			t.Fatalf("%d hosts", len(hosts))
		}
		for _, h := range hosts {
			if h == "" || checkHostChars("", h) != nil {
				t.Fatalf("bad host %q from %q", h, s)
			}
		}
		if !strings.ContainsAny(s, "[]") && !slices.Equal(hosts, strings.Split(s, ",")) {
			t.Fatalf("plain list %q expanded to %q", s, hosts)
		}
		again, err := ExpandHostList(strings.Join(hosts, ","))
		if err != nil || !slices.Equal(again, hosts) {
			t.Fatalf("re-expanding %q: %v", s, err)
		}
	})
}
