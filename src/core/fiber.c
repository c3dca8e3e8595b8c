#include "core/fiber.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* Room for the host MPI's calls made from an algorithm (pack, reduce_local, progress)
 * with sanitizer redzones; only the pages a call reaches are ever touched. */
enum { STACK_BYTES = 512 * 1024, STACK_POOL = 16 };

struct mcoll_fiber {
  void *sp;                 /* saved stack pointer while not running */
  char *stack;              /* lowest usable byte (a guard page lies below) */
  mcoll_fiber_fn fn;
  void *arg;
  int finished;
#if !defined(__x86_64__)
  ucontext_t uc;
#endif
#ifdef MCOLL_FIBER_ASAN
  void *fake_stack;
#endif
#ifdef MCOLL_FIBER_TSAN
  void *tsan_fiber;
#endif
};

/* Per thread: the fiber running, and where to return to. */
static MCOLL_TLS struct mcoll_fiber *current;
static MCOLL_TLS void *thread_sp;
#if !defined(__x86_64__)
static MCOLL_TLS ucontext_t thread_uc;
#endif
#ifdef MCOLL_FIBER_ASAN
static MCOLL_TLS const void *thread_stack_lo;
static MCOLL_TLS size_t thread_stack_size;
static MCOLL_TLS void *thread_fake_stack;
#endif
#ifdef MCOLL_FIBER_TSAN
static MCOLL_TLS void *thread_tsan_fiber;
#endif

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
  uintptr_t top = ((uintptr_t)f->stack + STACK_BYTES) & ~(uintptr_t)15;
  uint64_t *p = (uint64_t *)top;
  *--p = 0;                        /* fiber_main's return address: never used */
  *--p = (uint64_t)(uintptr_t)fiber_main;
  for (int i = 0; i < 6; i++) *--p = 0; /* rbp rbx r12 r13 r14 r15 */
  *--p = 0x037F00001F80ull;        /* mxcsr (low half) and x87 control word: defaults */
  f->sp = p;
#else
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = STACK_BYTES;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, fiber_main, 0);
#endif
}

static void switch_to_fiber(struct mcoll_fiber *f) {
#ifdef MCOLL_FIBER_ASAN
  __sanitizer_start_switch_fiber(&thread_fake_stack, f->stack, STACK_BYTES);
#endif
#ifdef MCOLL_FIBER_TSAN
  if (!thread_tsan_fiber) thread_tsan_fiber = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(f->tsan_fiber, 0);
#endif
#if defined(__x86_64__)
  mcoll__fiber_switch(&thread_sp, f->sp);
#else
  swapcontext(&thread_uc, &f->uc);
#endif
#ifdef MCOLL_FIBER_ASAN
  __sanitizer_finish_switch_fiber(thread_fake_stack, NULL, NULL);
#endif
}

/* From the running fiber back to the thread's stack; `ending`: never resumed again
 * until reset. */
static void switch_to_thread(struct mcoll_fiber *f, int ending) {
#ifdef MCOLL_FIBER_ASAN
  __sanitizer_start_switch_fiber(ending ? NULL : &f->fake_stack, thread_stack_lo, thread_stack_size);
#else
  (void)ending;
#endif
#ifdef MCOLL_FIBER_TSAN
  __tsan_switch_to_fiber(thread_tsan_fiber, 0);
#endif
#if defined(__x86_64__)
  mcoll__fiber_switch(&f->sp, thread_sp);
#else
  swapcontext(&f->uc, &thread_uc);
#endif
#ifdef MCOLL_FIBER_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &thread_stack_lo, &thread_stack_size);
#endif
}

static void fiber_main(void) {
  for (;;) {
    struct mcoll_fiber *f = current;
#ifdef MCOLL_FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &thread_stack_lo, &thread_stack_size);
#endif
    f->fn(f->arg);
    f->finished = 1;
    switch_to_thread(f, 1);
    /* Reset and resumed with new work: mcoll__fiber_reset rebuilt the frame, so
     * control never comes back here. */
  }
}

/* ---- stacks ----------------------------------------------------------------------- */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static char *stack_pool[STACK_POOL];
static int pool_count;

static char *stack_get(void) {
  pthread_mutex_lock(&pool_lock);
  char *s = pool_count ? stack_pool[--pool_count] : NULL;
  pthread_mutex_unlock(&pool_lock);
  if (s) return s;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return NULL;
  mprotect(m, page, PROT_NONE); /* an overflow faults instead of corrupting memory */
  return m + page;
}

static void stack_put(char *s) {
  pthread_mutex_lock(&pool_lock);
  if (pool_count < STACK_POOL) {
    stack_pool[pool_count++] = s;
    s = NULL;
  }
  pthread_mutex_unlock(&pool_lock);
  if (s) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap(s - page, STACK_BYTES + page);
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
  if (current || f->finished) return f->finished; /* fibers do not nest */
  current = f;
  switch_to_fiber(f);
  current = NULL;
  return f->finished;
}

void mcoll__fiber_yield(void) {
  struct mcoll_fiber *f = current;
  if (f) switch_to_thread(f, 0);
}

struct mcoll_fiber *mcoll__fiber_self(void) { return current; }

void mcoll__fiber_free(struct mcoll_fiber *f) {
  if (!f) return;
#ifdef MCOLL_FIBER_TSAN
  __tsan_destroy_fiber(f->tsan_fiber);
#endif
  stack_put(f->stack);
  free(f);
}
