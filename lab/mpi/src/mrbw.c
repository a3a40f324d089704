/* mrbw.c - point-to-point MPI bandwidth between rank 0 (sender) and rank 1
 * (receiver), measured at the receiver, for multirail's network lab.
 *
 *   mpirun -np 2 ./mrbw SIZE SECS WINDOW
 *
 * The sender posts windows of WINDOW non-blocking sends of SIZE bytes; the
 * receiver posts as many receives, waits for all of them, and answers with
 * a 4-byte ack before the next window starts (osu_bw style). The sender
 * stops starting windows after SECS seconds. One untimed window warms the
 * connections up first.
 *
 * Rank 1 prints, on stdout, one line per event, wall-clock times in
 * seconds since the Unix epoch (CLOCK_REALTIME, so that another process
 * on the same machine can line them up with its own clock):
 *   MRBW start T              the timed run begins
 *   MRBW win T BYTES          a window of BYTES payload bytes completed at T
 *   MRBW done WINDOWS BYTES SECONDS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 4 || nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 mrbw SIZE SECS WINDOW\n");
        MPI_Finalize();
        return 2;
    }
    long size = atol(argv[1]);
    double secs = atof(argv[2]);
    int window = atoi(argv[3]);
    if (size < 1 || size > (1L << 30) || secs <= 0 || window < 1 || window > 4096) {
        if (rank == 0)
            fprintf(stderr, "mrbw: SIZE 1..2^30, SECS > 0, WINDOW 1..4096\n");
        MPI_Finalize();
        return 2;
    }
    char *buf = malloc((size_t)size * window);
    MPI_Request *req = malloc(sizeof(MPI_Request) * window);
    if (buf == NULL || req == NULL) {
        fprintf(stderr, "mrbw: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, rank + 1, (size_t)size * window);
    int go = 1, ack = 0;
    for (int pass = 0; pass < 2; pass++) { /* pass 0: one untimed window */
        long windows = 0;
        double t0 = 0, t1 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = wall();
        if (rank == 1 && pass == 1) {
            printf("MRBW start %.6f\n", t0);
            fflush(stdout);
        }
        for (;;) {
            if (rank == 0) {
                go = pass == 0 ? windows == 0 : wall() - t0 < secs;
                MPI_Send(&go, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
                if (!go)
                    break;
                for (int w = 0; w < window; w++)
                    MPI_Isend(buf + (size_t)w * size, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
                MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&go, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (!go)
                    break;
                for (int w = 0; w < window; w++)
                    MPI_Irecv(buf + (size_t)w * size, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
                if (pass == 1) {
                    printf("MRBW win %.6f %ld\n", wall(), (long)window * size);
                    fflush(stdout);
                }
                MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
            }
            windows++;
        }
        t1 = wall();
        if (rank == 1 && pass == 1) {
            printf("MRBW done %ld %.0f %.6f\n", windows, (double)windows * window * size, t1 - t0);
            fflush(stdout);
        }
    }
    free(buf);
    free(req);
    MPI_Finalize();
    return 0;
}
