/* Ending the job: a fatal error's message, the job's abort, and the allocations whose
 * failure no caller could report. */
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fatal.h"

static void exit_quietly(int sig)
{
  (void)sig;
  _exit(1);
}

/* Ends the job once, whichever ranks ask. The host's abort may exit the process while
 * other ranks still run, and the libraries of their namespaces (a Fortran runtime, Open
 * MPI's Fortran library with its own libopen-pal) then fault in their destructors or
 * report a fault with handlers of their own: a fault from here on ends the process
 * quietly. */
_Noreturn void thr_abort_job(int code)
{
  static atomic_int aborting;
  signal(SIGSEGV, exit_quietly);
  signal(SIGBUS, exit_quietly);
  if (atomic_exchange(&aborting, 1))
    for (;;)
      pause();
  PMPI_Abort(MPI_COMM_WORLD, code);
  abort();
}

_Noreturn void thr_fatal(const char *fmt, ...)
{
  /* One write, then a pause before the abort: the launcher forwards a rank's stderr
   * through a pipe, and an abort that tears the job down at once can lose a message
   * still in that pipe. */
  char text[512];
  int n = snprintf(text, sizeof text, "mcoll threads: ");
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(text + n, sizeof text - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof text - 2) n = (int)sizeof text - 2;
  text[n++] = '\n';
  fflush(stderr);
  ssize_t written = write(STDERR_FILENO, text, (size_t)n);
  (void)written;
  usleep(200 * 1000);
  thr_abort_job(1);
}

_Noreturn void thr_out_of_memory(size_t bytes, const char *where)
{
  thr_fatal("out of memory (MPI_ERR_NO_MEM): %zu bytes in %s", bytes, where);
}

/* A test's hook: MCOLL_THREADS_FAIL_ALLOC_IN=FUNCTION makes every checked allocation of
 * that function fail as a NULL from malloc would, so that the path a real shortage
 * takes runs under test. Read once (every rank reads the same environment). */
static int fails_in(const char *where)
{
  static _Atomic(const char *) name;
  static atomic_int read;
  if (!atomic_load_explicit(&read, memory_order_acquire)) {
    const char *value = getenv("MCOLL_THREADS_FAIL_ALLOC_IN");
    atomic_store_explicit(&name, value && *value ? value : NULL, memory_order_relaxed);
    atomic_store_explicit(&read, 1, memory_order_release);
  }
  const char *fail = atomic_load_explicit(&name, memory_order_relaxed);
  return fail && !strcmp(fail, where);
}

void *thr_malloc_in(size_t bytes, const char *where)
{
  void *p = fails_in(where) ? NULL : malloc(bytes ? bytes : 1);
  if (!p)
    thr_out_of_memory(bytes, where);
  return p;
}

void *thr_calloc_in(size_t n, size_t size, const char *where)
{
  void *p = fails_in(where) ? NULL : calloc(n ? n : 1, size ? size : 1);
  if (!p)
    thr_out_of_memory(n * size, where);
  return p;
}

void *thr_realloc_in(void *p, size_t bytes, const char *where)
{
  void *q = fails_in(where) ? NULL : realloc(p, bytes ? bytes : 1);
  if (!q)
    thr_out_of_memory(bytes, where);
  return q;
}

void *thr_aligned_alloc_in(size_t align, size_t bytes, const char *where)
{
  void *p = fails_in(where) ? NULL : aligned_alloc(align, bytes ? bytes : align);
  if (!p)
    thr_out_of_memory(bytes, where);
  return p;
}
