package capi

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/multirail/multirail/comm"
)

// enc writes integer-valued vals as elements of mr_dtype dt.
func enc(dt int32, vals []float64) []byte {
	sz := comm.DType(dt).Size()
	b := make([]byte, sz*len(vals))
	for i, v := range vals {
		p := b[sz*i:]
		switch dt {
		case 0, 2: // uint8, bool
			p[0] = byte(v)
		case 1:
			p[0] = byte(int8(v))
		case 3:
			binary.LittleEndian.PutUint32(p, uint32(int32(v)))
		case 4:
			binary.LittleEndian.PutUint64(p, uint64(int64(v)))
		case 5:
			binary.LittleEndian.PutUint16(p, comm.Float32ToFloat16(float32(v)))
		case 6:
			binary.LittleEndian.PutUint16(p, comm.Float32ToBFloat16(float32(v)))
		case 7:
			binary.LittleEndian.PutUint32(p, math.Float32bits(float32(v)))
		case 8:
			binary.LittleEndian.PutUint64(p, math.Float64bits(v))
		}
	}
	return b
}

// dec reads elements of mr_dtype dt.
func dec(dt int32, b []byte) []float64 {
	sz := comm.DType(dt).Size()
	v := make([]float64, len(b)/sz)
	for i := range v {
		p := b[sz*i:]
		switch dt {
		case 0, 2:
			v[i] = float64(p[0])
		case 1:
			v[i] = float64(int8(p[0]))
		case 3:
			v[i] = float64(int32(binary.LittleEndian.Uint32(p)))
		case 4:
			v[i] = float64(int64(binary.LittleEndian.Uint64(p)))
		case 5:
			v[i] = float64(comm.Float16ToFloat32(binary.LittleEndian.Uint16(p)))
		case 6:
			v[i] = float64(comm.BFloat16ToFloat32(binary.LittleEndian.Uint16(p)))
		case 7:
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
		case 8:
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(p))
		}
	}
	return v
}

// TestDTypeOp runs allreduce for every mr_dtype x mr_op on 3 ranks:
// integer-valued data against the reduction computed here, bitwise ops on
// floats and avg on bools refused with MR_ERR_INVALID on every rank.
func TestDTypeOp(t *testing.T) {
	hs := world(t, 3)
	const n = 9
	val := func(dt int32, r, i int) float64 {
		switch dt {
		case 2: // bool: rank 2 writes true as 2 (any nonzero byte is true)
			if (r+i)%2 == 0 {
				return 0
			}
			return float64(1 + r/2)
		case 0:
			return float64((r + 1) * (1 + i%3))
		}
		return float64((r+1)*(1+i%3) - 3)
	}
	for dt := int32(0); dt < NumDTypes; dt++ {
		for op := int32(0); op < NumOps; op++ {
			t.Run(fmt.Sprintf("%s/%s", dtNames[dt], opNames[op]), func(t *testing.T) {
				isFloat := dt >= 5
				refused := isFloat && op >= 5 || dt == 2 && op == 4
				exp := make([]float64, n)
				for i := range exp {
					var v [3]int64
					for r := range v {
						v[r] = int64(val(dt, r, i))
						if dt == 2 && v[r] != 0 {
							v[r] = 1
						}
					}
					var x int64
					switch op {
					case 0:
						x = v[0] + v[1] + v[2]
					case 1:
						x = v[0] * v[1] * v[2]
					case 2:
						x = min(v[0], v[1], v[2])
					case 3:
						x = max(v[0], v[1], v[2])
					case 4:
						x = (v[0] + v[1] + v[2]) / 3
					case 5:
						x = v[0] & v[1] & v[2]
					case 6:
						x = v[0] | v[1] | v[2]
					case 7:
						x = v[0] ^ v[1] ^ v[2]
					}
					exp[i] = float64(x)
					if dt == 2 {
						switch op {
						case 0, 3: // or
							x = min(v[0]+v[1]+v[2], 1)
						case 1, 2: // and
							x = v[0] & v[1] & v[2]
						}
						exp[i] = float64(x)
					}
					if op == 4 && isFloat {
						sum := float64(v[0] + v[1] + v[2])
						if dt == 8 {
							exp[i] = sum / 3
						} else {
							exp[i] = float64(float32(sum) / 3)
						}
					}
				}
				exp = dec(dt, enc(dt, exp)) // rounded to the type
				onAll(t, hs, func(r int, h int64) {
					in := make([]float64, n)
					for i := range in {
						in[i] = val(dt, r, i)
					}
					send := enc(dt, in)
					recv := make([]byte, len(send))
					c, m := Allreduce(h, send, recv, n, dt, op)
					if refused {
						want(t, "allreduce", ErrInvalid, c, m)
						return
					}
					ok(t, "allreduce", c, m)
					got := dec(dt, recv)
					for i := range got {
						if got[i] != exp[i] {
							t.Errorf("rank %d: [%d] = %v, want %v (all: %v, want %v)", r, i, got[i], exp[i], got, exp)
							break
						}
					}
				})
			})
		}
	}
}
