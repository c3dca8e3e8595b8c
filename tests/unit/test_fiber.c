/* Unit test of core/fiber.c, without MPI: order of execution across yields, many
 * fibers interleaved, reuse after reset, deep stacks, floating-point state kept
 * across switches, fibers on several threads at once, scratch private to each fiber
 * across yields; prints the cost of a switch.
 * Exit status 0 when every check passed. */
#include <fenv.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fiber.h"

static int failures;
#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
    }                                                                        \
  } while (0)

/* A log of steps: fibers append their id and step as they run. */
struct step_log {
  int entries[1024];
  int n;
};

struct stepper {
  struct step_log *log;
  int id, steps;
};

static void stepper_main(void *arg) {
  struct stepper *s = arg;
  for (int i = 0; i < s->steps; i++) {
    s->log->entries[s->log->n++] = s->id * 100 + i;
    mcoll__fiber_yield();
  }
}

static void test_order(void) {
  enum { N = 5, STEPS = 7 };
  struct step_log log = {.n = 0};
  struct stepper st[N];
  struct mcoll_fiber *f[N];
  for (int i = 0; i < N; i++) {
    st[i] = (struct stepper){&log, i, STEPS + i};
    f[i] = mcoll__fiber_new(stepper_main, &st[i]);
    CHECK(f[i] != NULL, "fiber_new");
  }
  CHECK(mcoll__fiber_self() == NULL, "self outside a fiber");
  /* Round robin until all end: fiber i runs steps 0..STEPS+i-1, one per round. */
  int alive = N, round = 0;
  int ended[N] = {0};
  while (alive) {
    for (int i = 0; i < N; i++) {
      if (ended[i]) continue;
      if (mcoll__fiber_resume(f[i])) {
        ended[i] = 1;
        alive--;
        CHECK(round == STEPS + i, "fiber %d ended in round %d", i, round);
      }
    }
    round++;
  }
  int k = 0;
  for (int r = 0; r < STEPS + N; r++)
    for (int i = 0; i < N; i++)
      if (r < STEPS + i) {
        CHECK(log.entries[k] == i * 100 + r, "entry %d: %d, want %d", k, log.entries[k], i * 100 + r);
        k++;
      }
  CHECK(k == log.n, "log has %d entries, want %d", log.n, k);
  /* A finished fiber reset with new work runs it. */
  struct stepper again = {&log, 9, 2};
  log.n = 0;
  mcoll__fiber_reset(f[0], stepper_main, &again);
  CHECK(!mcoll__fiber_resume(f[0]) && !mcoll__fiber_resume(f[0]) && mcoll__fiber_resume(f[0]),
        "reset fiber: 2 steps then end");
  CHECK(log.n == 2 && log.entries[0] == 900 && log.entries[1] == 901, "reset fiber log");
  for (int i = 0; i < N; i++) mcoll__fiber_free(f[i]);
}

/* Deep recursion with a yield at the bottom: the stack must hold it. */
static int deep(int depth, volatile char *sink) {
  unsigned char frame[512];
  memset(frame, depth & 0xff, sizeof frame);
  if (depth == 0) {
    mcoll__fiber_yield();
    return frame[7];
  }
  int r = deep(depth - 1, sink) + frame[depth % sizeof frame];
  sink[0] = frame[3];
  return r;
}

static void deep_main(void *arg) {
  volatile char sink[1];
  *(int *)arg = deep(400, sink); /* ~200 KiB */
}

static void test_deep(void) {
  int result = -1;
  struct mcoll_fiber *f = mcoll__fiber_new(deep_main, &result);
  CHECK(!mcoll__fiber_resume(f), "deep: yields at the bottom");
  CHECK(mcoll__fiber_resume(f), "deep: ends");
  int want = 0;
  for (int d = 1; d <= 400; d++) want += d & 0xff;
  CHECK(result == want, "deep: %d, want %d", result, want);
  mcoll__fiber_free(f);
}

/* Floating point in flight across switches (callee-saved state and control words). */
static void float_main(void *arg) {
  double *out = arg, x = 1.0;
  for (int i = 1; i <= 50; i++) {
    x = x * 1.0000001 + sqrt((double)i);
    mcoll__fiber_yield();
  }
  *out = x;
}

static void test_float(void) {
  double a = 0, b = 0, want = 1.0;
  for (int i = 1; i <= 50; i++) want = want * 1.0000001 + sqrt((double)i);
  struct mcoll_fiber *fa = mcoll__fiber_new(float_main, &a), *fb = mcoll__fiber_new(float_main, &b);
  double mine = 3.0;
  while (!(mcoll__fiber_resume(fa) & mcoll__fiber_resume(fb))) mine = mine * 0.999 + 1.0;
  CHECK(a == want && b == want, "float: %.17g %.17g want %.17g", a, b, want);
  CHECK(mine > 3.0, "caller's floating point");
  mcoll__fiber_free(fa);
  mcoll__fiber_free(fb);
}

/* Control words (SSE and x87 rounding) are per fiber: one set inside a fiber stays
 * there across yields, and the resumer's own comes back at every switch, whether the
 * two differ or not (the switch loads them only when they differ). */
static void round_main(void *arg) {
  int *seen = arg;
  fesetround(FE_UPWARD);
  for (int i = 0; i < 3; i++) {
    mcoll__fiber_yield();
    seen[i] = fegetround();
  }
}

static void test_control_words(void) {
  int seen[3] = {0, 0, 0};
  struct mcoll_fiber *f = mcoll__fiber_new(round_main, seen);
  CHECK(fegetround() == FE_TONEAREST, "default rounding at start");
  mcoll__fiber_resume(f);
  CHECK(fegetround() == FE_TONEAREST, "resumer's rounding after the fiber changed its own");
  fesetround(FE_TOWARDZERO);
  mcoll__fiber_resume(f);
  CHECK(fegetround() == FE_TOWARDZERO, "resumer's own changed rounding kept");
  fesetround(FE_TONEAREST);
  while (!mcoll__fiber_resume(f)) {
  }
  CHECK(seen[0] == FE_UPWARD && seen[1] == FE_UPWARD && seen[2] == FE_UPWARD,
        "fiber's rounding kept across yields: %d %d %d", seen[0], seen[1], seen[2]);
  CHECK(fegetround() == FE_TONEAREST, "resumer's rounding at the end");
  mcoll__fiber_free(f);
}

/* Fibers on several threads at once. */
static void *thread_main(void *arg) {
  (void)arg;
  for (int k = 0; k < 200; k++) test_order();
  return NULL;
}

static void test_threads(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_main, NULL);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

static void spin_main(void *arg) {
  long n = *(long *)arg;
  for (long i = 0; i < n; i++) mcoll__fiber_yield();
}

static void measure(void) {
  long n = 2000000;
  struct mcoll_fiber *f = mcoll__fiber_new(spin_main, &n);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!mcoll__fiber_resume(f)) {
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (2.0 * n);
  printf("fiber switch: %.1f ns (resume + yield = 2 switches)\n", ns);
  mcoll__fiber_free(f);
}

/* Nesting: a fiber resumes a child, whose yields come back to it (not to the
 * thread); the child's companion pump from the parent's "waits". */
struct nest {
  struct step_log *log;
  struct mcoll_fiber *child;
};

static void child_main(void *arg) {
  struct step_log *log = arg;
  for (int i = 0; i < 3; i++) {
    log->entries[log->n++] = 200 + i;
    CHECK(mcoll__fiber_self() != NULL, "child runs on its fiber");
    mcoll__fiber_yield(); /* back to the parent fiber */
  }
}

static void parent_main(void *arg) {
  struct nest *n = arg;
  struct mcoll_fiber *me = mcoll__fiber_self();
  mcoll__fiber_set_companion(n->child);
  /* The parent's "wait": pump the companion until it ends, yielding to the thread
   * between pumps as a task's wait does. */
  while (mcoll__fiber_pump()) {
    CHECK(mcoll__fiber_self() == me, "back on the parent after the child yields");
    n->log->entries[n->log->n++] = 100;
    mcoll__fiber_yield();
  }
  CHECK(mcoll__fiber_resume(me) == 0, "a running fiber is not resumed");
  mcoll__fiber_set_companion(NULL);
  n->log->entries[n->log->n++] = 199;
}

static void test_nesting(void) {
  struct step_log log = {.n = 0};
  struct nest n = {&log, mcoll__fiber_new(child_main, &log)};
  struct mcoll_fiber *parent = mcoll__fiber_new(parent_main, &n);
  CHECK(parent && n.child, "fiber_new");
  int resumes = 0;
  while (!mcoll__fiber_resume(parent)) {
    CHECK(mcoll__fiber_self() == NULL, "back on the thread");
    resumes++;
  }
  /* child step, parent mark; three times; the child's end; the parent's end */
  int expect[] = {200, 100, 201, 100, 202, 100, 199};
  CHECK(log.n == 7 && resumes == 3, "nesting: %d entries, %d resumes", log.n, resumes);
  for (int i = 0; i < 7 && i < log.n; i++)
    CHECK(log.entries[i] == expect[i], "nesting: entry %d is %d, expected %d", i, log.entries[i],
          expect[i]);
  /* On the thread's own stack a companion is pumped the same way. */
  struct step_log log2 = {.n = 0};
  mcoll__fiber_reset(n.child, child_main, &log2);
  mcoll__fiber_set_companion(n.child);
  int pumps = 0;
  while (mcoll__fiber_pump()) pumps++;
  mcoll__fiber_set_companion(NULL);
  CHECK(pumps == 3 && log2.n == 3, "thread companion: %d pumps, %d entries", pumps, log2.n);
  mcoll__fiber_free(n.child);
  mcoll__fiber_free(parent);
}

/* Two fibers take scratch of one kind, fill it, yield to each other, and find their
 * own bytes when resumed (algorithms hold scratch across waits: red_node_hsra.c). */
struct scratch_user {
  int id, ok;
};

static void scratch_main(void *arg) {
  struct scratch_user *u = arg;
  enum { BYTES = 4096 };
  unsigned char *s = mcoll__scratch(MCOLL_SCRATCH_DATA, BYTES);
  memset(s, u->id, BYTES);
  mcoll__fiber_yield();
  unsigned char *again = mcoll__scratch(MCOLL_SCRATCH_DATA, BYTES);
  u->ok = again == s;
  for (int i = 0; i < BYTES; i++) u->ok &= s[i] == u->id;
}

static void test_scratch(void) {
  struct scratch_user u[2] = {{1, 0}, {2, 0}};
  struct mcoll_fiber *f[2] = {mcoll__fiber_new(scratch_main, &u[0]),
                              mcoll__fiber_new(scratch_main, &u[1])};
  unsigned char *own = mcoll__scratch(MCOLL_SCRATCH_DATA, 64);
  memset(own, 3, 64);
  mcoll__fiber_resume(f[0]);
  mcoll__fiber_resume(f[1]);
  mcoll__fiber_resume(f[0]);
  mcoll__fiber_resume(f[1]);
  CHECK(u[0].ok && u[1].ok, "each fiber keeps its scratch across yields (%d %d)", u[0].ok, u[1].ok);
  CHECK(own == mcoll__scratch(MCOLL_SCRATCH_DATA, 64) && own[0] == 3 && own[63] == 3,
        "the thread's own stack keeps its scratch");
  mcoll__fiber_free(f[0]);
  mcoll__fiber_free(f[1]);
}

int main(void) {
  test_order();
  test_scratch();
  test_nesting();
  test_deep();
  test_float();
  test_control_words();
  test_threads();
  measure();
  printf("%s: %d failures\n", failures ? "FAILED" : "ok", failures);
  return failures != 0;
}
