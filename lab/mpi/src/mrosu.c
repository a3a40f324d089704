/* mrosu.c - OSU-style MPI micro-benchmarks for multirail's network lab,
 * measured exactly as `multirail osu` measures its communicator (the method
 * of comm/osu: tests.go, run.go, report.go), so that Open MPI's numbers can
 * be set beside multirail's.
 *
 *   mpirun -np N ./mrosu [--validate] TEST SIZES [ITERS [WARMUP]]
 *
 * TEST is one of
 *   latency         after a barrier of every rank, ranks 0 and 1 ping-pong
 *                   SIZE bytes (the others wait); each round trip is timed,
 *                   latency = time / (2 x iterations); min/max are the
 *                   fastest and slowest round trip halved (rank 0's)
 *   bw              rank 0 posts a window of 64 nonblocking sends of SIZE
 *                   bytes to rank 1, which posts 64 receives and answers
 *                   the window with a 4-byte ack; rank 0 times each window
 *                   from the first send to the ack. avg_us is the time per
 *                   message, min/max the fastest and slowest window / 64,
 *                   mb_s the payload over the timed windows' time (MB = 10^6 B)
 *   bibw            ranks 0 and 1 both post 64 receives and 64 sends at once
 *                   and wait for all; mb_s counts both directions
 *   barrier, bcast (int32, root 0), allreduce (float32 sum), allgather
 *   (int32, SIZE per rank), reduce-scatter (float32 sum, SIZE the whole
 *   vector, block r of it on rank r as comm.ReduceScatterCounts cuts it),
 *   alltoall (int32, SIZE the block each pair exchanges)
 *                   every rank; a barrier, then WARMUP+ITERS calls, each
 *                   timed alone with a barrier after it (none after a
 *                   barrier); each rank averages its timed calls; rank 0
 *                   reports the min/avg/max over the ranks of those averages
 *                   and nccl-tests' bus bandwidth in bits/s:
 *                   AlgBytes x 8 / avg x BusFactor(n), AlgBytes n x SIZE for
 *                   allgather and alltoall and SIZE otherwise, BusFactor
 *                   2(n-1)/n (allreduce), (n-1)/n (allgather,
 *                   reduce-scatter, alltoall), 1 (bcast), 0 (barrier)
 *
 * SIZES is a comma-separated list of sizes in bytes (1..64 MiB; bw and bibw
 * up to 16 MiB) or MIN:MAX ranges (MIN, 2 MIN, 4 MIN, ... <= MAX), sorted
 * and without duplicates; a collective's sizes are rounded down to whole
 * 4-byte elements and those below 4 bytes dropped; the barrier has one size,
 * 0. ITERS and WARMUP (0..1000000) are the timed and untimed iterations per
 * size, 0 or absent for the defaults by size: up to 8 KiB latency
 * 10000/100 and collectives 1000/100 (OSU's), then 100/10 below 1 MiB and
 * 20/2 from 1 MiB; bw and bibw
 * 100/10 windows up to 8 KiB, then as many windows of 64 messages as move
 * about 128 MiB (3..20), plus a tenth of that (at least 1) to warm up.
 * --validate checks every received message and result against its closed
 * form (the values of comm/osu/validate.go), untimed, and exits 1 on a
 * mismatch.
 *
 * Rank 0 prints, on stdout, two header lines starting with '#' and one line
 * per size:
 *   MROSU TEST RANKS SIZE AVG_US MIN_US MAX_US BUSBW_BPS MB_S ITERS WARMUP
 * with 0 for the fields that do not apply (busbw_bps of the point-to-point
 * tests and the barrier, mb_s of latency and the collectives).
 * Bad arguments: one line on stderr (rank 0's), exit status 2.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <mpi.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum kind { LATENCY, BW, BIBW, COLL };
enum coll { NONE, BARRIER, BCAST, ALLREDUCE, ALLGATHER, REDUCE_SCATTER, ALLTOALL };

struct test {
    const char *name, *title;
    enum kind kind;
    enum coll coll;
    const char *elem; /* a collective's element type */
};

/* The tests of comm/osu/tests.go, in its order. */
static const struct test tests[] = {
    {"latency", "Latency", LATENCY, NONE, NULL},
    {"bw", "Bandwidth", BW, NONE, NULL},
    {"bibw", "Bi-Directional Bandwidth", BIBW, NONE, NULL},
    {"barrier", "Barrier Latency", COLL, BARRIER, NULL},
    {"bcast", "Broadcast Latency", COLL, BCAST, "int32"},
    {"allreduce", "Allreduce Latency", COLL, ALLREDUCE, "float32"},
    {"allgather", "Allgather Latency", COLL, ALLGATHER, "int32"},
    {"reduce-scatter", "Reduce_scatter Latency", COLL, REDUCE_SCATTER, "float32"},
    {"alltoall", "All-to-All Personalized Exchange Latency", COLL, ALLTOALL, "int32"},
};
#define NTESTS ((int)(sizeof tests / sizeof tests[0]))

/* Limits and defaults, as comm/osu/tests.go has them. */
#define MIN_SIZE 1L
#define MAX_SIZE (64L << 20)
#define MAX_BW_SIZE (16L << 20)
#define WINDOW 64
#define BW_BUDGET (128L << 20)
#define SMALL_SIZE (8L << 10)
#define LARGE_SIZE (1L << 20)
#define MAX_ITERS 1000000L

/* Tags of the point-to-point tests, as comm/osu/report.go has them. */
#define TAG_LATENCY 1
#define TAG_DATA 2
#define TAG_ACK 3

/* What every rank contributes to a size's row: avg, min, max, bytes, secs,
 * first bad element (-1 if none). */
#define GATHERED 6

struct plan {
    const struct test *test;
    long *sizes;
    int nsizes;
    long iters, warmup; /* 0: defaults by size */
    int validate;
};

/* measure is one rank's measurement of one size. */
struct measure {
    double avg, min, max; /* microseconds */
    double bytes, secs;   /* bw, bibw: payload moved in the timed iterations, their time */
    long bad;             /* first wrong element, -1 if none */
    long bad_iter;
    char got[48], want[48];
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "mrosu: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* ---- closed forms of --validate (comm/osu/validate.go) ---- */

static float reduce_in(int r, long i) { return (float)((long)(r + 1) * (i % 7 + 1)); }

static float reduce_want(int n, long i) { return (float)((long)n * (n + 1) / 2 * (i % 7 + 1)); }

static int32_t value(int a, int b, long i) {
    uint64_t x = ((uint64_t)(uint32_t)a << 40) ^ ((uint64_t)(uint32_t)b << 20) ^ ((uint64_t)i * 0x9e3779b97f4a7c15ULL);
    x ^= (uint64_t)(uint32_t)a * 0xbf58476d1ce4e5b9ULL;
    x ^= (uint64_t)(uint32_t)b * 0x94d049bb133111ebULL;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (int32_t)(x & 0x7fffffff);
}

static unsigned char pattern_byte(int src, long size, long k) {
    return (unsigned char)(((int64_t)k * 131 + (int64_t)size * 7 + (int64_t)src * 17 + 1) % 251);
}

/* payload is the point-to-point message of size bytes that rank src sends. */
static unsigned char *payload(int src, long size) {
    unsigned char *b = xmalloc((size_t)size);
    for (long k = 0; k < size; k++)
        b[k] = pattern_byte(src, size, k);
    return b;
}

/* A byte no pattern has (patterns are < 251): what receive buffers hold
 * before a validated receive. */
#define POISON 0xff

static void mismatch(struct measure *m, long index, long iter, const char *got, const char *want) {
    m->bad = index;
    m->bad_iter = iter;
    snprintf(m->got, sizeof m->got, "%s", got);
    snprintf(m->want, sizeof m->want, "%s", want);
}

/* check_payload records the first wrong byte of a message from src. */
static void check_payload(struct measure *m, const unsigned char *data, int count, int src, long size, long iter) {
    char g[48], w[48];
    if (m->bad >= 0)
        return;
    if (count != size) {
        snprintf(g, sizeof g, "a message of %d bytes", count);
        snprintf(w, sizeof w, "%ld bytes", size);
        mismatch(m, count < size ? count : size, iter, g, w);
        return;
    }
    for (long k = 0; k < size; k++) {
        unsigned char want = pattern_byte(src, size, k);
        if (data[k] != want) {
            snprintf(g, sizeof g, "%u", data[k]);
            snprintf(w, sizeof w, "%u", want);
            mismatch(m, k, iter, g, w);
            return;
        }
    }
}

static void check_int32(struct measure *m, const int32_t *got, const int32_t *want, long count, long iter) {
    char g[48], w[48];
    if (m->bad >= 0)
        return;
    for (long i = 0; i < count; i++) {
        if (got[i] != want[i]) {
            snprintf(g, sizeof g, "%d", got[i]);
            snprintf(w, sizeof w, "%d", want[i]);
            mismatch(m, i, iter, g, w);
            return;
        }
    }
}

/* check_reduced checks count reduced elements starting at element lo. */
static void check_reduced(struct measure *m, const float *got, int n, long lo, long count, long iter) {
    char g[48], w[48];
    if (m->bad >= 0)
        return;
    for (long j = 0; j < count; j++) {
        float want = reduce_want(n, lo + j);
        if (got[j] != want) {
            snprintf(g, sizeof g, "%g", (double)got[j]);
            snprintf(w, sizeof w, "%g", (double)want);
            mismatch(m, lo + j, iter, g, w);
            return;
        }
    }
}

/* ---- iterations (comm/osu/tests.go DefaultIters, Plan.ItersFor) ---- */

static void iters_for(const struct plan *p, long size, long *iters, long *warmup) {
    switch (p->test->kind) {
    case BW:
    case BIBW:
        if (size <= SMALL_SIZE) {
            *iters = 100, *warmup = 10;
        } else {
            long it = BW_BUDGET / (WINDOW * size);
            if (it < 3)
                it = 3;
            if (it > 20)
                it = 20;
            *iters = it, *warmup = it / 10 > 1 ? it / 10 : 1;
        }
        break;
    default:
        if (size <= SMALL_SIZE && p->test->kind == LATENCY)
            *iters = 10000, *warmup = 100;
        else if (size <= SMALL_SIZE)
            *iters = 1000, *warmup = 100;
        else if (size < LARGE_SIZE)
            *iters = 100, *warmup = 10;
        else
            *iters = 20, *warmup = 2;
    }
    if (p->iters > 0)
        *iters = p->iters;
    if (p->warmup > 0)
        *warmup = p->warmup;
}

/* timings sums the durations of the timed iterations (after the warmup)
 * and keeps their extremes (run.go's timings). */
struct timings {
    long warmup;
    int64_t total, lo, hi;
    int counted;
};

static void timings_add(struct timings *t, long i, int64_t d) {
    if (i < t->warmup)
        return;
    if (!t->counted) {
        t->lo = t->hi = d;
        t->counted = 1;
    }
    t->total += d;
    if (d < t->lo)
        t->lo = d;
    if (d > t->hi)
        t->hi = d;
}

static double us(int64_t ns) { return (double)ns / 1000.0; }

/* timings_set fills m's average, minimum and maximum in microseconds per
 * unit, the timed iterations having done n units in all and each per units. */
static void timings_set(const struct timings *t, struct measure *m, long n, long per) {
    m->avg = us(t->total) / (double)n;
    m->min = us(t->lo) / (double)per;
    m->max = us(t->hi) / (double)per;
}

/* ---- point to point ---- */

static void run_latency(const struct plan *p, int rank, long size, long iters, long warmup, struct measure *m) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank > 1)
        return;
    int peer = 1 - rank;
    unsigned char *sbuf = payload(rank, size), *rbuf = xmalloc((size_t)size);
    struct timings tm = {.warmup = warmup};
    MPI_Status st;
    for (long i = 0; i < warmup + iters; i++) {
        if (p->validate)
            memset(rbuf, POISON, (size_t)size);
        int64_t t0 = now_ns();
        if (rank == 0) {
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_LATENCY, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_LATENCY, MPI_COMM_WORLD, &st);
        } else {
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_LATENCY, MPI_COMM_WORLD, &st);
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_LATENCY, MPI_COMM_WORLD);
        }
        int64_t d = now_ns() - t0;
        if (p->validate) {
            int count;
            MPI_Get_count(&st, MPI_BYTE, &count);
            check_payload(m, rbuf, count, peer, size, i);
        }
        timings_add(&tm, i, d);
    }
    timings_set(&tm, m, 2 * iters, 2); /* a round trip is two latencies */
    free(sbuf);
    free(rbuf);
}

/* check_window validates the WINDOW messages of a completed window. */
static void check_window(struct measure *m, const unsigned char *rbuf, MPI_Status *st, int src, long size, long iter) {
    for (int j = 0; j < WINDOW && m->bad < 0; j++) {
        int count;
        MPI_Get_count(&st[j], MPI_BYTE, &count);
        check_payload(m, rbuf + (size_t)j * size, count, src, size, iter);
    }
}

static void run_bw(const struct plan *p, int rank, long size, long iters, long warmup, struct measure *m) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank > 1)
        return;
    MPI_Request req[WINDOW];
    MPI_Status st[WINDOW];
    unsigned char ack[4] = {0};
    /* Every receive of a window has a buffer of its own. */
    unsigned char *buf = rank == 0 ? payload(0, size) : xmalloc((size_t)size * WINDOW);
    struct timings tm = {.warmup = warmup};
    for (long i = 0; i < warmup + iters; i++) {
        if (rank == 1 && p->validate)
            memset(buf, POISON, (size_t)size * WINDOW);
        int64_t t0 = now_ns();
        if (rank == 0) {
            for (int j = 0; j < WINDOW; j++)
                MPI_Isend(buf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &req[j]);
            MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, 4, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int j = 0; j < WINDOW; j++)
                MPI_Irecv(buf + (size_t)j * size, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &req[j]);
            MPI_Waitall(WINDOW, req, st);
            MPI_Send(ack, 4, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
            if (p->validate)
                check_window(m, buf, st, 0, size, i);
        }
        timings_add(&tm, i, now_ns() - t0);
    }
    timings_set(&tm, m, iters * WINDOW, WINDOW);
    m->bytes = (double)size * WINDOW * (double)iters;
    m->secs = (double)tm.total / 1e9;
    free(buf);
}

static void run_bibw(const struct plan *p, int rank, long size, long iters, long warmup, struct measure *m) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank > 1)
        return;
    int peer = 1 - rank;
    MPI_Request req[2 * WINDOW]; /* receives, then sends */
    MPI_Status st[2 * WINDOW];
    unsigned char *sbuf = payload(rank, size), *rbuf = xmalloc((size_t)size * WINDOW);
    struct timings tm = {.warmup = warmup};
    for (long i = 0; i < warmup + iters; i++) {
        if (p->validate)
            memset(rbuf, POISON, (size_t)size * WINDOW);
        int64_t t0 = now_ns();
        for (int j = 0; j < WINDOW; j++)
            MPI_Irecv(rbuf + (size_t)j * size, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]);
        for (int j = 0; j < WINDOW; j++)
            MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[WINDOW + j]);
        MPI_Waitall(2 * WINDOW, req, st);
        int64_t d = now_ns() - t0;
        if (p->validate)
            check_window(m, rbuf, st, peer, size, i);
        timings_add(&tm, i, d);
    }
    timings_set(&tm, m, iters * WINDOW, WINDOW);
    m->bytes = 2 * (double)size * WINDOW * (double)iters;
    m->secs = (double)tm.total / 1e9;
    free(sbuf);
    free(rbuf);
}

/* ---- collectives ---- */

/* rs_block is block r of count elements over n ranks (comm.ReduceScatterCounts). */
static void rs_block(long count, int n, int r, long *lo, long *hi) {
    *lo = (long)r * count / n;
    *hi = (long)(r + 1) * count / n;
}

static void fill_int32(int32_t *s, long n, int32_t v) {
    for (long i = 0; i < n; i++)
        s[i] = v;
}

static void fill_float(float *s, long n, float v) {
    for (long i = 0; i < n; i++)
        s[i] = v;
}

/* run_coll times one collective: a barrier, then warmup+iters calls, each
 * timed alone, a barrier after each; the rank's average over the timed ones. */
static void run_coll(const struct plan *p, int rank, int n, long size, long iters, long warmup, struct measure *m) {
    enum coll cl = p->test->coll;
    long count = size / 4, lo = 0, hi = 0;
    int validate = p->validate;
    void *send = NULL, *recv = NULL, *want = NULL;
    int *counts = NULL;
    switch (cl) {
    case BARRIER:
        break;
    case BCAST: {
        int32_t *b = xmalloc((size_t)count * 4), *w = xmalloc((size_t)count * 4);
        for (long i = 0; i < count; i++)
            w[i] = value(-2, -2, i);
        if (rank == 0)
            memcpy(b, w, (size_t)count * 4);
        recv = b, want = w;
        break;
    }
    case ALLREDUCE: {
        float *s = xmalloc((size_t)count * 4);
        for (long i = 0; i < count; i++)
            s[i] = reduce_in(rank, i);
        send = s, recv = xmalloc((size_t)count * 4);
        break;
    }
    case REDUCE_SCATTER: {
        float *s = xmalloc((size_t)count * 4);
        for (long i = 0; i < count; i++)
            s[i] = reduce_in(rank, i);
        counts = xmalloc(sizeof(int) * (size_t)n);
        for (int r = 0; r < n; r++) {
            long a, b;
            rs_block(count, n, r, &a, &b);
            counts[r] = (int)(b - a);
        }
        rs_block(count, n, rank, &lo, &hi);
        send = s, recv = xmalloc((size_t)(hi - lo) * 4);
        break;
    }
    case ALLGATHER: {
        int32_t *s = xmalloc((size_t)count * 4), *w = xmalloc((size_t)n * count * 4);
        for (long i = 0; i < count; i++)
            s[i] = value(rank, -1, i);
        for (int r = 0; r < n; r++)
            for (long i = 0; i < count; i++)
                w[r * count + i] = value(r, -1, i);
        send = s, want = w, recv = xmalloc((size_t)n * count * 4);
        break;
    }
    case ALLTOALL: {
        int32_t *s = xmalloc((size_t)n * count * 4), *w = xmalloc((size_t)n * count * 4);
        for (int j = 0; j < n; j++)
            for (long i = 0; i < count; i++) {
                s[j * count + i] = value(rank, j, i);
                w[j * count + i] = value(j, rank, i);
            }
        send = s, want = w, recv = xmalloc((size_t)n * count * 4);
        break;
    }
    default:
        fprintf(stderr, "mrosu: no runner for %s\n", p->test->name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t total = 0;
    for (long i = 0; i < warmup + iters; i++) {
        if (validate) { /* untimed: what a call that does nothing would leave */
            switch (cl) {
            case BCAST:
                if (rank != 0)
                    fill_int32(recv, count, -1);
                break;
            case ALLREDUCE:
                fill_float(recv, count, -1);
                break;
            case REDUCE_SCATTER:
                fill_float(recv, hi - lo, -1);
                break;
            case ALLGATHER:
            case ALLTOALL:
                fill_int32(recv, n * count, -1);
                break;
            default:
                break;
            }
        }
        int64_t t0 = now_ns();
        switch (cl) {
        case BARRIER:
            MPI_Barrier(MPI_COMM_WORLD);
            break;
        case BCAST:
            MPI_Bcast(recv, (int)count, MPI_INT32_T, 0, MPI_COMM_WORLD);
            break;
        case ALLREDUCE:
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
        case REDUCE_SCATTER:
            MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
        case ALLGATHER:
            MPI_Allgather(send, (int)count, MPI_INT32_T, recv, (int)count, MPI_INT32_T, MPI_COMM_WORLD);
            break;
        case ALLTOALL:
            MPI_Alltoall(send, (int)count, MPI_INT32_T, recv, (int)count, MPI_INT32_T, MPI_COMM_WORLD);
            break;
        default:
            break;
        }
        int64_t d = now_ns() - t0;
        if (i >= warmup)
            total += d;
        if (validate) {
            switch (cl) {
            case BCAST:
                check_int32(m, recv, want, count, i);
                break;
            case ALLREDUCE:
                check_reduced(m, recv, n, 0, count, i);
                break;
            case REDUCE_SCATTER:
                check_reduced(m, recv, n, lo, hi - lo, i);
                break;
            case ALLGATHER:
            case ALLTOALL:
                check_int32(m, recv, want, n * count, i);
                break;
            default:
                break;
            }
        }
        if (cl != BARRIER) /* a barrier needs no barrier after it */
            MPI_Barrier(MPI_COMM_WORLD);
    }
    m->avg = us(total) / (double)iters;
    m->min = m->max = m->avg;
    free(send);
    free(recv);
    free(want);
    free(counts);
}

/* ---- the row (report.go's combine and summarize) ---- */

static double bus_factor(enum coll cl, int n) {
    if (n < 1)
        return 0;
    double f = (double)(n - 1) / (double)n;
    switch (cl) {
    case ALLREDUCE:
        return 2 * f;
    case ALLGATHER:
    case REDUCE_SCATTER:
    case ALLTOALL:
        return f;
    case BCAST:
        return 1;
    default:
        return 0;
    }
}

static double alg_bytes(enum coll cl, long size, int n) {
    if (cl == ALLGATHER || cl == ALLTOALL)
        return (double)size * (double)n;
    return (double)size;
}

/* combine gathers every rank's measurement; rank 0 prints the row. It
 * returns 1 on every rank if any rank found a wrong value, else 0. */
static int combine(const struct plan *p, int rank, int n, long size, long iters, long warmup, const struct measure *m) {
    const struct test *t = p->test;
    double mine[GATHERED] = {m->avg, m->min, m->max, m->bytes, m->secs, (double)m->bad};
    double *all = xmalloc(sizeof(double) * GATHERED * (size_t)n);
    MPI_Allgather(mine, GATHERED, MPI_DOUBLE, all, GATHERED, MPI_DOUBLE, MPI_COMM_WORLD);
    int bad = 0;
    for (int r = 0; r < n; r++)
        if (all[GATHERED * r + 5] >= 0)
            bad = 1;
    if (bad) {
        if (m->bad >= 0)
            fprintf(stderr, "mrosu %s: validation failed on rank %d at size %ld: element %ld (iteration %ld) = %s, want %s\n",
                    t->name, rank, size, m->bad, m->bad_iter, m->got, m->want);
        free(all);
        return 1;
    }
    if (rank == 0) {
        double avg, lo, hi, busbw = 0, mbs = 0;
        if (t->kind != COLL) { /* rank 0 measured */
            avg = all[0], lo = all[1], hi = all[2];
            if (t->kind != LATENCY && all[4] > 0)
                mbs = all[3] / all[4] / 1e6;
        } else {
            double sum = 0;
            lo = hi = all[0];
            for (int r = 0; r < n; r++) {
                double a = all[GATHERED * r];
                sum += a;
                if (a < lo)
                    lo = a;
                if (a > hi)
                    hi = a;
            }
            avg = sum / (double)n;
            if (t->coll != BARRIER && avg > 0)
                busbw = alg_bytes(t->coll, size, n) * 8 / (avg / 1e6) * bus_factor(t->coll, n);
        }
        printf("MROSU %s %d %ld %.3f %.3f %.3f %.1f %.3f %ld %ld\n", t->name, n, size, avg, lo, hi, busbw, mbs, iters, warmup);
        fflush(stdout);
    }
    free(all);
    return 0;
}

/* ---- arguments ---- */

static char errbuf[512];

static int fail(const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(errbuf, sizeof errbuf, format, ap);
    va_end(ap);
    return -1;
}

static const char *names(void) {
    static char s[256];
    if (s[0] == 0)
        for (int i = 0; i < NTESTS; i++) {
            if (i > 0)
                strcat(s, ", ");
            strcat(s, tests[i].name);
        }
    return s;
}

/* parse_long parses all of s as a decimal integer. */
static int parse_long(const char *s, long *v) {
    char *end;
    if (*s == 0 || (*s != '-' && (*s < '0' || *s > '9')))
        return -1;
    errno = 0;
    *v = strtol(s, &end, 10);
    return errno != 0 || *end != 0 ? -1 : 0;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t k = strlen(s);
    while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
        s[--k] = 0;
    return s;
}

/* parse_size parses one size of SIZES. */
static int parse_size(const char *spec, const char *e, long *v) {
    if (parse_long(e, v) != 0)
        return fail("SIZES \"%s\": \"%s\" is not a size in bytes; allowed: comma-separated sizes %ld..%ld or MIN:MAX ranges, e.g. 4:1048576",
                    spec, e, MIN_SIZE, MAX_SIZE);
    if (*v < MIN_SIZE || *v > MAX_SIZE)
        return fail("SIZES \"%s\": size %ld is out of range: allowed %ld..%ld bytes", spec, *v, MIN_SIZE, MAX_SIZE);
    return 0;
}

/* parse_sizes parses SIZES as cmd/multirail's parseOSUSizes does, in bytes. */
static int parse_sizes(const char *spec, struct plan *p) {
    size_t cap = 64;
    long *out = xmalloc(cap * sizeof(long));
    int k = 0;
    char *copy = xmalloc(strlen(spec) + 1);
    strcpy(copy, spec);
    for (char *e = copy, *next; e != NULL; e = next) {
        /* Entries are split by hand: empty ones are skipped, not merged away. */
        next = strchr(e, ',');
        if (next != NULL)
            *next++ = 0;
        e = trim(e);
        if (*e == 0)
            continue;
        long a, b;
        char *colon = strchr(e, ':');
        if (colon != NULL)
            *colon = 0;
        if (parse_size(spec, trim(e), &a) != 0)
            goto bad;
        b = a;
        if (colon != NULL) {
            if (parse_size(spec, trim(colon + 1), &b) != 0)
                goto bad;
            if (a > b) {
                fail("SIZES \"%s\": range %ld:%ld has MIN > MAX; want MIN:MAX with MIN <= MAX", spec, a, b);
                goto bad;
            }
        }
        for (long v = a; v <= b; v *= 2) {
            if ((size_t)k == cap)
                out = realloc(out, (cap *= 2) * sizeof(long));
            if (out == NULL) {
                fprintf(stderr, "mrosu: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            out[k++] = v;
        }
    }
    free(copy);
    if (k == 0) {
        free(out);
        return fail("SIZES \"%s\": no sizes; want a comma-separated list of sizes in bytes or MIN:MAX ranges, e.g. 4:1048576", spec);
    }
    qsort(out, (size_t)k, sizeof(long), cmp_long);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || out[i] != out[u - 1])
            out[u++] = out[i];
    p->sizes = out, p->nsizes = u;
    return 0;
bad:
    free(copy);
    free(out);
    return -1;
}

/* parse_count parses ITERS or WARMUP. */
static int parse_count(const char *what, const char *s, long *v) {
    if (parse_long(s, v) != 0 || *v < 0 || *v > MAX_ITERS)
        return fail("%s \"%s\" is out of range: allowed 1..%ld, or 0 for the defaults by size", what, s, MAX_ITERS);
    return 0;
}

/* parse checks the command line into p, as cmd/multirail/osu.go's plan
 * does; on error errbuf says why. */
static int parse(int argc, char **argv, int nranks, struct plan *p) {
    int a = 1;
    memset(p, 0, sizeof *p);
    for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
        if (strcmp(argv[a], "--validate") == 0)
            p->validate = 1;
        else
            return fail("unknown option \"%s\"; allowed: --validate", argv[a]);
    }
    int nargs = argc - a;
    if (nargs < 2 || nargs > 4)
        return fail("usage: mrosu [--validate] TEST SIZES [ITERS [WARMUP]], got %d arguments; TEST one of %s", nargs, names());
    const char *name = argv[a], *spec = argv[a + 1];
    for (int i = 0; i < NTESTS; i++)
        if (strcmp(tests[i].name, name) == 0)
            p->test = &tests[i];
    if (p->test == NULL)
        return fail("unknown test \"%s\"; allowed: %s", name, names());
    if (parse_sizes(spec, p) != 0)
        return -1;
    const struct test *t = p->test;
    if (t->kind == COLL && t->coll == BARRIER) {
        p->sizes[0] = 0, p->nsizes = 1;
    } else if (t->kind == COLL) { /* osu.ElemSizes */
        int u = 0;
        for (int i = 0; i < p->nsizes; i++) {
            long s = p->sizes[i] / 4 * 4;
            if (s >= 4 && (u == 0 || p->sizes[u - 1] != s))
                p->sizes[u++] = s;
        }
        if (u == 0)
            return fail("SIZES \"%s\": every size is below 4 bytes; %s moves 4-byte %s elements", spec, t->name, t->elem);
        p->nsizes = u;
    } else if (t->kind != LATENCY && p->sizes[p->nsizes - 1] > MAX_BW_SIZE) {
        return fail("SIZES \"%s\": %ld bytes is too large for %s, which has 64 messages in flight: allowed up to %ld (16 MiB)",
                    spec, p->sizes[p->nsizes - 1], t->name, MAX_BW_SIZE);
    }
    if (nargs >= 3 && parse_count("ITERS", argv[a + 2], &p->iters) != 0)
        return -1;
    if (nargs >= 4 && parse_count("WARMUP", argv[a + 3], &p->warmup) != 0)
        return -1;
    if (t->kind != COLL && nranks < 2)
        return fail("%s needs at least 2 ranks; this job has %d", t->name, nranks);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    struct plan p;
    /* Every rank parses the same arguments and comes to the same end. */
    if (parse(argc, argv, n, &p) != 0) {
        if (rank == 0) {
            fprintf(stderr, "mrosu: %s\n", errbuf);
            fflush(stderr);
        }
        MPI_Finalize();
        return 2;
    }
    const struct test *t = p.test;
    if (rank == 0) {
        printf("# mrosu: OSU-style %s Test (Open MPI), ranks %d", t->title, n);
        if (t->elem != NULL)
            printf(", datatype %s", t->elem);
        printf("%s\n", p.validate ? ", validated" : "");
        printf("# MROSU test ranks size avg_us min_us max_us busbw_bps mb_s iters warmup\n");
        fflush(stdout);
    }
    int status = 0;
    for (int s = 0; s < p.nsizes && status == 0; s++) {
        long size = p.sizes[s], iters, warmup;
        iters_for(&p, size, &iters, &warmup);
        struct measure m = {.bad = -1};
        switch (t->kind) {
        case LATENCY:
            run_latency(&p, rank, size, iters, warmup, &m);
            break;
        case BW:
            run_bw(&p, rank, size, iters, warmup, &m);
            break;
        case BIBW:
            run_bibw(&p, rank, size, iters, warmup, &m);
            break;
        case COLL:
            run_coll(&p, rank, n, size, iters, warmup, &m);
            break;
        }
        status = combine(&p, rank, n, size, iters, warmup, &m);
    }
    /* Every rank is done measuring before anyone finalizes. */
    MPI_Barrier(MPI_COMM_WORLD);
    free(p.sizes);
    MPI_Finalize();
    return status;
}
