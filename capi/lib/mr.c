/* mr.c: the exported functions of libmultirail.so.
 *
 * Every mr_* function first checks that it runs in the process that
 * loaded the library: a child created by fork() has only the thread that
 * called fork, the Go runtime's other threads are gone, and the first call
 * that needs them hangs (golang/go#15538). So the check is made here, in
 * C, before anything enters Go: on a pid other than the one recorded by
 * the constructor at load, the call writes MR_ERR_FORK and a message into
 * *err and returns MR_ERR_FORK at once. Otherwise it calls its Go shim
 * mrgo_* (capi/lib/main.go). mr_strerror is plain C.
 *
 * The .so exports only mr_* (exports.map); the mrgo_* shims and the Go
 * runtime stay local.
 */
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "multirail.h"
#include "_cgo_export.h"

static pid_t mr_loaded_pid;

__attribute__((constructor)) static void mr_record_pid(void)
{
	mr_loaded_pid = getpid();
}

/* mr_forked reports whether this is a forked child, filling *err then. */
static int mr_forked(mr_error *err)
{
	pid_t pid = getpid();
	if (pid == mr_loaded_pid)
		return 0;
	if (err != NULL) {
		err->code = MR_ERR_FORK;
		snprintf(err->msg, sizeof err->msg,
			 "multirail: called in a forked child (pid %ld; the library was loaded by pid %ld): "
			 "the Go runtime does not survive fork(), so the library refuses every call in a child; "
			 "use it in the parent only, or exec a new program in the child",
			 (long)pid, (long)mr_loaded_pid);
	}
	return 1;
}

const char *mr_strerror(int code)
{
	switch (code) {
	case MR_OK:
		return "success";
	case MR_ERR_INVALID:
		return "invalid argument";
	case MR_ERR_CONFIG:
		return "invalid configuration";
	case MR_ERR_BOOTSTRAP:
		return "bootstrap failed";
	case MR_ERR_PEER:
		return "peer failed or ranks disagree";
	case MR_ERR_CLOSED:
		return "communicator freed";
	case MR_ERR_ABORTED:
		return "job aborted";
	case MR_ERR_TIMEOUT:
		return "timed out";
	case MR_ERR_TRUNCATED:
		return "message truncated";
	case MR_ERR_FORK:
		return "called in a forked child";
	case MR_ERR_PANIC:
		return "internal panic";
	case MR_ERR_INTERNAL:
		return "internal error";
	}
	return "unknown error code";
}

int mr_init_env(const char *config_json, mr_comm *out, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_init_env((char *)config_json, out, err);
}

int mr_new_token(char *buf, int64_t len, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_new_token(buf, len, err);
}

int mr_prepare(const char *config_json, int rank, int size, const char *token, mr_pending *out, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_prepare((char *)config_json, rank, size, (char *)token, out, err);
}

int64_t mr_pending_card(mr_pending p, char *buf, int64_t len, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_pending_card(p, buf, len, err);
}

int mr_connect(mr_pending p, const char *const *cards, const int64_t *card_lens, mr_comm *out, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_connect(p, (char **)cards, (int64_t *)card_lens, out, err);
}

int mr_pending_free(mr_pending p, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_pending_free(p, err);
}

int mr_comm_rank(mr_comm c)
{
	if (mr_forked(NULL))
		return MR_ERR_FORK;
	return mrgo_comm_rank(c);
}

int mr_comm_size(mr_comm c)
{
	if (mr_forked(NULL))
		return MR_ERR_FORK;
	return mrgo_comm_size(c);
}

int mr_comm_group(mr_comm c, const int32_t *ranks, int32_t n, const char *key, mr_comm *out, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_comm_group(c, (int32_t *)ranks, n, (char *)key, out, err);
}

int mr_comm_free(mr_comm c, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_comm_free(c, err);
}

int mr_abort(mr_comm c, const char *reason, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_abort(c, (char *)reason, err);
}

int mr_barrier(mr_comm c, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_barrier(c, err);
}

int mr_bcast(mr_comm c, void *buf, int64_t count, int dtype, int root, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_bcast(c, buf, count, dtype, root, err);
}

int mr_reduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, int root, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_reduce(c, (void *)sendbuf, recvbuf, count, dtype, op, root, err);
}

int mr_allreduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_allreduce(c, (void *)sendbuf, recvbuf, count, dtype, op, err);
}

int mr_allgather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_allgather(c, (void *)sendbuf, recvbuf, count, dtype, err);
}

int mr_reduce_scatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t recvcount, int dtype, int op, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_reduce_scatter(c, (void *)sendbuf, recvbuf, recvcount, dtype, op, err);
}

int mr_alltoall(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_alltoall(c, (void *)sendbuf, recvbuf, count, dtype, err);
}

int mr_alltoallv(mr_comm c, const void *sendbuf, const int64_t *sendcounts, const int64_t *sdispls, void *recvbuf, const int64_t *recvcounts, const int64_t *rdispls, int dtype, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_alltoallv(c, (void *)sendbuf, (int64_t *)sendcounts, (int64_t *)sdispls, recvbuf, (int64_t *)recvcounts, (int64_t *)rdispls, dtype, err);
}

int mr_gather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_gather(c, (void *)sendbuf, recvbuf, count, dtype, root, err);
}

int mr_scatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_scatter(c, (void *)sendbuf, recvbuf, count, dtype, root, err);
}

int mr_send(mr_comm c, const void *buf, int64_t bytes, int dst, int tag, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_send(c, (void *)buf, bytes, dst, tag, err);
}

int mr_recv(mr_comm c, void *buf, int64_t bytes, int src, int tag, mr_status *status, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_recv(c, buf, bytes, src, tag, status, err);
}

int mr_lossy_allreduce(mr_comm c, float *buf, int64_t count, int op, int64_t stream, const char *opts_json, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_lossy_allreduce(c, buf, count, op, stream, (char *)opts_json, err);
}

int mr_lossy_report(mr_comm c, int64_t stream, double quality, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_lossy_report(c, stream, quality, err);
}

int mr_lossy_stats(mr_comm c, int64_t stream, mr_lossy_stats_t *out, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_lossy_stats(c, stream, out, err);
}

int mr_ibarrier(mr_comm c, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_ibarrier(c, req, err);
}

int mr_ibcast(mr_comm c, void *buf, int64_t count, int dtype, int root, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_ibcast(c, buf, count, dtype, root, req, err);
}

int mr_ireduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, int root, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_ireduce(c, (void *)sendbuf, recvbuf, count, dtype, op, root, req, err);
}

int mr_iallreduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_iallreduce(c, (void *)sendbuf, recvbuf, count, dtype, op, req, err);
}

int mr_iallgather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_iallgather(c, (void *)sendbuf, recvbuf, count, dtype, req, err);
}

int mr_ireduce_scatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t recvcount, int dtype, int op, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_ireduce_scatter(c, (void *)sendbuf, recvbuf, recvcount, dtype, op, req, err);
}

int mr_ialltoall(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_ialltoall(c, (void *)sendbuf, recvbuf, count, dtype, req, err);
}

int mr_ialltoallv(mr_comm c, const void *sendbuf, const int64_t *sendcounts, const int64_t *sdispls, void *recvbuf, const int64_t *recvcounts, const int64_t *rdispls, int dtype, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_ialltoallv(c, (void *)sendbuf, (int64_t *)sendcounts, (int64_t *)sdispls, recvbuf, (int64_t *)recvcounts, (int64_t *)rdispls, dtype, req, err);
}

int mr_igather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_igather(c, (void *)sendbuf, recvbuf, count, dtype, root, req, err);
}

int mr_iscatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_iscatter(c, (void *)sendbuf, recvbuf, count, dtype, root, req, err);
}

int mr_isend(mr_comm c, const void *buf, int64_t bytes, int dst, int tag, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_isend(c, (void *)buf, bytes, dst, tag, req, err);
}

int mr_irecv(mr_comm c, void *buf, int64_t bytes, int src, int tag, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_irecv(c, buf, bytes, src, tag, req, err);
}

int mr_ilossy_allreduce(mr_comm c, float *buf, int64_t count, int op, int64_t stream, const char *opts_json, mr_request *req, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_ilossy_allreduce(c, buf, count, op, stream, (char *)opts_json, req, err);
}

int mr_test(mr_request r, int *done, mr_status *status, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_test(r, done, status, err);
}

int mr_wait(mr_request r, int64_t timeout_ms, mr_status *status, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_wait(r, timeout_ms, status, err);
}

int mr_poll(mr_comm c, mr_request *out, int32_t max, int64_t timeout_ms, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_poll(c, out, max, timeout_ms, err);
}

int mr_request_free(mr_request r, mr_error *err)
{
	if (mr_forked(err))
		return MR_ERR_FORK;
	return mrgo_request_free(r, err);
}
