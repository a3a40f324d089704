// Command lib is libmultirail.so, the C ABI of multirail's communicator
// (capi/multirail.h), built by `sh scripts/build-capi.sh` with
// -buildmode=c-shared.
//
// The exported C functions mr_* are in mr.c: each compares getpid() with
// the pid recorded when the library was loaded (a forked child must not
// enter the Go runtime, golang/go#15538) and then calls its mrgo_* shim
// here. The shims are thin: they turn C pointers into Go slices over the
// same memory (no copy), call package capi, which holds all the logic,
// and write the code and message into the caller's mr_error. Only mr_*
// symbols are exported from the .so (exports.map).
package main

/*
#cgo CFLAGS: -I${SRCDIR}/.. -O2 -Wall
#include <stdlib.h>
#include "multirail.h"
*/
import "C"

import (
	"unsafe"

	"github.com/multirail/multirail/capi"
)

func main() {}

// ret writes code c and message m into *err (when err is not NULL) and
// returns c.
func ret(err *C.mr_error, c int32, m string) C.int {
	if err != nil {
		err.code = C.int32_t(c)
		b := unsafe.Slice((*byte)(unsafe.Pointer(&err.msg[0])), len(err.msg))
		n := copy(b[:len(b)-1], m)
		b[n] = 0
	}
	return C.int(c)
}

// guard turns a panic in a shim into MR_ERR_PANIC (package capi recovers
// its own; this catches the shims').
func guard(err *C.mr_error, r *C.int) {
	if p := recover(); p != nil {
		*r = ret(err, capi.ErrPanic, capi.Message("multirail: panic in the C shim (a bug in the library, please report it): "+panicText(p)))
	}
}

func panicText(p any) string {
	if e, ok := p.(error); ok {
		return e.Error()
	}
	if s, ok := p.(string); ok {
		return s
	}
	return "unknown panic value"
}

func gostr(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

func view(p unsafe.Pointer, n int64) []byte { return capi.View(p, n) }

func bad(err *C.mr_error, format string) C.int { return ret(err, capi.ErrInvalid, format) }

// ---- Starting ------------------------------------------------------------

//export mrgo_init_env
func mrgo_init_env(cfg *C.char, out *C.mr_comm, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_init_env: out is NULL")
	}
	h, c, m := capi.InitEnv(gostr(cfg))
	if c == capi.OK {
		*out = C.mr_comm(h)
	}
	return ret(err, c, m)
}

//export mrgo_new_token
func mrgo_new_token(buf *C.char, n C.int64_t, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.NewToken(view(unsafe.Pointer(buf), int64(n)))
	return ret(err, c, m)
}

//export mrgo_prepare
func mrgo_prepare(cfg *C.char, rank, size C.int, token *C.char, out *C.mr_pending, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_prepare: out is NULL")
	}
	p, c, m := capi.Prepare(gostr(cfg), int32(rank), int32(size), gostr(token))
	if c == capi.OK {
		*out = C.mr_pending(p)
	}
	return ret(err, c, m)
}

//export mrgo_pending_card
func mrgo_pending_card(p C.mr_pending, buf *C.char, n C.int64_t, err *C.mr_error) (r C.int64_t) {
	defer func() {
		if p := recover(); p != nil {
			r = C.int64_t(ret(err, capi.ErrPanic, capi.Message("multirail: panic in the C shim: "+panicText(p))))
		}
	}()
	if n < 0 {
		return C.int64_t(bad(err, "multirail: mr_pending_card: len < 0"))
	}
	ln, c, m := capi.PendingCard(int64(p), view(unsafe.Pointer(buf), int64(n)))
	ret(err, c, m)
	if c != capi.OK {
		return C.int64_t(c)
	}
	return C.int64_t(ln)
}

//export mrgo_connect
func mrgo_connect(p C.mr_pending, cards **C.char, lens *C.int64_t, out *C.mr_comm, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_connect: out is NULL")
	}
	size := capi.PendingSize(int64(p))
	var cs [][]byte
	if size > 0 {
		if cards == nil || lens == nil {
			return bad(err, "multirail: mr_connect: cards or card_lens is NULL")
		}
		ptrs := unsafe.Slice(cards, size)
		ls := unsafe.Slice(lens, size)
		cs = make([][]byte, size)
		for i := range cs {
			cs[i] = view(unsafe.Pointer(ptrs[i]), int64(ls[i]))
		}
	}
	h, c, m := capi.Connect(int64(p), cs)
	if c == capi.OK {
		*out = C.mr_comm(h)
	}
	return ret(err, c, m)
}

//export mrgo_pending_free
func mrgo_pending_free(p C.mr_pending, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.PendingFree(int64(p))
	return ret(err, c, m)
}

//export mrgo_comm_rank
func mrgo_comm_rank(h C.mr_comm) C.int { return C.int(capi.CommRank(int64(h))) }

//export mrgo_comm_size
func mrgo_comm_size(h C.mr_comm) C.int { return C.int(capi.CommSize(int64(h))) }

//export mrgo_comm_group
func mrgo_comm_group(h C.mr_comm, ranks *C.int32_t, n C.int32_t, key *C.char, out *C.mr_comm, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_comm_group: out is NULL")
	}
	var rs []int32
	if ranks != nil && n > 0 {
		rs = unsafe.Slice((*int32)(unsafe.Pointer(ranks)), int(n))
	}
	g, c, m := capi.Group(int64(h), rs, gostr(key))
	if c == capi.OK {
		*out = C.mr_comm(g)
	}
	return ret(err, c, m)
}

//export mrgo_comm_free
func mrgo_comm_free(h C.mr_comm, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.Free(int64(h))
	return ret(err, c, m)
}

//export mrgo_abort
func mrgo_abort(h C.mr_comm, reason *C.char, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.Abort(int64(h), gostr(reason))
	return ret(err, c, m)
}

// ---- Collectives ------------------------------------------------------------

// sizes are the byte lengths of a call's buffers: n = count elements of
// dtype, all = size*n (-1 when invalid: the views are then nil and capi
// reports the bad argument).
func sizes(h C.mr_comm, count C.int64_t, dtype C.int) (n, all int64) {
	n = capi.ElemBytes(int64(count), int32(dtype))
	return n, capi.Mul(n, int64(capi.CommSize(int64(h))))
}

// req writes a nonblocking call's request handle.
func req(out *C.mr_request, id int64, c int32) {
	if c == capi.OK {
		*out = C.mr_request(id)
	}
}

//export mrgo_barrier
func mrgo_barrier(h C.mr_comm, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.Barrier(int64(h))
	return ret(err, c, m)
}

//export mrgo_ibarrier
func mrgo_ibarrier(h C.mr_comm, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_ibarrier: req is NULL")
	}
	id, c, m := capi.Ibarrier(int64(h))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_bcast
func mrgo_bcast(h C.mr_comm, buf unsafe.Pointer, count C.int64_t, dtype, root C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	n, _ := sizes(h, count, dtype)
	c, m := capi.Bcast(int64(h), view(buf, n), int64(count), int32(dtype), int32(root))
	return ret(err, c, m)
}

//export mrgo_ibcast
func mrgo_ibcast(h C.mr_comm, buf unsafe.Pointer, count C.int64_t, dtype, root C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_ibcast: req is NULL")
	}
	n, _ := sizes(h, count, dtype)
	id, c, m := capi.Ibcast(int64(h), view(buf, n), int64(count), int32(dtype), int32(root))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_reduce
func mrgo_reduce(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, op, root C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	n, _ := sizes(h, count, dtype)
	c, m := capi.Reduce(int64(h), view(send, n), view(recv, n), int64(count), int32(dtype), int32(op), int32(root))
	return ret(err, c, m)
}

//export mrgo_ireduce
func mrgo_ireduce(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, op, root C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_ireduce: req is NULL")
	}
	n, _ := sizes(h, count, dtype)
	id, c, m := capi.Ireduce(int64(h), view(send, n), view(recv, n), int64(count), int32(dtype), int32(op), int32(root))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_allreduce
func mrgo_allreduce(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, op C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	n, _ := sizes(h, count, dtype)
	c, m := capi.Allreduce(int64(h), view(send, n), view(recv, n), int64(count), int32(dtype), int32(op))
	return ret(err, c, m)
}

//export mrgo_iallreduce
func mrgo_iallreduce(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, op C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_iallreduce: req is NULL")
	}
	n, _ := sizes(h, count, dtype)
	id, c, m := capi.Iallreduce(int64(h), view(send, n), view(recv, n), int64(count), int32(dtype), int32(op))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_allgather
func mrgo_allgather(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	n, all := sizes(h, count, dtype)
	c, m := capi.Allgather(int64(h), view(send, n), view(recv, all), int64(count), int32(dtype))
	return ret(err, c, m)
}

//export mrgo_iallgather
func mrgo_iallgather(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_iallgather: req is NULL")
	}
	n, all := sizes(h, count, dtype)
	id, c, m := capi.Iallgather(int64(h), view(send, n), view(recv, all), int64(count), int32(dtype))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_reduce_scatter
func mrgo_reduce_scatter(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, op C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	n, all := sizes(h, count, dtype)
	c, m := capi.ReduceScatter(int64(h), view(send, all), view(recv, n), int64(count), int32(dtype), int32(op))
	return ret(err, c, m)
}

//export mrgo_ireduce_scatter
func mrgo_ireduce_scatter(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, op C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_ireduce_scatter: req is NULL")
	}
	n, all := sizes(h, count, dtype)
	id, c, m := capi.IreduceScatter(int64(h), view(send, all), view(recv, n), int64(count), int32(dtype), int32(op))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_alltoall
func mrgo_alltoall(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	_, all := sizes(h, count, dtype)
	c, m := capi.Alltoall(int64(h), view(send, all), view(recv, all), int64(count), int32(dtype))
	return ret(err, c, m)
}

//export mrgo_ialltoall
func mrgo_ialltoall(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_ialltoall: req is NULL")
	}
	_, all := sizes(h, count, dtype)
	id, c, m := capi.Ialltoall(int64(h), view(send, all), view(recv, all), int64(count), int32(dtype))
	req(out, id, c)
	return ret(err, c, m)
}

// vargs are alltoallv's arguments as slices over the caller's memory.
func vargs(h C.mr_comm, send unsafe.Pointer, sc, sd *C.int64_t, recv unsafe.Pointer, rc, rd *C.int64_t, dtype C.int) (s []byte, scs, sds []int64, rv []byte, rcs, rds []int64) {
	size := int64(capi.CommSize(int64(h)))
	ints := func(p *C.int64_t) []int64 { return capi.Int64s(unsafe.Pointer(p), size) }
	scs, sds, rcs, rds = ints(sc), ints(sd), ints(rc), ints(rd)
	elem := capi.ElemBytes(1, int32(dtype))
	return view(send, capi.Extent(scs, sds, elem)), scs, sds, view(recv, capi.Extent(rcs, rds, elem)), rcs, rds
}

//export mrgo_alltoallv
func mrgo_alltoallv(h C.mr_comm, send unsafe.Pointer, sc, sd *C.int64_t, recv unsafe.Pointer, rc, rd *C.int64_t, dtype C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	s, scs, sds, rv, rcs, rds := vargs(h, send, sc, sd, recv, rc, rd, dtype)
	c, m := capi.Alltoallv(int64(h), s, scs, sds, rv, rcs, rds, int32(dtype))
	return ret(err, c, m)
}

//export mrgo_ialltoallv
func mrgo_ialltoallv(h C.mr_comm, send unsafe.Pointer, sc, sd *C.int64_t, recv unsafe.Pointer, rc, rd *C.int64_t, dtype C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_ialltoallv: req is NULL")
	}
	s, scs, sds, rv, rcs, rds := vargs(h, send, sc, sd, recv, rc, rd, dtype)
	// The counts and displacements are copied by the call; the buffers
	// are used in place until the request completes.
	id, c, m := capi.Ialltoallv(int64(h), s, scs, sds, rv, rcs, rds, int32(dtype))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_gather
func mrgo_gather(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, root C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	n, all := sizes(h, count, dtype)
	c, m := capi.Gather(int64(h), view(send, n), view(recv, all), int64(count), int32(dtype), int32(root))
	return ret(err, c, m)
}

//export mrgo_igather
func mrgo_igather(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, root C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_igather: req is NULL")
	}
	n, all := sizes(h, count, dtype)
	id, c, m := capi.Igather(int64(h), view(send, n), view(recv, all), int64(count), int32(dtype), int32(root))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_scatter
func mrgo_scatter(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, root C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	n, all := sizes(h, count, dtype)
	c, m := capi.Scatter(int64(h), view(send, all), view(recv, n), int64(count), int32(dtype), int32(root))
	return ret(err, c, m)
}

//export mrgo_iscatter
func mrgo_iscatter(h C.mr_comm, send, recv unsafe.Pointer, count C.int64_t, dtype, root C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_iscatter: req is NULL")
	}
	n, all := sizes(h, count, dtype)
	id, c, m := capi.Iscatter(int64(h), view(send, all), view(recv, n), int64(count), int32(dtype), int32(root))
	req(out, id, c)
	return ret(err, c, m)
}

// ---- Point to point -----------------------------------------------------

// p2pBuf checks a point-to-point buffer: bytes >= 0, not NULL when > 0.
func p2pBuf(name string, buf unsafe.Pointer, n C.int64_t) ([]byte, string) {
	switch {
	case n < 0:
		return nil, "multirail: " + name + ": bytes < 0"
	case n > 0 && buf == nil:
		return nil, "multirail: " + name + ": buf is NULL"
	}
	return view(buf, int64(n)), ""
}

func status(st *C.mr_status, s capi.Status) {
	if st != nil {
		st.source, st.tag, st.bytes = C.int32_t(s.Source), C.int32_t(s.Tag), C.int64_t(s.Bytes)
	}
}

//export mrgo_send
func mrgo_send(h C.mr_comm, buf unsafe.Pointer, n C.int64_t, dst, tag C.int, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	b, msg := p2pBuf("mr_send", buf, n)
	if msg != "" {
		return bad(err, msg)
	}
	c, m := capi.Send(int64(h), b, int32(dst), int32(tag))
	return ret(err, c, m)
}

//export mrgo_recv
func mrgo_recv(h C.mr_comm, buf unsafe.Pointer, n C.int64_t, src, tag C.int, st *C.mr_status, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	b, msg := p2pBuf("mr_recv", buf, n)
	if msg != "" {
		return bad(err, msg)
	}
	s, c, m := capi.Recv(int64(h), b, int32(src), int32(tag))
	status(st, s)
	return ret(err, c, m)
}

//export mrgo_isend
func mrgo_isend(h C.mr_comm, buf unsafe.Pointer, n C.int64_t, dst, tag C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	b, msg := p2pBuf("mr_isend", buf, n)
	if msg == "" && out == nil {
		msg = "multirail: mr_isend: req is NULL"
	}
	if msg != "" {
		return bad(err, msg)
	}
	id, c, m := capi.Isend(int64(h), b, int32(dst), int32(tag))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_irecv
func mrgo_irecv(h C.mr_comm, buf unsafe.Pointer, n C.int64_t, src, tag C.int, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	b, msg := p2pBuf("mr_irecv", buf, n)
	if msg == "" && out == nil {
		msg = "multirail: mr_irecv: req is NULL"
	}
	if msg != "" {
		return bad(err, msg)
	}
	id, c, m := capi.Irecv(int64(h), b, int32(src), int32(tag))
	req(out, id, c)
	return ret(err, c, m)
}

// ---- Loss-tolerant allreduce -------------------------------------------------

//export mrgo_lossy_allreduce
func mrgo_lossy_allreduce(h C.mr_comm, buf *C.float, count C.int64_t, op C.int, stream C.int64_t, opts *C.char, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.LossyAllreduce(int64(h), view(unsafe.Pointer(buf), capi.Mul(int64(count), 4)), int64(count), int32(op), int64(stream), gostr(opts))
	return ret(err, c, m)
}

//export mrgo_ilossy_allreduce
func mrgo_ilossy_allreduce(h C.mr_comm, buf *C.float, count C.int64_t, op C.int, stream C.int64_t, opts *C.char, out *C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_ilossy_allreduce: req is NULL")
	}
	id, c, m := capi.IlossyAllreduce(int64(h), view(unsafe.Pointer(buf), capi.Mul(int64(count), 4)), int64(count), int32(op), int64(stream), gostr(opts))
	req(out, id, c)
	return ret(err, c, m)
}

//export mrgo_lossy_report
func mrgo_lossy_report(h C.mr_comm, stream C.int64_t, q C.double, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.LossyReport(int64(h), int64(stream), float64(q))
	return ret(err, c, m)
}

//export mrgo_lossy_stats
func mrgo_lossy_stats(h C.mr_comm, stream C.int64_t, out *C.mr_lossy_stats_t, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if out == nil {
		return bad(err, "multirail: mr_lossy_stats: out is NULL")
	}
	st, c, m := capi.GetLossyStats(int64(h), int64(stream))
	if c == capi.OK {
		out.packets, out.discarded = C.int64_t(st.Packets), C.int64_t(st.Discarded)
		out.received, out.missing = C.int64_t(st.Received), C.int64_t(st.Missing)
	}
	return ret(err, c, m)
}

// ---- Requests -----------------------------------------------------------------

//export mrgo_test
func mrgo_test(rq C.mr_request, done *C.int, st *C.mr_status, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	if done == nil {
		return bad(err, "multirail: mr_test: done is NULL")
	}
	d, s, c, m := capi.Test(int64(rq))
	*done = 0
	if d {
		*done = 1
		status(st, s)
	}
	return ret(err, c, m)
}

//export mrgo_wait
func mrgo_wait(rq C.mr_request, timeout C.int64_t, st *C.mr_status, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	s, c, m := capi.Wait(int64(rq), int64(timeout))
	if c != capi.ErrTimeout && c != capi.ErrInvalid && c != capi.ErrFork {
		status(st, s)
	}
	return ret(err, c, m)
}

//export mrgo_poll
func mrgo_poll(h C.mr_comm, out *C.mr_request, max C.int32_t, timeout C.int64_t, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	var ids []int64
	if out != nil && max > 0 {
		ids = unsafe.Slice((*int64)(unsafe.Pointer(out)), int(max))
	}
	n, c, m := capi.Poll(int64(h), ids, int64(timeout))
	ret(err, c, m)
	if c != capi.OK {
		return C.int(c)
	}
	return C.int(n)
}

//export mrgo_request_free
func mrgo_request_free(rq C.mr_request, err *C.mr_error) (r C.int) {
	defer guard(err, &r)
	c, m := capi.RequestFree(int64(rq))
	return ret(err, c, m)
}
