package comm

import "fmt"

// Op is the reduction of a collective.
type Op int

// Reductions. The loss-tolerant allreduce (LossTolerant) takes Sum or
// Mean; the other collectives take all: Mean divides the sum by the number of ranks
// (truncating for integers), the bitwise ones only for integer and bool
// elements.
const (
	Sum  Op = iota // element-wise sum over the ranks
	Mean           // element-wise mean over the ranks ("avg")
	Prod           // element-wise product
	Min            // element-wise minimum
	Max            // element-wise maximum
	Band           // bitwise and (integers), logical and (bool)
	Bor            // bitwise or (integers), logical or (bool)
	Bxor           // bitwise exclusive or (integers), logical xor (bool)
)

var opNames = [...]string{Sum: "sum", Mean: "mean", Prod: "prod", Min: "min", Max: "max", Band: "band", Bor: "bor", Bxor: "bxor"}

func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// ParseOp parses a reduction name: sum, mean, prod, min or max.
func ParseOp(name string) (Op, error) {
	for i, n := range opNames {
		if n == name {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("%w: op %q; allowed: sum, mean, prod, min, max, band, bor, bxor", ErrConfig, name)
}
