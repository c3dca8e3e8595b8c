/* MPI_THREAD_MULTIPLE: several threads run collectives at the same time, each on a
 * communicator of its own (a dup, a split in reverse order, ...), blocking,
 * non-blocking and persistent mixed, and check every result. Usage: test_threads
 * [threads] [iters].
 * Prints "test_threads: done" and exits 0 when every check passed. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A persistent allreduce: MPI 4, or Open MPI 4.1's pcollreq extension. */
#if MPI_VERSION >= 4
#define ALLREDUCE_INIT MPI_Allreduce_init
#elif defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define ALLREDUCE_INIT MPIX_Allreduce_init
#endif
#endif

static int rank, size;

struct worker {
  int id;
  MPI_Comm comm;
  int iters;
  int errors;
};

static void *work(void *arg) {
  struct worker *w = arg;
  int me, n;
  MPI_Comm_rank(w->comm, &me);
  MPI_Comm_size(w->comm, &n);
  MPI_Barrier(w->comm); /* (a blocking call first: the communicator's context) */
  enum { MAX = 5000 };
  long *in = malloc(sizeof(long) * MAX), *out = malloc(sizeof(long) * MAX);
  long *all = malloc(sizeof(long) * MAX * (size_t)n), *bc = malloc(sizeof(long) * MAX);
  /* Started every non-blocking iteration, beside the other calls' threads. */
  enum { PCOUNT = 64 };
  long pin[PCOUNT], pout[PCOUNT];
#ifdef ALLREDUCE_INIT
  MPI_Request persistent;
  ALLREDUCE_INIT(pin, pout, PCOUNT, MPI_LONG, MPI_SUM, w->comm, MPI_INFO_NULL, &persistent);
#endif
  for (int it = 0; it < w->iters; it++) {
    int count = 1 + (it * 977 + w->id * 31) % MAX;
    int root = (it + w->id) % n;
    for (int i = 0; i < count; i++) {
      in[i] = (long)me * 1000003 + i + it + w->id;
      bc[i] = me == root ? (long)i * 7 + it : -1;
    }
    MPI_Request reqs[3];
    int nonblocking = (it + w->id) % 2;
    if (nonblocking) {
      MPI_Iallreduce(in, out, count, MPI_LONG, MPI_SUM, w->comm, &reqs[0]);
      MPI_Ibcast(bc, count, MPI_LONG, root, w->comm, &reqs[1]);
      MPI_Iallgather(in, count, MPI_LONG, all, count, MPI_LONG, w->comm, &reqs[2]);
      MPI_Status statuses[3];
      MPI_Waitall(3, reqs, statuses);
#ifdef ALLREDUCE_INIT
      for (int i = 0; i < PCOUNT; i++) pin[i] = (long)me * 7 + i + it;
      MPI_Start(&persistent);
      MPI_Wait(&persistent, MPI_STATUS_IGNORE);
      for (int i = 0; i < PCOUNT; i++) {
        long sum = 0;
        for (int r = 0; r < n; r++) sum += (long)r * 7 + i + it;
        if (pout[i] != sum) {
          if (w->errors++ < 3)
            fprintf(stderr, "rank %d thread %d iter %d: persistent wrong at %d\n", rank, w->id, it, i);
          break;
        }
      }
#endif
    } else {
      MPI_Allreduce(in, out, count, MPI_LONG, MPI_SUM, w->comm);
      MPI_Bcast(bc, count, MPI_LONG, root, w->comm);
      MPI_Allgather(in, count, MPI_LONG, all, count, MPI_LONG, w->comm);
    }
    for (int i = 0; i < count; i++) {
      long sum = 0;
      for (int r = 0; r < n; r++) sum += (long)r * 1000003 + i + it + w->id;
      int bad = out[i] != sum || bc[i] != (long)i * 7 + it;
      for (int r = 0; r < n && !bad; r++) bad = all[(size_t)r * count + i] != (long)r * 1000003 + i + it + w->id;
      if (bad) {
        if (w->errors++ < 3)
          fprintf(stderr, "rank %d thread %d iter %d count %d: wrong at %d\n", rank, w->id, it, count, i);
        break;
      }
    }
  }
#ifdef ALLREDUCE_INIT
  MPI_Request_free(&persistent);
#endif
  free(in), free(out), free(all), free(bc);
  return NULL;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) printf("test_threads: skipped: MPI_THREAD_MULTIPLE not granted\n");
    MPI_Finalize();
    return 0;
  }
  int nthreads = argc > 1 ? atoi(argv[1]) : 3, iters = argc > 2 ? atoi(argv[2]) : 40;
  struct worker *w = calloc((size_t)nthreads, sizeof *w);
  pthread_t *t = calloc((size_t)nthreads, sizeof *t);
  for (int i = 0; i < nthreads; i++) {
    w[i] = (struct worker){.id = i, .iters = iters};
    if (i % 2) MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &w[i].comm);
    else MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
  }
  for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, work, &w[i]);
  int errors = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(t[i], NULL);
    errors += w[i].errors;
    MPI_Comm_free(&w[i].comm);
  }
  int total = 0;
  MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf(total ? "test_threads: %d errors\n" : "test_threads: done\n", total);
  free(w), free(t);
  MPI_Finalize();
  return total != 0;
}
