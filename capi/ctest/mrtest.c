/* mrtest: checks libmultirail.so through its C header, one line per check.
 *
 *   sh scripts/build-capi.sh
 *   gcc -std=c11 -Wall -I build capi/ctest/mrtest.c -L build -lmultirail -Wl,-rpath,$PWD/build -o mrtest
 *   multirail run -n 3 -- ./mrtest
 *
 * Every collective and its nonblocking twin on integer data against closed
 * forms, alltoallv with uneven counts, point to point with MR_ANY_SOURCE,
 * the loss-tolerant allreduce with nothing discarded against the exact sum,
 * mismatched counts (MR_ERR_PEER on every rank, not a hang), the two-step
 * start driven by mr_allgather (as an MPI program would with
 * MPI_Allgather), groups, the completion poll, a fork()ed child (MR_ERR_FORK
 * at once), mr_strerror and a freed communicator. Exits 0 only if every
 * check passed; a hang ends with SIGALRM after 60 s.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "multirail.h"

static int rank = -1, size = -1, failures, checks;

static void check(int ok, const char *what, const mr_error *err)
{
	checks++;
	if (ok) {
		printf("ok    rank %d: %s\n", rank, what);
	} else {
		failures++;
		printf("FAIL  rank %d: %s%s%s\n", rank, what, err && err->msg[0] ? ": " : "", err ? err->msg : "");
	}
	fflush(stdout);
}

/* expect checks that a call returned want (and wrote it into err). */
static void expect(int got, int want, const char *what, const mr_error *err)
{
	char line[512];
	if (got == want && (err == NULL || err->code == want)) {
		check(1, what, NULL);
		return;
	}
	snprintf(line, sizeof line, "%s: returned %d (%s), want %d (%s)", what, got, mr_strerror(got), want, mr_strerror(want));
	check(0, line, err);
}

static int64_t *i64s(int64_t n)
{
	int64_t *p = calloc(n > 0 ? (size_t)n : 1, sizeof *p);
	if (p == NULL) {
		perror("calloc");
		exit(2);
	}
	return p;
}

/* same compares n values with what f gives. */
static int same(const int64_t *got, int64_t n, int64_t (*f)(int64_t i), const char *what)
{
	for (int64_t i = 0; i < n; i++) {
		if (got[i] != f(i)) {
			printf("      rank %d: %s: [%" PRId64 "] = %" PRId64 ", want %" PRId64 "\n", rank, what, i, got[i], f(i));
			return 0;
		}
	}
	return 1;
}

/* completion of nonblocking twins, three ways in turn */
static int finish(mr_comm c, mr_request req, int how, mr_error *err)
{
	int done = 0, rc;
	mr_request got[4];
	switch (how % 3) {
	case 0:
		return mr_wait(req, -1, NULL, err);
	case 1:
		while ((rc = mr_test(req, &done, NULL, err)) == 0 && !done)
			;
		return rc;
	default:
		for (;;) {
			int n = mr_poll(c, got, 4, 5000, err);
			if (n < 0)
				return n;
			for (int i = 0; i < n; i++)
				if (got[i] == req)
					return mr_wait(req, 0, NULL, err);
			if (n == 0) {
				snprintf(err->msg, sizeof err->msg, "mr_poll: nothing finished in 5 s");
				return err->code = MR_ERR_TIMEOUT;
			}
		}
	}
}

/* closed forms */
static int64_t g_n;
static int64_t f_allreduce(int64_t i) { return size * (size + 1) / 2 + size * i; }
static int64_t f_bcast(int64_t i) { return 1000 + i; }
static int64_t f_prod(int64_t i) { (void)i; int64_t p = 1; for (int r = 1; r <= size; r++) p *= r; return p; }
static int64_t f_gathered(int64_t k) { return (k / g_n) * 1000000 + k % g_n; }
static int64_t f_own(int64_t i) { return rank * 1000000 + i; }
static int64_t f_rs(int64_t i) { return size * (rank * g_n + i) + size * (size - 1) / 2; }
static int64_t f_a2a(int64_t k) { return (k / g_n) * 1000000 + rank * 10000 + k % g_n; }

static void collectives(mr_comm c, int64_t n, int block)
{
	mr_error err = {0};
	mr_request req = 0;
	char what[200];
	int rc;
	const char *kind = block ? "" : "i";
	int64_t *send = i64s(size * n), *recv = i64s(size * n);
	g_n = n;

#define RUN(bcall, icall) (block ? (bcall) : ((rc = (icall)) != 0 ? rc : finish(c, req, (int)n, &err)))

	snprintf(what, sizeof what, "mr_%sbarrier", kind);
	rc = RUN(mr_barrier(c, &err), mr_ibarrier(c, &req, &err));
	check(rc == 0, what, &err);

	for (int64_t i = 0; i < n; i++)
		send[i] = rank + 1 + i;
	rc = RUN(mr_allreduce(c, send, recv, n, MR_INT64, MR_SUM, &err), mr_iallreduce(c, send, recv, n, MR_INT64, MR_SUM, &req, &err));
	snprintf(what, sizeof what, "mr_%sallreduce sum of rank+1+i == size*(size+1)/2 + size*i (n=%" PRId64 ")", kind, n);
	check(rc == 0 && same(recv, n, f_allreduce, what), what, &err);

	for (int64_t i = 0; i < n; i++)
		recv[i] = rank == 1 ? 1000 + i : -1;
	rc = RUN(mr_bcast(c, recv, n, MR_INT64, 1, &err), mr_ibcast(c, recv, n, MR_INT64, 1, &req, &err));
	snprintf(what, sizeof what, "mr_%sbcast from rank 1 (n=%" PRId64 ")", kind, n);
	check(rc == 0 && same(recv, n, f_bcast, what), what, &err);

	for (int64_t i = 0; i < n; i++)
		send[i] = rank + 1, recv[i] = 0;
	rc = RUN(mr_reduce(c, send, recv, n, MR_INT64, MR_PROD, 2, &err), mr_ireduce(c, send, recv, n, MR_INT64, MR_PROD, 2, &req, &err));
	snprintf(what, sizeof what, "mr_%sreduce prod to rank 2 == size! (n=%" PRId64 ")", kind, n);
	check(rc == 0 && (rank != 2 || same(recv, n, f_prod, what)), what, &err);

	for (int64_t i = 0; i < n; i++)
		send[i] = f_own(i);
	rc = RUN(mr_allgather(c, send, recv, n, MR_INT64, &err), mr_iallgather(c, send, recv, n, MR_INT64, &req, &err));
	snprintf(what, sizeof what, "mr_%sallgather (n=%" PRId64 ")", kind, n);
	check(rc == 0 && same(recv, size * n, f_gathered, what), what, &err);

	for (int64_t k = 0; k < size * n; k++)
		send[k] = rank + k;
	rc = RUN(mr_reduce_scatter(c, send, recv, n, MR_INT64, MR_SUM, &err), mr_ireduce_scatter(c, send, recv, n, MR_INT64, MR_SUM, &req, &err));
	snprintf(what, sizeof what, "mr_%sreduce_scatter (n=%" PRId64 ")", kind, n);
	check(rc == 0 && same(recv, n, f_rs, what), what, &err);

	for (int64_t k = 0; k < size * n; k++)
		send[k] = rank * 1000000 + (k / n) * 10000 + k % n;
	rc = RUN(mr_alltoall(c, send, recv, n, MR_INT64, &err), mr_ialltoall(c, send, recv, n, MR_INT64, &req, &err));
	snprintf(what, sizeof what, "mr_%salltoall (n=%" PRId64 ")", kind, n);
	check(rc == 0 && same(recv, size * n, f_a2a, what), what, &err);

	for (int64_t i = 0; i < n; i++)
		send[i] = f_own(i);
	rc = RUN(mr_gather(c, send, rank == 0 ? recv : NULL, n, MR_INT64, 0, &err), mr_igather(c, send, rank == 0 ? recv : NULL, n, MR_INT64, 0, &req, &err));
	snprintf(what, sizeof what, "mr_%sgather to rank 0 (n=%" PRId64 ")", kind, n);
	check(rc == 0 && (rank != 0 || same(recv, size * n, f_gathered, what)), what, &err);

	for (int64_t k = 0; k < size * n; k++)
		send[k] = f_gathered(k);
	rc = RUN(mr_scatter(c, rank == 1 ? send : NULL, recv, n, MR_INT64, 1, &err), mr_iscatter(c, rank == 1 ? send : NULL, recv, n, MR_INT64, 1, &req, &err));
	snprintf(what, sizeof what, "mr_%sscatter from rank 1 (n=%" PRId64 ")", kind, n);
	check(rc == 0 && same(recv, n, f_own, what), what, &err);

	/* alltoallv: rank r sends (r+j)%3*n/2+1 elements to rank j; each block
	 * lands after a gap of 2 elements */
	{
		int64_t sc[64], sd[64], rc_[64], rd[64], soff = 0, roff = 0;
		int64_t *want = i64s(4 * size * n + 4 * size), ok = 1;
		for (int j = 0; j < size; j++) {
			sc[j] = (rank + j) % 3 * n / 2 + 1;
			sd[j] = soff;
			for (int64_t k = 0; k < sc[j]; k++)
				send[soff + k] = rank * 1000000 + j * 10000 + k;
			soff += sc[j];
			want[roff] = want[roff + 1] = -1;
			roff += 2;
			rc_[j] = (j + rank) % 3 * n / 2 + 1;
			rd[j] = roff;
			for (int64_t k = 0; k < rc_[j]; k++)
				want[roff + k] = j * 1000000 + rank * 10000 + k;
			roff += rc_[j];
		}
		int64_t *vrecv = i64s(roff);
		for (int64_t k = 0; k < roff; k++)
			vrecv[k] = -1;
		rc = RUN(mr_alltoallv(c, send, sc, sd, vrecv, rc_, rd, MR_INT64, &err),
			 mr_ialltoallv(c, send, sc, sd, vrecv, rc_, rd, MR_INT64, &req, &err));
		for (int64_t k = 0; ok && k < roff; k++)
			if (vrecv[k] != want[k]) {
				printf("      rank %d: alltoallv [%" PRId64 "] = %" PRId64 ", want %" PRId64 "\n", rank, k, vrecv[k], want[k]);
				ok = 0;
			}
		snprintf(what, sizeof what, "mr_%salltoallv with uneven counts and gaps (n=%" PRId64 ")", kind, n);
		check(rc == 0 && ok, what, &err);
		free(want);
		free(vrecv);
	}

	/* loss-tolerant allreduce, nothing discarded ("lossy_reliable" in the
	 * config): the exact sum */
	{
		float *f = calloc((size_t)n, sizeof *f);
		int ok = 1;
		for (int64_t i = 0; i < n; i++)
			f[i] = (float)(rank + 1 + i % 1000);
		rc = RUN(mr_lossy_allreduce(c, f, n, MR_SUM, 5, "{\"error_feedback\": true}", &err),
			 mr_ilossy_allreduce(c, f, n, MR_SUM, 5, "{\"error_feedback\": true}", &req, &err));
		for (int64_t i = 0; ok && i < n; i++)
			if (f[i] != (float)(size * (size + 1) / 2 + size * (i % 1000))) {
				printf("      rank %d: lossy [%" PRId64 "] = %g\n", rank, i, f[i]);
				ok = 0;
			}
		snprintf(what, sizeof what, "mr_%slossy_allreduce with nothing discarded == exact sum (n=%" PRId64 ")", kind, n);
		check(rc == 0 && ok, what, &err);
		free(f);
	}
#undef RUN
	free(send);
	free(recv);
}

static void p2p(mr_comm c)
{
	mr_error err = {0};
	mr_status st;
	mr_request req;
	int rc;
	if (rank != 0) {
		int32_t v = rank * 10;
		rc = mr_send(c, &v, sizeof v, 0, rank, &err);
		check(rc == 0, "mr_send to rank 0", &err);
		/* the large messages only after rank 0 has the small ones (its
		 * MR_ANY_TAG receives would match them too) */
		rc = mr_barrier(c, &err);
		check(rc == 0, "mr_barrier", &err);
		char big[100000];
		memset(big, rank, sizeof big);
		rc = mr_isend(c, big, sizeof big, 0, 100, &req, &err);
		if (rc == 0)
			rc = mr_wait(req, -1, NULL, &err);
		check(rc == 0, "mr_isend of 100000 bytes to rank 0", &err);
		return;
	}
	/* one message from every other rank: the first through mr_irecv, the
	 * others through mr_recv, all with MR_ANY_SOURCE */
	int32_t vals[64] = {0};
	mr_status sts[64];
	int seen[64] = {0}, ok = 1;
	rc = mr_irecv(c, &vals[0], sizeof vals[0], MR_ANY_SOURCE, MR_ANY_TAG, &req, &err);
	check(rc == 0, "mr_irecv with MR_ANY_SOURCE, MR_ANY_TAG", &err);
	for (int k = 1; rc == 0 && k < size - 1; k++) {
		rc = mr_recv(c, &vals[k], sizeof vals[k], MR_ANY_SOURCE, MR_ANY_TAG, &sts[k], &err);
		check(rc == 0, "mr_recv with MR_ANY_SOURCE", &err);
	}
	if (rc == 0)
		rc = mr_wait(req, -1, &sts[0], &err);
	for (int k = 0; rc == 0 && k < size - 1; k++) {
		int s = sts[k].source;
		ok = ok && s > 0 && s < size && !seen[s] && vals[k] == s * 10 && sts[k].tag == s && sts[k].bytes == 4;
		if (s > 0 && s < size)
			seen[s] = 1;
	}
	check(rc == 0 && ok, "a message from every other rank with MR_ANY_SOURCE, statuses right", &err);
	rc = mr_barrier(c, &err);
	check(rc == 0, "mr_barrier", &err);
	static char big[100000];
	for (int k = 0; k < size - 1; k++) {
		rc = mr_recv(c, big, sizeof big, MR_ANY_SOURCE, 100, &st, &err);
		check(rc == 0 && st.bytes == (int64_t)sizeof big && big[0] == st.source && big[sizeof big - 1] == st.source,
		      "mr_recv of 100000 bytes with MR_ANY_SOURCE", &err);
	}
}

/* mismatch: ranks call one allreduce with different counts, on a group of
 * every rank (its failure does not touch the world communicator) */
static void mismatch(mr_comm world)
{
	mr_error err = {0};
	mr_comm g = 0;
	int32_t all[64];
	for (int r = 0; r < size; r++)
		all[r] = r;
	int rc = mr_comm_group(world, all, size, "mismatch", &g, &err);
	check(rc == 0, "mr_comm_group of every rank", &err);
	int64_t buf[8] = {0};
	int64_t n = rank == 1 ? 5 : 4;
	time_t t0 = time(NULL);
	rc = mr_allreduce(g, buf, buf, n, MR_INT64, MR_SUM, &err);
	expect(rc, MR_ERR_PEER, "mr_allreduce with another count on rank 1: MR_ERR_PEER on every rank, not a hang", &err);
	check(time(NULL) - t0 < 30, "... within 30 s", NULL);
	rc = mr_comm_free(g, &err);
	check(rc == 0, "mr_comm_free of the failed group", &err);
	rc = mr_barrier(world, &err);
	check(rc == 0, "the world still works after the group failed", &err);
}

/* two-step start, the cards exchanged with mr_allgather over the world as
 * an MPI program would with MPI_Allgather */
static void twostep(mr_comm world)
{
	mr_error err = {0};
	char token[80] = {0};
	int rc = 0;
	if (rank == 0)
		rc = mr_new_token(token, sizeof token, &err);
	if (rc == 0)
		rc = mr_bcast(world, token, sizeof token, MR_UINT8, 0, &err);
	check(rc == 0 && strlen(token) >= 32, "mr_new_token on rank 0, mr_bcast to all", &err);
	mr_pending p = 0;
	rc = mr_prepare(NULL, rank, size, token, &p, &err);
	check(rc == 0, "mr_prepare", &err);
	int64_t len = mr_pending_card(p, NULL, 0, &err);
	check(len > 0 && len <= MR_CARD_MAX, "mr_pending_card: the length", &err);
	int64_t lens[64], maxlen = 0;
	rc = mr_allgather(world, &len, lens, 1, MR_INT64, &err);
	for (int r = 0; r < size; r++)
		if (lens[r] > maxlen)
			maxlen = lens[r];
	char *mine = calloc((size_t)maxlen, 1), *all = calloc((size_t)(maxlen * size), 1);
	int64_t n2 = mr_pending_card(p, mine, maxlen, &err);
	if (rc == 0)
		rc = mr_allgather(world, mine, all, maxlen, MR_UINT8, &err);
	check(rc == 0 && n2 == len, "cards exchanged with mr_allgather", &err);
	const char *cards[64];
	for (int r = 0; r < size; r++)
		cards[r] = all + r * maxlen;
	mr_comm c2 = 0;
	rc = mr_connect(p, cards, lens, &c2, &err);
	check(rc == 0 && mr_comm_rank(c2) == rank && mr_comm_size(c2) == size, "mr_connect", &err);
	int64_t v = rank + 1;
	rc = mr_allreduce(c2, &v, &v, 1, MR_INT64, MR_SUM, &err);
	check(rc == 0 && v == size * (size + 1) / 2, "mr_allreduce over the communicator of the two-step start", &err);
	rc = mr_comm_free(c2, &err);
	check(rc == 0, "mr_comm_free of it", &err);
	free(mine);
	free(all);
}

static void group(mr_comm world)
{
	mr_error err = {0};
	if (rank != 0 && rank != 2)
		return;
	int32_t ranks[2] = {2, 0};
	mr_comm g = 0;
	int rc = mr_comm_group(world, ranks, 2, "pair", &g, &err);
	check(rc == 0 && mr_comm_size(g) == 2 && mr_comm_rank(g) == (rank == 2 ? 0 : 1), "mr_comm_group of ranks {2, 0}", &err);
	int64_t v = rank;
	rc = mr_allreduce(g, &v, &v, 1, MR_INT64, MR_MAX, &err);
	check(rc == 0 && v == 2, "mr_allreduce max on the group", &err);
	rc = mr_comm_free(g, &err);
	check(rc == 0, "mr_comm_free of the group", &err);
}

static void poll_order(mr_comm c)
{
	mr_error err = {0};
	enum { K = 8 };
	mr_request reqs[K], got[K];
	int64_t v[K];
	int rc = 0;
	for (int k = 0; k < K && rc == 0; k++) {
		v[k] = rank * k;
		rc = mr_iallreduce(c, NULL, &v[k], 1, MR_INT64, MR_SUM, &reqs[k], &err);
	}
	check(rc == 0, "8 mr_iallreduce back to back", &err);
	int n = 0;
	while (rc == 0 && n < K) {
		int m = mr_poll(c, got + n, K - n, 10000, &err);
		if (m <= 0) {
			rc = m < 0 ? m : MR_ERR_TIMEOUT;
			break;
		}
		n += m;
	}
	int ok = rc == 0 && n == K;
	for (int k = 0; ok && k < K; k++)
		ok = got[k] == reqs[k];
	check(ok, "mr_poll reports them once each, in call order", &err);
	for (int k = 0; k < K && rc == 0; k++) {
		int done = 0;
		rc = mr_test(reqs[k], &done, NULL, &err);
		ok = ok && done && v[k] == k * size * (size - 1) / 2;
	}
	check(rc == 0 && ok, "mr_test then gives each result, all right", &err);
	rc = mr_poll(c, got, K, 0, &err);
	check(rc == 0, "mr_poll with nothing left returns 0", &err);
	rc = mr_wait(reqs[0], 0, NULL, &err);
	expect(rc, MR_ERR_INVALID, "mr_wait of a released request", &err);
}

static void forked(mr_comm c)
{
	pid_t pid = fork();
	if (pid < 0) {
		check(0, "fork", NULL);
		return;
	}
	if (pid == 0) {
		alarm(5); /* a hang ends the child with SIGALRM */
		mr_error err = {0};
		int64_t v = 1;
		int r = mr_comm_rank(c);
		int rc = mr_allreduce(c, &v, &v, 1, MR_INT64, MR_SUM, &err);
		int ok = r == MR_ERR_FORK && rc == MR_ERR_FORK && err.code == MR_ERR_FORK && strstr(err.msg, "fork") != NULL;
		_exit(ok ? 0 : 1);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	char what[200];
	snprintf(what, sizeof what, "a fork()ed child's mr_comm_rank and mr_allreduce return MR_ERR_FORK at once (child %s %d)",
		 WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, what, NULL);
}

static void errors(mr_comm c)
{
	mr_error err = {0};
	int64_t v = 0;
	char line[200];
	expect(mr_allreduce(c, &v, &v, 1, 42, MR_SUM, &err), MR_ERR_INVALID, "mr_allreduce with dtype 42", &err);
	expect(mr_allreduce(c, &v, &v, 1, MR_INT64, 42, &err), MR_ERR_INVALID, "mr_allreduce with op 42", &err);
	expect(mr_allreduce(c, &v, NULL, 1, MR_INT64, MR_SUM, &err), MR_ERR_INVALID, "mr_allreduce with a NULL recvbuf", &err);
	expect(mr_allreduce(12345, &v, &v, 1, MR_INT64, MR_SUM, &err), MR_ERR_INVALID, "mr_allreduce on a bad handle", &err);
	expect(mr_send(c, &v, 8, size, 0, &err), MR_ERR_INVALID, "mr_send to rank size", &err);
	expect(mr_comm_rank(0), MR_ERR_INVALID, "mr_comm_rank(0)", NULL);
	int ok = 1;
	for (int code = MR_OK; code >= MR_ERR_INTERNAL; code--)
		ok = ok && mr_strerror(code) != NULL && mr_strerror(code)[0] != 0;
	snprintf(line, sizeof line, "mr_strerror: MR_ERR_PEER is \"%s\", MR_ERR_FORK \"%s\"", mr_strerror(MR_ERR_PEER), mr_strerror(MR_ERR_FORK));
	check(ok && strcmp(mr_strerror(MR_ERR_FORK), "called in a forked child") == 0 && strcmp(mr_strerror(7), "unknown error code") == 0, line, NULL);
	/* the communicator still works after the refusals */
	v = 1;
	int rc = mr_allreduce(c, &v, &v, 1, MR_INT64, MR_SUM, &err);
	check(rc == 0 && v == size, "mr_allreduce after the refused calls", &err);
}

int main(void)
{
	mr_error err = {0};
	mr_comm world = 0;
	alarm(60);
	setvbuf(stdout, NULL, _IOLBF, 0);

	int rc = mr_init_env("{\"bogus_key\": 1}", &world, &err);
	expect(rc, MR_ERR_CONFIG, "mr_init_env with an unknown key", &err);
	check(strstr(err.msg, "bogus_key") != NULL, "... the message names the key", &err);
	const char *cfg = getenv("MRTEST_CONFIG");
	rc = mr_init_env(cfg ? cfg : "{\"lossy_reliable\": true}", &world, &err);
	if (rc != 0) {
		printf("FAIL  mr_init_env: %d %s\n", rc, err.msg);
		return 1;
	}
	rank = mr_comm_rank(world);
	size = mr_comm_size(world);
	check(rank >= 0 && size >= 3 && size <= 64, "mr_init_env, mr_comm_rank, mr_comm_size (3 to 64 ranks)", &err);
	if (size < 3 || size > 64)
		return 1;

	collectives(world, 5, 1);
	collectives(world, 5, 0);
	collectives(world, 30000, 1);
	collectives(world, 30000, 0);
	p2p(world);
	poll_order(world);
	group(world);
	mismatch(world);
	twostep(world);
	forked(world);
	errors(world);

	rc = mr_barrier(world, &err);
	check(rc == 0, "final mr_barrier", &err);
	rc = mr_comm_free(world, &err);
	check(rc == 0, "mr_comm_free", &err);
	int64_t v = 0;
	expect(mr_allreduce(world, &v, &v, 1, MR_INT64, MR_SUM, &err), MR_ERR_CLOSED, "mr_allreduce after mr_comm_free", &err);

	printf("%s rank %d: %d checks, %d failed\n", failures ? "FAIL " : "PASS ", rank, checks, failures);
	return failures ? 1 : 0;
}
