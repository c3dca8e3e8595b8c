/* MCOLL_TNBC_ADAPT: whether T-NBC pays, measured on the application itself
 * (tnbc/tnbc.h). An early return pays only where the transfer moves while the
 * computation after the call runs; where its CPU work (the kernel's TCP, the progress
 * thread's polls and copies) lands on the cores that compute, the computation slows
 * by more than the call saved. The application's period between two of its calls is
 * what both decide, so it is timed: per communicator, collective and size (the same
 * sequence on every rank, since T-NBC's eligibility is agreed), the first 2N calls
 * alternate T-NBC and the blocking call, each timed from its entry to the next such
 * call's entry; then one small allreduce keeps T-NBC only where the slowest rank's
 * median period was shorter with it than the slowest rank's without. The decision is the same on every rank, as the init
 * phase needs. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "tnbc/tnbc.h"

enum { SLOTS = 32, MAX_SAMPLES = 16 };

struct slot {
  MPI_Comm comm;
  const char *coll;
  size_t bytes;
  unsigned n;          /* calls so far */
  long long last_ns;   /* the last call's entry */
  int last_on;         /* whether it went T-NBC */
  int decided, on;     /* after 2N calls: the ranks' choice */
  int count[2];
  double period[2][MAX_SAMPLES]; /* [off, on] seconds */
};

static struct slot slots[SLOTS];
static int nslots;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static struct slot *find(MPI_Comm comm, const char *coll, size_t bytes) {
  pthread_mutex_lock(&lock);
  struct slot *s = NULL;
  for (int i = 0; i < nslots && !s; i++)
    if (slots[i].comm == comm && slots[i].coll == coll && slots[i].bytes == bytes) s = &slots[i];
  if (!s && nslots < SLOTS) {
    s = &slots[nslots++];
    memset(s, 0, sizeof *s);
    s->comm = comm;
    s->coll = coll;
    s->bytes = bytes;
  }
  pthread_mutex_unlock(&lock);
  return s;
}

int mcoll__tnbc_adapt_take(MPI_Comm comm, const char *coll, size_t bytes) {
  long w = mcoll__cfg.TNBC_ADAPT;
  /* (mcoll_tnbc_enable chooses for its caller, tools/bench's sides) */
  if (w <= 0 || mcoll__tnbc_caller_chooses || mcoll__cfg.TNBC_TRACE[0]) return 1;
  if (w > MAX_SAMPLES) w = MAX_SAMPLES;
  /* (a full table: T-NBC as without adapting; every rank fills it alike) */
  struct slot *s = find(comm, coll, bytes);
  if (!s) return 1;
  long long t = now_ns();
  if (s->n > 0 && !s->decided) {
    int side = s->last_on;
    if (s->count[side] < MAX_SAMPLES) s->period[side][s->count[side]++] = (double)(t - s->last_ns) / 1e9;
  }
  int on;
  if (s->decided) {
    on = s->on;
  } else if (s->n < 2 * (unsigned)w) {
    on = s->n % 2 == 0;
  } else {
    /* the slowest rank's median period with and without (MPI_MIN of the negated
     * microseconds): the job goes at its slowest rank's pace; a rank without samples
     * counts as no gain */
    int mine[2] = {INT_MIN, 0}, all[2] = {0, 0};
    if (s->count[0] > 0 && s->count[1] > 0) {
      double with = 1e6 * median(s->period[1], s->count[1]), without = 1e6 * median(s->period[0], s->count[0]);
      mine[0] = -(int)(with < INT_MAX ? with : INT_MAX);
      mine[1] = -(int)(without < INT_MAX ? without : INT_MAX);
    }
    on = mcoll__tnbc_agree(mine, all, 2, comm) == MPI_SUCCESS && all[0] != INT_MIN &&
         -(long long)all[0] < -(long long)all[1];
    s->on = on;
    s->decided = 1;
    t = now_ns(); /* (the agreement is not the application's period) */
  }
  s->n++;
  s->last_ns = t;
  s->last_on = on;
  return on;
}

void mcoll__tnbc_adapt_report(FILE *out) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nslots; i++) {
    struct slot *s = &slots[i];
    double m[2] = {0, 0};
    for (int side = 0; side < 2; side++) {
      double v[MAX_SAMPLES];
      memcpy(v, s->period[side], sizeof v);
      if (s->count[side]) m[side] = median(v, s->count[side]);
    }
    fprintf(out, "mcoll: tnbc adapt %s %zu bytes: period with %.3f ms, without %.3f ms (this rank) -> %s\n",
            s->coll, s->bytes, 1e3 * m[1], 1e3 * m[0],
            s->decided ? (s->on ? "T-NBC" : "blocking") : "still measuring");
  }
  pthread_mutex_unlock(&lock);
}
