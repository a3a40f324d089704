package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxHosts bounds what ExpandHostList and the tasks-per-node parser will
// produce: a longer list is refused with an error rather than allocated.
// No Slurm step this package will meet has more nodes.
const MaxHosts = 65536

// maxDigits bounds the numbers in a host list range: 18 decimal digits
// always fit in a uint64, and no host name carries a longer number.
const maxDigits = 18

// ExpandHostList expands a Slurm compressed host list, as found in
// SLURM_STEP_NODELIST or SLURM_JOB_NODELIST, into host names, in order:
//
//	"gnode[01-04,7],b5"  -> gnode01 gnode02 gnode03 gnode04 gnode7 b5
//	"a[1-2]b[3-4]"       -> a1b3 a1b4 a2b3 a2b4 (cartesian product, as Slurm)
//	"x"                  -> x
//
// A bracket holds comma-separated numbers and lo-hi ranges; the width of
// lo (leading zeros included) is kept as the minimum width of every number
// of its range ("[08-10]" gives 08 09 10), as Slurm's hostlist does.
// Commas outside brackets separate host expressions. Host names may hold
// letters, digits, '-', '.' and '_'.
//
// Errors name the bad input: an empty list or element, an unbalanced or
// nested bracket, an empty or descending range, a character outside the
// set above, or more than MaxHosts hosts in all.
func ExpandHostList(s string) ([]string, error) {
	if s == "" {
		return nil, fmt.Errorf("launch: host list is empty")
	}
	exprs, err := splitTopLevel(s)
	if err != nil {
		return nil, err
	}
	type parsed struct {
		parts []hostPart
		count uint64
	}
	all := make([]parsed, 0, len(exprs))
	var total uint64
	for _, e := range exprs {
		parts, n, err := parseHostExpr(s, e)
		if err != nil {
			return nil, err
		}
		total += n
		if total > MaxHosts {
			return nil, fmt.Errorf("launch: host list %q: more than %d hosts", clip(s), MaxHosts)
		}
		all = append(all, parsed{parts, n})
	}
	out := make([]string, 0, total)
	for _, p := range all {
		out = expandParts(out, "", p.parts)
	}
	return out, nil
}

// hostPart is a literal (nums == nil) or a bracket's list of ranges.
type hostPart struct {
	lit    string
	ranges []numRange
}

type numRange struct {
	lo, hi uint64
	width  int
}

// splitTopLevel splits s on the commas outside brackets, checking that
// brackets balance and do not nest.
func splitTopLevel(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("launch: host list %q: nested '[' at offset %d", clip(s), i)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("launch: host list %q: ']' without '[' at offset %d", clip(s), i)
			}
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("launch: host list %q: unclosed '['", clip(s))
	}
	return append(out, s[start:]), nil
}

// parseHostExpr parses one host expression (no top-level commas) into its
// parts and the number of hosts it stands for (at most MaxHosts+1, to say
// "too many" without overflowing).
func parseHostExpr(list, e string) ([]hostPart, uint64, error) {
	if e == "" {
		return nil, 0, fmt.Errorf("launch: host list %q: empty host name", clip(list))
	}
	var parts []hostPart
	count := uint64(1)
	for len(e) > 0 {
		i := strings.IndexByte(e, '[')
		if i < 0 {
			i = len(e)
		}
		if i > 0 {
			lit := e[:i]
			if err := checkHostChars(list, lit); err != nil {
				return nil, 0, err
			}
			parts = append(parts, hostPart{lit: lit})
			e = e[i:]
			continue
		}
		j := strings.IndexByte(e, ']') // balanced: splitTopLevel checked
		ranges, n, err := parseBracket(list, e[1:j])
		if err != nil {
			return nil, 0, err
		}
		parts = append(parts, hostPart{ranges: ranges})
		if n > MaxHosts || count*n > MaxHosts { // count, n <= MaxHosts+1: no overflow
			count = MaxHosts + 1
		} else {
			count *= n
		}
		e = e[j+1:]
	}
	return parts, count, nil
}

func checkHostChars(list, lit string) error {
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' {
			continue
		}
		return fmt.Errorf("launch: host list %q: character %q not allowed in a host name (letters, digits, '-', '.', '_')", clip(list), c)
	}
	return nil
}

// parseBracket parses the inside of a bracket: "01-04,7".
func parseBracket(list, in string) ([]numRange, uint64, error) {
	if in == "" {
		return nil, 0, fmt.Errorf("launch: host list %q: empty brackets", clip(list))
	}
	var out []numRange
	var count uint64
	for _, item := range strings.Split(in, ",") {
		loS, hiS, isRange := strings.Cut(item, "-")
		lo, err := parseHostNum(list, loS)
		if err != nil {
			return nil, 0, err
		}
		hi := lo
		if isRange {
			if hi, err = parseHostNum(list, hiS); err != nil {
				return nil, 0, err
			}
			if hi < lo {
				return nil, 0, fmt.Errorf("launch: host list %q: descending range %q", clip(list), item)
			}
		}
		if hi-lo >= MaxHosts {
			count = MaxHosts + 1
		} else if count <= MaxHosts {
			count += hi - lo + 1
		}
		out = append(out, numRange{lo: lo, hi: hi, width: len(loS)})
	}
	if count > MaxHosts {
		count = MaxHosts + 1
	}
	return out, count, nil
}

func parseHostNum(list, s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("launch: host list %q: empty number in brackets", clip(list))
	}
	if len(s) > maxDigits {
		return 0, fmt.Errorf("launch: host list %q: number %q longer than %d digits", clip(list), clip(s), maxDigits)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("launch: host list %q: %q in brackets is not a number or lo-hi range", clip(list), clip(s))
		}
	}
	n, _ := strconv.ParseUint(s, 10, 64) // at most 18 digits: no error
	return n, nil
}

// expandParts appends prefix followed by every expansion of parts, in
// order (the leftmost bracket varies slowest).
func expandParts(out []string, prefix string, parts []hostPart) []string {
	if len(parts) == 0 {
		return append(out, prefix)
	}
	p := parts[0]
	if p.ranges == nil {
		return expandParts(out, prefix+p.lit, parts[1:])
	}
	for _, r := range p.ranges {
		for n := r.lo; ; n++ {
			s := strconv.FormatUint(n, 10)
			if len(s) < r.width {
				s = strings.Repeat("0", r.width-len(s)) + s
			}
			out = expandParts(out, prefix+s, parts[1:])
			if n == r.hi {
				break
			}
		}
	}
	return out
}

// parseTasksPerNode expands Slurm's SLURM_TASKS_PER_NODE /
// SLURM_STEP_TASKS_PER_NODE format, "2(x3),1", into one count per node of
// the node list, in order: [2 2 2 1]. name is the variable's name, for the
// errors.
func parseTasksPerNode(name, s string) ([]int, error) {
	bad := func(why string) error {
		return fmt.Errorf("launch: %s=%q: %s (want comma-separated N or N(xM), as in \"2(x3),1\")", name, clip(s), why)
	}
	if s == "" {
		return nil, bad("empty")
	}
	var out []int
	for _, item := range strings.Split(s, ",") {
		nS, rest, hasRep := strings.Cut(item, "(")
		n, ok := smallUint(nS)
		if !ok {
			return nil, bad(fmt.Sprintf("%q is not a task count", clip(item)))
		}
		reps := 1
		if hasRep {
			mS, ok1 := strings.CutPrefix(rest, "x")
			mS, ok2 := strings.CutSuffix(mS, ")")
			m, ok3 := smallUint(mS)
			if !ok1 || !ok2 || !ok3 || m < 1 {
				return nil, bad(fmt.Sprintf("%q is not N(xM) with M >= 1", clip(item)))
			}
			reps = m
		}
		if reps > MaxHosts-len(out) {
			return nil, bad(fmt.Sprintf("more than %d nodes", MaxHosts))
		}
		for range reps {
			out = append(out, n)
		}
	}
	return out, nil
}

// smallUint parses a plain decimal of at most 9 digits (no sign, no
// spaces).
func smallUint(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// clip shortens s for an error message, which must stay one short line.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
