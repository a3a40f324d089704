package coll

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"sync"
	"unsafe"
)

// hostLittleEndian reports whether the host stores numbers little-endian,
// in which case element slices are sent and received without conversion.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func elemSize[T Number]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// asBytes returns the wire form of v: a view of v's memory on a
// little-endian host, an encoded copy otherwise.
func asBytes[T Number](v []T) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	if hostLittleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*elemSize[T]())
	}
	b := make([]byte, len(v)*elemSize[T]())
	putLE(b, v)
	return b
}

// viewAs returns b as a []T without copying when the host is
// little-endian and b is suitably aligned; ok is false otherwise.
func viewAs[T Number](b []byte) (v []T, ok bool) {
	sz := elemSize[T]()
	if !hostLittleEndian || len(b)%sz != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return nil, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(sz) != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(p), len(b)/sz), true
}

// decode fills dst from its wire form b (len(b) == len(dst)*elemSize).
func decode[T Number](dst []T, b []byte) {
	if hostLittleEndian {
		copy(asBytes(dst), b)
		return
	}
	getLE(dst, b)
}

// putLE encodes v into b little-endian, element by element.
func putLE[T Number](b []byte, v []T) {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Float32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		}
	case reflect.Float64:
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(x)))
		}
	case reflect.Int32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(x)))
		}
	case reflect.Int64:
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(x)))
		}
	case reflect.Int8, reflect.Uint8:
		copy(b, rawBytes(v))
	}
}

// getLE decodes little-endian b into v, element by element.
func getLE[T Number](v []T, b []byte) {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Float32:
		for i := range v {
			v[i] = T(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case reflect.Float64:
		for i := range v {
			v[i] = T(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	case reflect.Int32:
		for i := range v {
			v[i] = T(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case reflect.Int64:
		for i := range v {
			v[i] = T(int64(binary.LittleEndian.Uint64(b[8*i:])))
		}
	case reflect.Int8, reflect.Uint8:
		copy(rawBytes(v), b)
	}
}

// apply sets acc[i] = acc[i] op in[i]; len(in) == len(acc).
func apply[T Number](op Op, acc, in []T) {
	in = in[:len(acc)]
	switch op {
	case Sum:
		for i := range acc {
			acc[i] += in[i]
		}
	case Prod:
		for i := range acc {
			acc[i] *= in[i]
		}
	case Min:
		for i := range acc {
			acc[i] = min(acc[i], in[i])
		}
	case Max:
		for i := range acc {
			acc[i] = max(acc[i], in[i])
		}
	case Band, Bor, Bxor:
		applyBits(op, rawBytes(acc), rawBytes(in))
	}
}

// rawBytes is v's memory as bytes, whatever the host's byte order.
func rawBytes[T Number](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*elemSize[T]())
}

// applyBits applies a bitwise op byte by byte: for and, or and xor that is
// the op on every element, of any size and byte order.
func applyBits(op Op, acc, in []byte) {
	in = in[:len(acc)]
	switch op {
	case Band:
		for i := range acc {
			acc[i] &= in[i]
		}
	case Bor:
		for i := range acc {
			acc[i] |= in[i]
		}
	case Bxor:
		for i := range acc {
			acc[i] ^= in[i]
		}
	}
}

// group runs functions concurrently under a shared context that is
// cancelled as soon as one of them fails; wait returns the first error.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func newGroup(ctx context.Context) *group {
	ctx, cancel := context.WithCancel(ctx)
	return &group{ctx: ctx, cancel: cancel}
}

// fail records err if it is the first error and cancels the group.
func (g *group) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
		g.cancel()
	}
}

// do runs f in the calling goroutine.
func (g *group) do(f func(ctx context.Context) error) {
	if err := f(g.ctx); err != nil {
		g.fail(err)
	}
}

// spawn runs f in a new goroutine.
func (g *group) spawn(f func(ctx context.Context) error) {
	g.wg.Go(func() { g.do(f) })
}

// wait waits for every spawned function and returns the first error.
func (g *group) wait() error {
	g.wg.Wait()
	g.cancel()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func sendErr(dst, step int, err error) error {
	return fmt.Errorf("send to rank %d step %d: %w", dst, step, err)
}

func recvErr(src, step int, err error) error {
	return fmt.Errorf("recv from rank %d step %d: %w", src, step, err)
}

// sendRecv sends sbuf to dst as step sstep while receiving step rstep
// from src. It returns when both are done, with the first error; a failure
// of either cancels the other. The send goes first from this goroutine
// when the transport can send it without waiting (TrySender), else
// concurrently with the receive.
func sendRecv(ctx context.Context, t Transport, dst, sstep int, sbuf []byte, src, rstep int) ([]byte, error) {
	if ts, ok := t.(TrySender); ok {
		sent, err := ts.TrySend(ctx, dst, sstep, sbuf)
		if err != nil {
			return nil, sendErr(dst, sstep, err)
		}
		if sent {
			b, err := t.Recv(ctx, src, rstep)
			if err != nil {
				return nil, recvErr(src, rstep, err)
			}
			return b, nil
		}
	}
	g := newGroup(ctx)
	g.spawn(func(ctx context.Context) error {
		if err := t.Send(ctx, dst, sstep, sbuf); err != nil {
			return sendErr(dst, sstep, err)
		}
		return nil
	})
	var got []byte
	g.do(func(ctx context.Context) error {
		b, err := t.Recv(ctx, src, rstep)
		if err != nil {
			return recvErr(src, rstep, err)
		}
		got = b
		return nil
	})
	if err := g.wait(); err != nil {
		return nil, err
	}
	return got, nil
}

// xfer sends and receives element slices of one call for one rank.
type xfer[T Number] struct {
	ctx     context.Context
	t       Transport
	op      Op
	scratch []T // decode space for misaligned or big-endian messages
}

func newXfer[T Number](ctx context.Context, t Transport, op Op) *xfer[T] {
	return &xfer[T]{ctx: ctx, t: t, op: op}
}

// with returns a copy of x using ctx, with its own scratch space, for use
// by another goroutine.
func (x *xfer[T]) with(ctx context.Context) *xfer[T] {
	return &xfer[T]{ctx: ctx, t: x.t, op: x.op}
}

func (x *xfer[T]) send(dst, step int, v []T) error {
	if err := x.t.Send(x.ctx, dst, step, asBytes(v)); err != nil {
		return sendErr(dst, step, err)
	}
	return nil
}

func (x *xfer[T]) recvBytes(src, step int, want int) ([]byte, error) {
	b, err := x.t.Recv(x.ctx, src, step)
	if err != nil {
		return nil, recvErr(src, step, err)
	}
	return b, x.checkLen(src, step, b, want)
}

func (x *xfer[T]) checkLen(src, step int, b []byte, want int) error {
	if len(b) != want*elemSize[T]() {
		return fmt.Errorf("recv from rank %d step %d: got %d bytes, want %d (%d elements): ranks disagree on the call's arguments",
			src, step, len(b), want*elemSize[T](), want)
	}
	return nil
}

// recv receives step from src into dst.
func (x *xfer[T]) recv(src, step int, dst []T) error {
	b, err := x.recvBytes(src, step, len(dst))
	if err != nil {
		return err
	}
	decode(dst, b)
	return nil
}

// recvReduce receives step from src and reduces it into acc.
func (x *xfer[T]) recvReduce(src, step int, acc []T) error {
	b, err := x.recvBytes(src, step, len(acc))
	if err != nil {
		return err
	}
	x.reduceBytes(acc, b)
	return nil
}

// reduceBytes reduces the wire-form vector b into acc.
func (x *xfer[T]) reduceBytes(acc []T, b []byte) {
	in, ok := viewAs[T](b)
	if !ok {
		if cap(x.scratch) < len(acc) {
			x.scratch = make([]T, len(acc))
		}
		in = x.scratch[:len(acc)]
		decode(in, b)
	}
	apply(x.op, acc, in)
}

// sendRecv sends sv to dst as step sstep while receiving step rstep from
// src into dst; sv and rv must not overlap.
func (x *xfer[T]) sendRecv(dst, sstep int, sv []T, src, rstep int, rv []T) error {
	b, err := sendRecv(x.ctx, x.t, dst, sstep, asBytes(sv), src, rstep)
	if err != nil {
		return err
	}
	if err := x.checkLen(src, rstep, b, len(rv)); err != nil {
		return err
	}
	decode(rv, b)
	return nil
}

// sendRecvReduce is sendRecv reducing what it receives into acc. sv may
// overlap acc: acc is only written once the send is done.
func (x *xfer[T]) sendRecvReduce(dst, sstep int, sv []T, src, rstep int, acc []T) error {
	b, err := sendRecv(x.ctx, x.t, dst, sstep, asBytes(sv), src, rstep)
	if err != nil {
		return err
	}
	if err := x.checkLen(src, rstep, b, len(acc)); err != nil {
		return err
	}
	x.reduceBytes(acc, b)
	return nil
}
