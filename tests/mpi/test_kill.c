/* test_kill: bcasts in a loop on MPI_COMM_WORLD, sizes varying up to 1 MiB and the
 * root going round; the last rank kills itself with SIGKILL after a chosen
 * iteration. The job must then end (the launcher or mcoll's peers notice) and
 * leave no shared-memory file behind; the test driver checks both.
 *
 * usage: test_kill [kill_after_iteration (default 20)] [iterations (default 100000)]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_BYTES = 1 << 20 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long kill_after = argc > 1 ? atol(argv[1]) : 20;
    long iterations = argc > 2 ? atol(argv[2]) : 100000;
    unsigned char *buf = malloc(MAX_BYTES);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);

    for (long it = 0; it < iterations; it++) {
        int root = (int)(it % size);
        /* small, page-crossing and large sizes in turn */
        size_t bytes = (size_t)(it * 7919 % 3 == 0 ? it % 97 : it * 104729 % MAX_BYTES);
        if (rank == root) memset(buf, (int)(it & 0xff), bytes);
        MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        if (bytes && (buf[0] != (unsigned char)(it & 0xff) || buf[bytes - 1] != (unsigned char)(it & 0xff))) {
            fprintf(stderr, "test_kill: rank %d: wrong data at iteration %ld\n", rank, it);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == size - 1 && it == kill_after) {
            fprintf(stderr, "test_kill: rank %d kills itself after iteration %ld\n", rank, it);
            fflush(stderr);
            raise(SIGKILL);
        }
    }
    if (rank == 0) printf("test_kill: %ld iterations, nobody was killed\n", iterations);
    free(buf);
    MPI_Finalize();
    return 0;
}
