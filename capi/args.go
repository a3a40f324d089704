package capi

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/multirail/multirail/comm"
)

// The header's enums. mr_dtype has comm.DType's order; mr_op is mapped.
const (
	NumDTypes = 9 // MR_UINT8 .. MR_FLOAT64
	NumOps    = 8 // MR_SUM .. MR_BXOR

	MaxTag    = 1 << 30 // MR_MAX_TAG
	AnySource = -1      // MR_ANY_SOURCE
	AnyTag    = -1      // MR_ANY_TAG
	CardMax   = 65536   // MR_CARD_MAX
	TokenLen  = 65      // mr_new_token's smallest buffer
)

// mr_op -> comm.Op: MR_SUM, MR_PROD, MR_MIN, MR_MAX, MR_AVG, MR_BAND,
// MR_BOR, MR_BXOR.
var ops = [NumOps]comm.Op{comm.Sum, comm.Prod, comm.Min, comm.Max, comm.Mean, comm.Band, comm.Bor, comm.Bxor}

var opNames = [NumOps]string{"MR_SUM", "MR_PROD", "MR_MIN", "MR_MAX", "MR_AVG", "MR_BAND", "MR_BOR", "MR_BXOR"}

var dtNames = [NumDTypes]string{"MR_UINT8", "MR_INT8", "MR_BOOL", "MR_INT32", "MR_INT64", "MR_FLOAT16", "MR_BFLOAT16", "MR_FLOAT32", "MR_FLOAT64"}

// errArg is wrapped by the errors of bad arguments found here (ErrInvalid).
var errArg = errors.New("multirail: invalid argument")

// DType maps an mr_dtype onto comm's. The error wraps errArg.
func DType(d int32) (comm.DType, error) {
	if d < 0 || d >= NumDTypes {
		return 0, fmt.Errorf("%w: dtype %d; allowed: 0..%d (MR_UINT8 .. MR_FLOAT64)", errArg, d, NumDTypes-1)
	}
	return comm.DType(d), nil
}

// Op maps an mr_op onto comm's. The error wraps errArg.
func Op(op int32) (comm.Op, error) {
	if op < 0 || op >= NumOps {
		return 0, fmt.Errorf("%w: op %d; allowed: 0..%d (MR_SUM, MR_PROD, MR_MIN, MR_MAX, MR_AVG, MR_BAND, MR_BOR, MR_BXOR)", errArg, op, NumOps-1)
	}
	return ops[op], nil
}

// ElemBytes is count elements of dtype in bytes, -1 for a bad dtype, a
// negative count or an overflow (the shims size their views with it).
func ElemBytes(count int64, dtype int32) int64 {
	if dtype < 0 || dtype >= NumDTypes {
		return -1
	}
	return Mul(count, int64(comm.DType(dtype).Size()))
}

// Mul is a*b, or -1 when either is negative or the product overflows
// (or exceeds what a Go slice may hold).
func Mul(a, b int64) int64 {
	if a < 0 || b < 0 {
		return -1
	}
	if a != 0 && b > math.MaxInt/a {
		return -1
	}
	return a * b
}

// Extent is the bytes an alltoallv buffer must hold: the largest
// (displacement + count) * elem, -1 for a negative or overflowing entry
// or entries of different lengths.
func Extent(counts, displs []int64, elem int64) int64 {
	if len(counts) != len(displs) || elem < 0 {
		return -1
	}
	var hi int64
	for i, c := range counts {
		d := displs[i]
		if c < 0 || d < 0 || d > math.MaxInt64-c {
			return -1
		}
		if c > 0 {
			hi = max(hi, d+c)
		}
	}
	return Mul(hi, elem)
}

// View is the n bytes at p as a slice (no copy), nil when p is nil or n
// is not positive: the shims' way from a C pointer to what this package
// takes.
func View(p unsafe.Pointer, n int64) []byte {
	if p == nil || n <= 0 || n > math.MaxInt {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// Int64s is the n int64s at p (no copy), nil when p is nil or n <= 0.
func Int64s(p unsafe.Pointer, n int64) []int64 {
	if p == nil || n <= 0 || n > math.MaxInt/8 {
		return nil
	}
	return unsafe.Slice((*int64)(p), n)
}

// args checks the common arguments of a typed call.
type args struct {
	name string
	err  error
}

func (a *args) dtype(d int32) comm.DType {
	dt, err := DType(d)
	a.set(err)
	return dt
}

func (a *args) op(op int32) comm.Op {
	o, err := Op(op)
	a.set(err)
	return o
}

// reduction checks that op applies to dt (comm refuses the others too,
// but inside the collective, which then fails the communicator's later
// collectives as well: refused here, a bad argument costs only the call).
func (a *args) reduction(dt comm.DType, op int32) {
	o, err := Op(op)
	if err != nil {
		return // a.op reports it
	}
	switch {
	case dt >= comm.Float16 && (o == comm.Band || o == comm.Bor || o == comm.Bxor):
		a.check(false, "op %s needs integer or bool elements, got %s", opName(op), dtNames[dt])
	case dt == comm.Bool && o == comm.Mean:
		a.check(false, "op MR_AVG on MR_BOOL elements; allowed: MR_SUM, MR_PROD, MR_MIN, MR_MAX (logical or/and), MR_BAND, MR_BOR, MR_BXOR")
	}
}

// root checks a root rank (comm checks it inside the collective; see
// reduction).
func (a *args) root(root int32, size int) {
	a.check(root >= 0 && int(root) < size, "root %d; allowed: 0..%d", root, size-1)
}

// bytes is count elements of dt in bytes (whose name is what).
func (a *args) bytes(what string, count int64, dt comm.DType) int {
	n := Mul(count, int64(dt.Size()))
	if n < 0 && a.err == nil {
		a.err = fmt.Errorf("%w: %s: %s = %d; allowed: >= 0 (and a buffer that fits in memory)", errArg, a.name, what, count)
	}
	return int(max(n, 0))
}

// buf returns the first n bytes of b, or records an error when b is
// shorter (a NULL pointer is an empty b).
func (a *args) buf(what string, b []byte, n int) []byte {
	if a.err != nil {
		return nil
	}
	if len(b) < n {
		if b == nil {
			a.err = fmt.Errorf("%w: %s: %s is NULL; want %d bytes", errArg, a.name, what, n)
		} else {
			a.err = fmt.Errorf("%w: %s: %s holds %d bytes; want %d", errArg, a.name, what, len(b), n)
		}
		return nil
	}
	return b[:n]
}

func (a *args) set(err error) {
	if a.err == nil && err != nil {
		a.err = fmt.Errorf("%w: %s: %s", errArg, a.name, strings.TrimPrefix(err.Error(), errArg.Error()+": "))
	}
}

func (a *args) check(ok bool, format string, v ...any) {
	if a.err == nil && !ok {
		a.err = fmt.Errorf("%w: %s: %s", errArg, a.name, fmt.Sprintf(format, v...))
	}
}

// result is a's error as a code (ErrInvalid) and message.
func (a *args) result() (int32, string) { return Code(a.err) }

// same reports whether a and b start at the same address (in place).
func same(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// ints converts int64 counts to ints.
func ints(v []int64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}
