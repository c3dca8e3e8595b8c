#include "core/fiber.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/tls.h"

/* Sanitizers must be told when the stack changes under them. */
#if defined(__SANITIZE_ADDRESS__)
#define MCOLL_FIBER_ASAN 1
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__)
#define MCOLL_FIBER_TSAN 1
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

/* A fiber runs the host MPI's calls made from an algorithm (pack, reduce_local,
 * progress) and the application's reduction functions, which natively run on the
 * caller's thread stack: a fiber's stack is as large as a thread's (RLIMIT_STACK,
 * within bounds). It is reserved address space only: the pages a call reaches are
 * the only ones ever touched. */
enum { STACK_MIN = 512 * 1024, STACK_MAX = 64 << 20, STACK_UNLIMITED = 8 << 20, STACK_POOL = 16 };
static size_t stack_bytes; /* set once, before the first stack (stack_bytes_init) */
static pthread_once_t stack_bytes_once = PTHREAD_ONCE_INIT;

static void stack_bytes_init(void) {
  struct rlimit limit;
  size_t bytes = STACK_UNLIMITED;
  if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    bytes = limit.rlim_cur < STACK_MIN ? STACK_MIN
            : limit.rlim_cur > STACK_MAX ? STACK_MAX
                                          : (size_t)limit.rlim_cur;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  stack_bytes = (bytes + page - 1) / page * page;
}

/* A finished fiber waits in a pool for its next call with the scratch it had, up to
 * this many bytes: large calls are few, and would otherwise pin memory per fiber. */
enum { SCRATCH_KEPT = 1 << 20 };

struct scratch {
  void *mem[MCOLL_SCRATCH_KINDS];
  size_t bytes[MCOLL_SCRATCH_KINDS];
};

struct mcoll_fiber {
  void *sp;                 /* saved stack pointer while not running */
  char *stack;              /* lowest usable byte (a guard page lies below) */
  mcoll_fiber_fn fn;
  void *arg;
  int finished;
  /* Who resumed it (NULL: the thread's stack), and where that one continues. */
  struct mcoll_fiber *resumer;
  void *resumer_sp;
  struct mcoll_fiber *companion; /* driven from this fiber's waits (mcoll__fiber_pump) */
  struct scratch scratch;
#if !defined(__x86_64__)
  ucontext_t uc, resumer_uc;
#endif
#ifdef MCOLL_FIBER_ASAN
  void *fake_stack;
  const void *resumer_lo; /* the resumer's stack, for the switch back */
  size_t resumer_size;
#endif
#ifdef MCOLL_FIBER_TSAN
  void *tsan_fiber;
  void *resumer_tsan;
#endif
};

/* Per thread: the fiber running (NULL: the thread's own stack), and the companion
 * of the code on the thread's own stack. */
static MCOLL_TLS struct mcoll_fiber *current;
static MCOLL_TLS struct mcoll_fiber *thread_companion;
static MCOLL_TLS struct scratch thread_scratch;

/* ---- the switch ---------------------------------------------------------------- */
#if defined(__x86_64__)
/* void mcoll__fiber_switch(void **save, void *next): saves the callee-saved
 * registers and the floating-point control words on this stack, stores its pointer
 * in *save, and continues on next's stack where the same were saved. */
void mcoll__fiber_switch(void **save, void *next);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl mcoll__fiber_switch\n"
        ".hidden mcoll__fiber_switch\n"
        ".type mcoll__fiber_switch,@function\n"
        "mcoll__fiber_switch:\n"
        "  .cfi_startproc\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size mcoll__fiber_switch, .-mcoll__fiber_switch\n");
#endif

static void fiber_main(void);

static void prepare_stack(struct mcoll_fiber *f) {
  f->finished = 0;
#if defined(__x86_64__)
  /* The frame mcoll__fiber_switch pops: control words, six registers, then the
   * return address fiber_main; above it a dummy return address for fiber_main, so
   * that its entry sees the stack as after a call (rsp = 8 mod 16). */
  uintptr_t top = ((uintptr_t)f->stack + stack_bytes) & ~(uintptr_t)15;
  uint64_t *p = (uint64_t *)top;
  *--p = 0;                        /* fiber_main's return address: never used */
  *--p = (uint64_t)(uintptr_t)fiber_main;
  for (int i = 0; i < 6; i++) *--p = 0; /* rbp rbx r12 r13 r14 r15 */
  *--p = 0x037F00001F80ull;        /* mxcsr (low half) and x87 control word: defaults */
  f->sp = p;
#else
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = stack_bytes;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, fiber_main, 0);
#endif
}

/* From the resumer (the thread's stack or another fiber) into f. */
static void switch_to_fiber(struct mcoll_fiber *f) {
#ifdef MCOLL_FIBER_ASAN
  void *resumer_fake_stack; /* this frame outlives the switch: a local does */
  __sanitizer_start_switch_fiber(&resumer_fake_stack, f->stack, stack_bytes);
#endif
#ifdef MCOLL_FIBER_TSAN
  f->resumer_tsan = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(f->tsan_fiber, 0);
#endif
#if defined(__x86_64__)
  mcoll__fiber_switch(&f->resumer_sp, f->sp);
#else
  swapcontext(&f->resumer_uc, &f->uc);
#endif
#ifdef MCOLL_FIBER_ASAN
  __sanitizer_finish_switch_fiber(resumer_fake_stack, NULL, NULL);
#endif
}

/* From the running fiber back to its resumer; `ending`: never resumed again until
 * reset. */
static void switch_to_resumer(struct mcoll_fiber *f, int ending) {
#ifdef MCOLL_FIBER_ASAN
  __sanitizer_start_switch_fiber(ending ? NULL : &f->fake_stack, f->resumer_lo, f->resumer_size);
#else
  (void)ending;
#endif
#ifdef MCOLL_FIBER_TSAN
  __tsan_switch_to_fiber(f->resumer_tsan, 0);
#endif
#if defined(__x86_64__)
  mcoll__fiber_switch(&f->sp, f->resumer_sp);
#else
  swapcontext(&f->uc, &f->resumer_uc);
#endif
#ifdef MCOLL_FIBER_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &f->resumer_lo, &f->resumer_size);
#endif
}

static void fiber_main(void) {
  for (;;) {
    struct mcoll_fiber *f = current;
#ifdef MCOLL_FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &f->resumer_lo, &f->resumer_size);
#endif
    f->fn(f->arg);
    f->finished = 1;
    for (int k = 0; k < MCOLL_SCRATCH_KINDS; k++)
      if (f->scratch.bytes[k] > SCRATCH_KEPT) {
        free(f->scratch.mem[k]);
        f->scratch.mem[k] = NULL;
        f->scratch.bytes[k] = 0;
      }
    switch_to_resumer(f, 1);
    /* Reset and resumed with new work: mcoll__fiber_reset rebuilt the frame, so
     * control never comes back here. */
  }
}

/* ---- stacks ----------------------------------------------------------------------- */
/* Under ThreadSanitizer every fiber gets fresh stack pages: its shadow memory knows
 * a reused stack's earlier accesses under another fiber's identity, which no switch
 * orders with the new fiber's (false reports). munmap clears that shadow. */
#ifdef MCOLL_FIBER_TSAN
enum { STACKS_FRESH = 1 };
#else
enum { STACKS_FRESH = 0 };
#endif
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static char *stack_pool[STACK_POOL];
static int pool_count;

static char *stack_get(void) {
  pthread_once(&stack_bytes_once, stack_bytes_init);
  pthread_mutex_lock(&pool_lock);
  char *s = pool_count ? stack_pool[--pool_count] : NULL;
  pthread_mutex_unlock(&pool_lock);
  if (s) return s;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, stack_bytes + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return NULL;
  mprotect(m, page, PROT_NONE); /* an overflow faults instead of corrupting memory */
  return m + page;
}

static void stack_put(char *s) {
  pthread_mutex_lock(&pool_lock);
  if (pool_count < STACK_POOL && !STACKS_FRESH) {
    stack_pool[pool_count++] = s;
    s = NULL;
  }
  pthread_mutex_unlock(&pool_lock);
  if (s) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap(s - page, stack_bytes + page);
  }
}

/* ---- interface -------------------------------------------------------------------- */
struct mcoll_fiber *mcoll__fiber_new(mcoll_fiber_fn fn, void *arg) {
  struct mcoll_fiber *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->stack = stack_get();
  if (!f->stack) {
    free(f);
    return NULL;
  }
#ifdef MCOLL_FIBER_TSAN
  f->tsan_fiber = __tsan_create_fiber(0);
#endif
  mcoll__fiber_reset(f, fn, arg);
  return f;
}

void mcoll__fiber_reset(struct mcoll_fiber *f, mcoll_fiber_fn fn, void *arg) {
  f->fn = fn;
  f->arg = arg;
  prepare_stack(f);
}

int mcoll__fiber_resume(struct mcoll_fiber *f) {
  if (f->finished || f == current || f->resumer) return f->finished; /* running already */
  f->resumer = current;
  current = f;
  switch_to_fiber(f);
  current = f->resumer;
  f->resumer = NULL;
  return f->finished;
}

void mcoll__fiber_yield(void) {
  struct mcoll_fiber *f = current;
  if (f) switch_to_resumer(f, 0);
}

void mcoll__fiber_set_companion(struct mcoll_fiber *f) {
  if (current) current->companion = f;
  else thread_companion = f;
}

int mcoll__fiber_pump(void) {
  struct mcoll_fiber *c = current ? current->companion : thread_companion;
  return c && !mcoll__fiber_resume(c);
}

struct mcoll_fiber *mcoll__fiber_self(void) { return current; }

void *mcoll__scratch(enum mcoll_scratch_kind kind, size_t bytes) {
  struct scratch *s = current ? &current->scratch : &thread_scratch;
  if (bytes > s->bytes[kind]) {
    free(s->mem[kind]);
    s->mem[kind] = malloc(bytes);
    s->bytes[kind] = bytes;
    if (!s->mem[kind]) { /* (no MPI here: the fiber unit test runs without it) */
      fprintf(stderr, "mcoll: out of memory (%zu bytes of scratch)\n", bytes);
      abort();
    }
  }
  return s->mem[kind];
}

void mcoll__fiber_free(struct mcoll_fiber *f) {
  if (!f) return;
#ifdef MCOLL_FIBER_TSAN
  __tsan_destroy_fiber(f->tsan_fiber);
#endif
  stack_put(f->stack);
  for (int k = 0; k < MCOLL_SCRATCH_KINDS; k++) free(f->scratch.mem[k]);
  free(f);
}
