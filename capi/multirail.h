/* multirail.h: the C ABI of multirail's communicator (libmultirail.so).
 *
 * Built by `sh scripts/build-capi.sh` into build/libmultirail.so and
 * build/multirail.h. docs/capi.md states the rules: ownership, threads,
 * ordering, fork. In short:
 *   - handles (mr_comm, mr_pending, mr_request) are integers, never
 *     pointers; 0 is never a valid handle;
 *   - every call that can fail returns 0 or a negative MR_ERR_* code and,
 *     when err is not NULL, writes the code and a one-line message into
 *     *err (owned by the caller; never allocated by the library);
 *   - collectives on one communicator are run in the order they are
 *     called (blocking and nonblocking alike), one at a time; every rank
 *     calls them in the same order;
 *   - buffers of nonblocking calls are used in place until the request
 *     completes (mr_test reports done, mr_wait returns 0, or mr_poll
 *     returns it): do not free or modify them before;
 *   - in a child created by fork() every call fails at once with
 *     MR_ERR_FORK (the Go runtime does not survive fork).
 */
#ifndef MULTIRAIL_H
#define MULTIRAIL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t mr_comm;    /* a communicator */
typedef int64_t mr_pending; /* a rank between mr_prepare and mr_connect */
typedef int64_t mr_request; /* a nonblocking call in progress */

typedef struct {
	int32_t code;   /* 0 or a negative MR_ERR_* code */
	char msg[1024]; /* NUL-terminated, one line */
} mr_error;

typedef struct {
	int32_t source; /* the sender's rank (receives) */
	int32_t tag;    /* the message's tag (receives) */
	int64_t bytes;  /* bytes received (receives) */
} mr_status;

enum mr_dtype { MR_UINT8, MR_INT8, MR_BOOL, MR_INT32, MR_INT64, MR_FLOAT16, MR_BFLOAT16, MR_FLOAT32, MR_FLOAT64 };
enum mr_op { MR_SUM, MR_PROD, MR_MIN, MR_MAX, MR_AVG, MR_BAND, MR_BOR, MR_BXOR };

enum mr_code {
	MR_OK = 0,
	MR_ERR_INVALID = -1,   /* a bad argument: handle, dtype, op, count, rank, tag, NULL buffer */
	MR_ERR_CONFIG = -2,    /* bad config_json or environment */
	MR_ERR_BOOTSTRAP = -3, /* the ranks could not meet or connect */
	MR_ERR_PEER = -4,      /* a peer failed, or the ranks disagree (count, root, dtype, op) */
	MR_ERR_CLOSED = -5,    /* the communicator was freed */
	MR_ERR_ABORTED = -6,   /* a rank called mr_abort */
	MR_ERR_TIMEOUT = -7,   /* mr_wait's timeout passed; the request goes on */
	MR_ERR_TRUNCATED = -8, /* a received message was larger than the buffer */
	MR_ERR_FORK = -9,      /* called in a forked child */
	MR_ERR_PANIC = -10,    /* a bug in the library (recovered) */
	MR_ERR_INTERNAL = -11  /* anything else */
};

#define MR_ANY_SOURCE (-1)
#define MR_ANY_TAG (-1)
#define MR_MAX_TAG (1 << 30)
#define MR_CARD_MAX 65536 /* a card never exceeds this many bytes */

/* A static description of code ("invalid argument", ...). */
const char *mr_strerror(int code);

/* ---- Starting ---------------------------------------------------------
 * config_json may be NULL (defaults) or an object with any of:
 *   "ifname": "eth0,eth1" (MULTIRAIL_IFNAME syntax), "emu": "emu:200mbit,emu:100mbit",
 *   "scheduler": "qlearn", "timeout": "90s", "algorithms": "allreduce=ring",
 *   "token": "...", "insecure": false, "loopback_rails": 2, "busy_poll": "200us"
 * Unknown keys are an error (MR_ERR_CONFIG naming the key). */
/* Added with the library (docs/capi.md): "lossy_reliable": true (the
 * loss-tolerant allreduce never discards; its result is then exact) and
 * "lossy_fixed_rate": 0.1 (it discards that fraction of packets whatever
 * the controller says, [0, 1)) and "lossy_controller": "margin=1" (the
 * discard controller's constants in discard.ParseOptions' syntax, on top of
 * the default: the match rule, as multirail train). */

/* One call: under any launcher comm.Init knows (multirail run, torchrun,
 * env://, mpirun, srun, Kubernetes); returns once every rank is connected. */
int mr_init_env(const char *config_json, mr_comm *out, mr_error *err);

/* Two steps (NCCL's GetUniqueId/CommInitRank shape, for programs that meet
 * another way, e.g. MPI_Allgather or torch's store):
 *  1. mr_new_token on one rank, shared with all (or MULTIRAIL_TOKEN, or
 *     "token" in config_json); token may be NULL to use those;
 *  2. mr_prepare on every rank: listens and describes this rank in a card;
 *  3. the program gives every rank every rank's card (by rank);
 *  4. mr_connect on every rank: returns once every rank is connected.
 * mr_pending_free releases a pending rank that will not connect. */
int mr_new_token(char *buf, int64_t len, mr_error *err); /* len >= 65; NUL-terminated */
int mr_prepare(const char *config_json, int rank, int size, const char *token, mr_pending *out, mr_error *err);
int64_t mr_pending_card(mr_pending p, char *buf, int64_t len, mr_error *err); /* returns the card's length (may exceed len: nothing written then) or < 0 */
int mr_connect(mr_pending p, const char *const *cards, const int64_t *card_lens, mr_comm *out, mr_error *err);
int mr_pending_free(mr_pending p, mr_error *err);

int mr_comm_rank(mr_comm c); /* < 0: invalid handle */
int mr_comm_size(mr_comm c);
/* A communicator of a subset of c's ranks (ranks[0..n-1], ascending or not:
 * the new rank i is ranks[i]), made without any communication: called only
 * by the members, each with the same ranks and key. key tells apart groups
 * of the same members. */
int mr_comm_group(mr_comm c, const int32_t *ranks, int32_t n, const char *key, mr_comm *out, mr_error *err);
int mr_comm_free(mr_comm c, mr_error *err); /* 0 on success, negative codes on errors */
/* Tells every rank this one gives up (their pending and later calls fail
 * with MR_ERR_ABORTED) and closes the connections. */
int mr_abort(mr_comm c, const char *reason, mr_error *err);

/* ---- Collectives (count is in elements) -------------------------------- */
int mr_barrier(mr_comm c, mr_error *err);
int mr_bcast(mr_comm c, void *buf, int64_t count, int dtype, int root, mr_error *err);
int mr_reduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, int root, mr_error *err);
int mr_allreduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, mr_error *err);
/* count: elements each rank contributes; recvbuf holds size*count. */
int mr_allgather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_error *err);
/* recvcount: elements each rank receives; sendbuf holds size*recvcount. */
int mr_reduce_scatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t recvcount, int dtype, int op, mr_error *err);
/* count: elements per peer; both buffers hold size*count. */
int mr_alltoall(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_error *err);
/* Uneven: counts and displacements (elements) per rank, size entries each. */
int mr_alltoallv(mr_comm c, const void *sendbuf, const int64_t *sendcounts, const int64_t *sdispls,
                 void *recvbuf, const int64_t *recvcounts, const int64_t *rdispls, int dtype, mr_error *err);
int mr_gather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_error *err);
int mr_scatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_error *err);

/* ---- Point to point (bytes) --------------------------------------------- */
int mr_send(mr_comm c, const void *buf, int64_t bytes, int dst, int tag, mr_error *err);
/* src may be MR_ANY_SOURCE, tag MR_ANY_TAG; status may be NULL. */
int mr_recv(mr_comm c, void *buf, int64_t bytes, int src, int tag, mr_status *status, mr_error *err);

/* ---- Loss-tolerant allreduce -------------------------------------------
 * float32, op MR_SUM or MR_AVG, in place. stream keys the state (discard
 * controller, error-feedback residuals, quality reports): give every
 * independent sequence of calls its own stream (e.g. a DDP bucket). opts_json
 * may be NULL or {"error_feedback": true, "packet_floats": 1024}. */
/* The type is mr_lossy_stats_t: a typedef named mr_lossy_stats, as first
 * written, clashes with the function mr_lossy_stats (C has one namespace
 * for both) and no C program could include the header. */
typedef struct {
	int64_t packets, discarded, received, missing;
} mr_lossy_stats_t;
int mr_lossy_allreduce(mr_comm c, float *buf, int64_t count, int op, int64_t stream, const char *opts_json, mr_error *err);
int mr_lossy_report(mr_comm c, int64_t stream, double quality, mr_error *err);
int mr_lossy_stats(mr_comm c, int64_t stream, mr_lossy_stats_t *out, mr_error *err);

/* ---- Nonblocking twins ---------------------------------------------------
 * Same arguments, plus the request. Buffers are used in place until done. */
int mr_ibarrier(mr_comm c, mr_request *req, mr_error *err);
int mr_ibcast(mr_comm c, void *buf, int64_t count, int dtype, int root, mr_request *req, mr_error *err);
int mr_ireduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, int root, mr_request *req, mr_error *err);
int mr_iallreduce(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op, mr_request *req, mr_error *err);
int mr_iallgather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_request *req, mr_error *err);
int mr_ireduce_scatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t recvcount, int dtype, int op, mr_request *req, mr_error *err);
int mr_ialltoall(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, mr_request *req, mr_error *err);
int mr_ialltoallv(mr_comm c, const void *sendbuf, const int64_t *sendcounts, const int64_t *sdispls,
                  void *recvbuf, const int64_t *recvcounts, const int64_t *rdispls, int dtype, mr_request *req, mr_error *err);
int mr_igather(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_request *req, mr_error *err);
int mr_iscatter(mr_comm c, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int root, mr_request *req, mr_error *err);
int mr_isend(mr_comm c, const void *buf, int64_t bytes, int dst, int tag, mr_request *req, mr_error *err);
int mr_irecv(mr_comm c, void *buf, int64_t bytes, int src, int tag, mr_request *req, mr_error *err);
int mr_ilossy_allreduce(mr_comm c, float *buf, int64_t count, int op, int64_t stream, const char *opts_json, mr_request *req, mr_error *err);

/* *done = 1 when finished: the request is then released and its result
 * returned (status filled for receives); *done = 0: still running. */
int mr_test(mr_request r, int *done, mr_status *status, mr_error *err);
/* Waits up to timeout_ms (< 0: forever). Returns the request's result and
 * releases it, or MR_ERR_TIMEOUT with the request still running. */
int mr_wait(mr_request r, int64_t timeout_ms, mr_status *status, mr_error *err);
/* The completion poll: waits up to timeout_ms (< 0: forever, 0: no wait)
 * until at least one of c's requests has finished and writes up to max of
 * the finished ones' handles into out (each reported once), returning how
 * many (0 on timeout) or a negative code. Collect each one's result with
 * mr_test or mr_wait. */
int mr_poll(mr_comm c, mr_request *out, int32_t max, int64_t timeout_ms, mr_error *err);
/* Abandons a request (its buffers stay in use until the communicator is freed). */
int mr_request_free(mr_request r, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MULTIRAIL_H */
