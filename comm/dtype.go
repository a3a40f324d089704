package comm

import (
	"context"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/multirail/multirail/comm/internal/coll"
)

// DType is an element type of the untyped collectives (AllreduceBytes and
// the other ...Bytes functions), for callers that hold raw memory: the C
// ABI (package capi) and through it PyTorch. The order is the C header's
// mr_dtype.
type DType uint8

// The element types. Bool elements are bytes 0 or 1; Float16 is IEEE 754
// binary16 and BFloat16 the upper half of a float32, both reduced through
// float32 (each rank converts, the reduction runs on float32 values, the
// result is rounded back to nearest even): on the wire they take 4 bytes
// an element in reductions, 2 in the collectives that only move data.
const (
	Uint8 DType = iota
	Int8
	Bool
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
	numDTypes
)

var dtNames = [...]string{Uint8: "uint8", Int8: "int8", Bool: "bool", Int32: "int32", Int64: "int64",
	Float16: "float16", BFloat16: "bfloat16", Float32: "float32", Float64: "float64"}

var dtSizes = [...]int{Uint8: 1, Int8: 1, Bool: 1, Int32: 4, Int64: 8, Float16: 2, BFloat16: 2, Float32: 4, Float64: 8}

// headers' codes of the DTypes
var dtCodes = [...]uint8{Uint8: dtUint8, Int8: dtInt8, Bool: dtBool, Int32: dtInt32, Int64: dtInt64,
	Float16: dtFloat16, BFloat16: dtBFloat16, Float32: dtFloat32, Float64: dtFloat64}

func (d DType) String() string {
	if d < numDTypes {
		return dtNames[d]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the size of one element in bytes (0 for an unknown DType).
func (d DType) Size() int {
	if d < numDTypes {
		return dtSizes[d]
	}
	return 0
}

// ParseDType parses a DType's name ("float32", "bfloat16", ...).
func ParseDType(name string) (DType, error) {
	for d, n := range dtNames {
		if n == name {
			return DType(d), nil
		}
	}
	return 0, fmt.Errorf("%w: element type %q; allowed: uint8, int8, bool, int32, int64, float16, bfloat16, float32, float64", ErrConfig, name)
}

// check validates d and that every buffer holds whole elements.
func (d DType) check(name string, bufs ...[]byte) error {
	if d >= numDTypes {
		return fmt.Errorf("%w: %s: element type %d; allowed: 0..%d (uint8 .. float64)", ErrConfig, name, int(d), int(numDTypes)-1)
	}
	for _, b := range bufs {
		if len(b)%d.Size() != 0 {
			return fmt.Errorf("%w: %s: a buffer of %d bytes holds no whole number of %s elements (%d bytes each)", ErrConfig, name, len(b), d, d.Size())
		}
	}
	return nil
}

// view returns b as a []T (b's memory, no copy). b must be aligned for T:
// Go's allocations and C's malloc are.
func view[T any](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
}

// withCode is opts with the header's element type set to d's.
func withCode(d DType, opts []CollOption) []CollOption {
	return append(opts[:len(opts):len(opts)], func(o *collOpts) { o.dtype = dtCodes[d] })
}

// boolOp maps a reduction of bools onto bytes 0/1: sum, max and or are a
// logical or, prod, min and and a logical and, xor stays xor.
func boolOp(op Op) (Op, error) {
	switch op {
	case Sum, Max, Bor:
		return Bor, nil
	case Prod, Min, Band:
		return Band, nil
	case Bxor:
		return Bxor, nil
	}
	return 0, fmt.Errorf("%w: op %s on bool elements; allowed: sum, prod, min, max, band, bor, bxor", ErrConfig, op)
}

// normBools makes every nonzero byte of b a 1.
func normBools(b []byte) {
	for i, v := range b {
		if v != 0 {
			b[i] = 1
		}
	}
}

// reduceBytes runs a reduction (fn, the typed collective over this rank's
// elements) on raw memory of type d: integers and floats in place as
// their Go types, bools as bytes with boolOp, 16-bit floats through
// float32 copies of send and recv.
func reduceBytes(d DType, op Op, name string, send, recv []byte, fn func(op Op, send, recv any) error) error {
	if err := d.check(name, send, recv); err != nil {
		return err
	}
	switch d {
	case Uint8:
		return fn(op, send, recv)
	case Int8:
		return fn(op, view[int8](send), view[int8](recv))
	case Bool:
		bop, err := boolOp(op)
		if err != nil {
			return err
		}
		// Bytes other than 0 and 1 count as true. In place (recv nil) send
		// is the result; otherwise the caller's send stays as it was.
		if recv != nil && slices.ContainsFunc(send, func(v byte) bool { return v > 1 }) {
			send = slices.Clone(send)
		}
		normBools(send)
		return fn(bop, send, recv) // and, or, xor of 0s and 1s: 0s and 1s
	case Int32:
		return fn(op, view[int32](send), view[int32](recv))
	case Int64:
		return fn(op, view[int64](send), view[int64](recv))
	case Float32:
		return fn(op, view[float32](send), view[float32](recv))
	case Float64:
		return fn(op, view[float64](send), view[float64](recv))
	}
	switch op {
	case Band, Bor, Bxor:
		return fmt.Errorf("%w: %s: op %s needs integer or bool elements, got %s", ErrConfig, name, op, d)
	}
	toF32, fromF32 := Float16ToFloat32, Float32ToFloat16
	if d == BFloat16 {
		toF32, fromF32 = BFloat16ToFloat32, Float32ToBFloat16
	}
	s16, r16 := view[uint16](send), view[uint16](recv)
	s32 := make([]float32, len(s16))
	for i, v := range s16 {
		s32[i] = toF32(v)
	}
	var r32 []float32
	if len(r16) > 0 {
		r32 = make([]float32, len(r16))
	}
	if err := fn(op, s32, r32); err != nil {
		return err
	}
	out16, out32 := r16, r32
	if recv == nil { // in place
		out16, out32 = s16, s32
	}
	for i, v := range out32 {
		out16[i] = fromF32(v)
	}
	return nil
}

// AllreduceBytes is Allreduce over raw memory: buf holds elements of type
// d, reduced in place with op on every rank (16-bit floats through
// float32; bools as logical and/or/xor; Mean truncates for integers).
func AllreduceBytes(ctx context.Context, c *Comm, d DType, buf []byte, op Op, opts ...CollOption) error {
	if d < numDTypes && d != Float32 && applyOpts(opts).lossy != nil {
		return fmt.Errorf("%w: allreduce: the LossTolerant option needs float32, got %s", ErrConfig, d)
	}
	opts = withCode(d, opts)
	return reduceBytes(d, op, "allreduce", buf, nil, func(op Op, send, _ any) error {
		switch v := send.(type) {
		case []uint8:
			return Allreduce(ctx, c, v, op, opts...)
		case []int8:
			return Allreduce(ctx, c, v, op, opts...)
		case []int32:
			return Allreduce(ctx, c, v, op, opts...)
		case []int64:
			return Allreduce(ctx, c, v, op, opts...)
		case []float32:
			return Allreduce(ctx, c, v, op, opts...)
		case []float64:
			return Allreduce(ctx, c, v, op, opts...)
		}
		return fmt.Errorf("comm: allreduce: unexpected buffer %T", send)
	})
}

// ReduceBytes is Reduce over raw memory of type d (see AllreduceBytes);
// recv is used at root only.
func ReduceBytes(ctx context.Context, c *Comm, d DType, send, recv []byte, op Op, root int, opts ...CollOption) error {
	opts = withCode(d, opts)
	return reduceBytes(d, op, "reduce", send, recv, func(op Op, s, r any) error {
		return typed2(s, r, func(s, r any) error {
			switch s := s.(type) {
			case []uint8:
				return Reduce(ctx, c, s, r.([]uint8), op, root, opts...)
			case []int8:
				return Reduce(ctx, c, s, r.([]int8), op, root, opts...)
			case []int32:
				return Reduce(ctx, c, s, r.([]int32), op, root, opts...)
			case []int64:
				return Reduce(ctx, c, s, r.([]int64), op, root, opts...)
			case []float32:
				return Reduce(ctx, c, s, r.([]float32), op, root, opts...)
			case []float64:
				return Reduce(ctx, c, s, r.([]float64), op, root, opts...)
			}
			return fmt.Errorf("comm: reduce: unexpected buffer %T", s)
		})
	})
}

// ReduceScatterBytes is ReduceScatter over raw memory of type d (see
// AllreduceBytes).
func ReduceScatterBytes(ctx context.Context, c *Comm, d DType, send, recv []byte, op Op, opts ...CollOption) error {
	opts = withCode(d, opts)
	return reduceBytes(d, op, "reduce-scatter", send, recv, func(op Op, s, r any) error {
		return typed2(s, r, func(s, r any) error {
			switch s := s.(type) {
			case []uint8:
				return ReduceScatter(ctx, c, s, r.([]uint8), op, opts...)
			case []int8:
				return ReduceScatter(ctx, c, s, r.([]int8), op, opts...)
			case []int32:
				return ReduceScatter(ctx, c, s, r.([]int32), op, opts...)
			case []int64:
				return ReduceScatter(ctx, c, s, r.([]int64), op, opts...)
			case []float32:
				return ReduceScatter(ctx, c, s, r.([]float32), op, opts...)
			case []float64:
				return ReduceScatter(ctx, c, s, r.([]float64), op, opts...)
			}
			return fmt.Errorf("comm: reduce-scatter: unexpected buffer %T", s)
		})
	})
}

// typed2 makes a nil second buffer an empty slice of the first's type.
func typed2(s, r any, fn func(s, r any) error) error {
	if r == nil {
		switch s.(type) {
		case []uint8:
			r = []uint8(nil)
		case []int8:
			r = []int8(nil)
		case []int32:
			r = []int32(nil)
		case []int64:
			r = []int64(nil)
		case []float32:
			r = []float32(nil)
		case []float64:
			r = []float64(nil)
		}
	}
	return fn(s, r)
}

// moveBytes checks d and the buffers of a collective that only moves
// elements, which then runs on bytes: n elements of d are n*Size bytes.
func moveBytes(d DType, name string, bufs ...[]byte) error { return d.check(name, bufs...) }

// BcastBytes is Bcast over raw memory of type d.
func BcastBytes(ctx context.Context, c *Comm, d DType, buf []byte, root int, opts ...CollOption) error {
	if err := moveBytes(d, "bcast", buf); err != nil {
		return err
	}
	return Bcast(ctx, c, buf, root, withCode(d, opts)...)
}

// AllgatherBytes is Allgather over raw memory of type d.
func AllgatherBytes(ctx context.Context, c *Comm, d DType, send, recv []byte, opts ...CollOption) error {
	if err := moveBytes(d, "allgather", send, recv); err != nil {
		return err
	}
	return Allgather(ctx, c, send, recv, withCode(d, opts)...)
}

// AlltoallBytes is Alltoall over raw memory of type d: block j of send
// (len(send)/Size() bytes, whole elements) goes to rank j.
func AlltoallBytes(ctx context.Context, c *Comm, d DType, send, recv []byte, opts ...CollOption) error {
	if err := moveBytes(d, "alltoall", send, recv); err != nil {
		return err
	}
	if n := c.Size(); len(send)%(n*max(d.Size(), 1)) != 0 {
		return fmt.Errorf("%w: alltoall: send has %d bytes; want whole %s elements for each of the %d ranks", ErrConfig, len(send), d, n)
	}
	return Alltoall(ctx, c, send, recv, withCode(d, opts)...)
}

// GatherBytes is Gather over raw memory of type d.
func GatherBytes(ctx context.Context, c *Comm, d DType, send, recv []byte, root int, opts ...CollOption) error {
	if err := moveBytes(d, "gather", send, recv); err != nil {
		return err
	}
	return Gather(ctx, c, send, recv, root, withCode(d, opts)...)
}

// ScatterBytes is Scatter over raw memory of type d.
func ScatterBytes(ctx context.Context, c *Comm, d DType, send, recv []byte, root int, opts ...CollOption) error {
	if err := moveBytes(d, "scatter", send, recv); err != nil {
		return err
	}
	return Scatter(ctx, c, send, recv, root, withCode(d, opts)...)
}

// AlltoallvBytes is Alltoallv over raw memory of type d; counts and
// displacements are in elements.
func AlltoallvBytes(ctx context.Context, c *Comm, d DType, send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int, opts ...CollOption) error {
	if err := moveBytes(d, "alltoallv", send, recv); err != nil {
		return err
	}
	sz := d.Size()
	scale := func(v []int) []int {
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = x * sz
		}
		return out
	}
	return Alltoallv(ctx, c, send, scale(sendCounts), scale(sendDispls), recv, scale(recvCounts), scale(recvDispls), withCode(d, opts)...)
}

// Alltoallv sends send[sendDispls[j]:][:sendCounts[j]] to rank j, where it
// lands at recv[recvDispls[r]:][:recvCounts[r]] (r this rank): every pair
// of ranks may exchange a different number of elements. Rank j's
// recvCounts[r] must equal rank r's sendCounts[j]: a rank that receives a
// block of another length fails the call, and every rank's next
// collective on c fails with it (ranks whose own blocks matched may have
// returned from this call already). Counts and displacements have Size()
// entries.
func Alltoallv[T Number](ctx context.Context, c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int, opts ...CollOption) error {
	code, size, _ := dtypeOf[T]()
	return c.collective(ctx, CollAlltoallv, code, size, Sum, -1, 0, applyOpts(opts), func(t coll.Transport, a Algo) error {
		return coll.Alltoallv(ctx, t, send, sendCounts, sendDispls, recv, recvCounts, recvDispls, a)
	})
}

// Float16ToFloat32 converts an IEEE 754 binary16 value (its bits) to
// float32, exactly.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float32ToFloat16 rounds f to the nearest binary16 value (ties to even);
// out of range gives ±Inf, NaN stays NaN.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal or zero in binary16
		if e < -10 {
			return sign
		}
		m := mant | 0x800000 // the implicit bit
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		rest := m & (1<<shift - 1)
		if rest > half || (rest == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rest := mant & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, up to Inf: still right
	}
	return sign | uint16(r)
}

// BFloat16ToFloat32 converts a bfloat16 value (its bits) to float32,
// exactly.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBFloat16 rounds f to the nearest bfloat16 (ties to even); NaN
// stays NaN.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
