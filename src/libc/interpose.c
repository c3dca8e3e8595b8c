/* T-NBC hazards outside MPI: libc calls that would meet a protected receive buffer
 * wait for its sub-messages first (the kernel returns EFAULT instead of faulting,
 * and free/realloc/munmap would hand protected pages back); sigaction and signal
 * for SIGSEGV keep T-NBC's handler in front and chain to the application's. fork
 * waits through pthread_atfork (tnbc/tnbc.c). See libc/interpose.h. */
#include <dlfcn.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "libc/interpose.h"
#include "mcoll.h"

atomic_int mcoll__tnbc_unsettled;
atomic_int mcoll__tnbc_known_any;
struct sigaction mcoll__tnbc_app_segv;
int mcoll__tnbc_handler_installed;

/* Set once by T-NBC's start, before anything can be pending; read by the calls below
 * only when a counter says so. */
static struct mcoll_libc_guard guard;

void mcoll__libc_guard_install(const struct mcoll_libc_guard *g) { guard = *g; }

/* Sanitizer builds: their runtimes interpose these functions first, and call
 * sigaction themselves before they are initialised (an instrumented override of it
 * would crash at start-up); T-NBC stays off there (tnbc.c), so nothing is defined. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MCOLL_NO_INTERPOSE 1
#endif

extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

#ifndef MCOLL_NO_INTERPOSE
static void (*next_free)(void *);
static void *(*next_realloc)(void *, size_t);
static ssize_t (*next_read)(int, void *, size_t);
static ssize_t (*next_write)(int, const void *, size_t);
static ssize_t (*next_readv)(int, const struct iovec *, int);
static ssize_t (*next_writev)(int, const struct iovec *, int);
static ssize_t (*next_recv)(int, void *, size_t, int);
static ssize_t (*next_send)(int, const void *, size_t, int);
static ssize_t (*next_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*next_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static size_t (*next_fread)(void *, size_t, size_t, FILE *);
static size_t (*next_fwrite)(const void *, size_t, size_t, FILE *);
static int (*next_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*next_signal)(int, sighandler_t);

/* Resolved once at load, never on a hot path (dlsym may allocate: free then takes
 * libc's own until this has run). */
__attribute__((constructor)) static void resolve_next(void) {
  next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  next_read = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
  next_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  next_readv = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "readv");
  next_writev = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
  next_recv = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
  next_send = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
  next_recvfrom = (ssize_t(*)(int, void *, size_t, int, struct sockaddr *, socklen_t *))dlsym(
      RTLD_NEXT, "recvfrom");
  next_sendto = (ssize_t(*)(int, const void *, size_t, int, const struct sockaddr *,
                            socklen_t))dlsym(RTLD_NEXT, "sendto");
  next_fread = (size_t(*)(void *, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "fread");
  next_fwrite = (size_t(*)(const void *, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "fwrite");
  next_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT,
                                                                                      "sigaction");
  next_signal = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
}

static inline int pending(void) {
  return atomic_load_explicit(&mcoll__tnbc_unsettled, memory_order_relaxed) != 0;
}

/* By address only: the compiler takes a buffer passed on from read() for one not
 * yet written, which the wait never reads. */
static void wait_buf(uintptr_t buf, size_t n) {
  if (guard.wait_range) guard.wait_range(buf, n);
}

static void wait_iov(const struct iovec *iov, int n) {
  for (int i = 0; i < n; i++) wait_buf((uintptr_t)iov[i].iov_base, iov[i].iov_len);
}

static void forget(uintptr_t lo, uintptr_t hi) {
  if (guard.forget) guard.forget(lo, hi);
}

/* ---- memory given back -------------------------------------------------------------- */
/* A malloc block about to be freed or moved: its header and usable bytes. */
static void guard_block(void *p) {
  int busy = pending(), known = atomic_load_explicit(&mcoll__tnbc_known_any, memory_order_relaxed);
  if (!p || (!busy && !known)) return;
  uintptr_t lo = (uintptr_t)p - 2 * sizeof(size_t), hi = (uintptr_t)p + malloc_usable_size(p);
  if (busy) wait_buf(lo, hi - lo);
  if (known) forget(lo, hi);
}

MCOLL_EXPORT void free(void *p) {
  guard_block(p);
  (next_free ? next_free : __libc_free)(p);
}

MCOLL_EXPORT void *realloc(void *p, size_t n) {
  guard_block(p);
  return (next_realloc ? next_realloc : __libc_realloc)(p, n);
}

MCOLL_EXPORT int munmap(void *addr, size_t len) {
  if (pending()) wait_buf((uintptr_t)addr, len);
  if (atomic_load_explicit(&mcoll__tnbc_known_any, memory_order_relaxed))
    forget((uintptr_t)addr, (uintptr_t)addr + len);
  return (int)syscall(SYS_munmap, addr, len);
}

/* ---- system calls on the buffer ------------------------------------------------------- */
MCOLL_EXPORT ssize_t read(int fd, void *buf, size_t n) {
  if (pending()) wait_buf((uintptr_t)buf, n);
  return next_read ? next_read(fd, buf, n) : syscall(SYS_read, fd, buf, n);
}

MCOLL_EXPORT ssize_t write(int fd, const void *buf, size_t n) {
  if (pending()) wait_buf((uintptr_t)buf, n);
  return next_write ? next_write(fd, buf, n) : syscall(SYS_write, fd, buf, n);
}

MCOLL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n) {
  if (pending()) wait_iov(iov, n);
  return next_readv ? next_readv(fd, iov, n) : syscall(SYS_readv, fd, iov, n);
}

MCOLL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n) {
  if (pending()) wait_iov(iov, n);
  return next_writev ? next_writev(fd, iov, n) : syscall(SYS_writev, fd, iov, n);
}

MCOLL_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags) {
  if (pending()) wait_buf((uintptr_t)buf, n);
  return next_recv ? next_recv(fd, buf, n, flags) : syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
}

MCOLL_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags) {
  if (pending()) wait_buf((uintptr_t)buf, n);
  return next_send ? next_send(fd, buf, n, flags) : syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
}

MCOLL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
                              socklen_t *fromlen) {
  if (pending()) wait_buf((uintptr_t)buf, n);
  return next_recvfrom ? next_recvfrom(fd, buf, n, flags, from, fromlen)
                       : syscall(SYS_recvfrom, fd, buf, n, flags, from, fromlen);
}

MCOLL_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
                            socklen_t tolen) {
  if (pending()) wait_buf((uintptr_t)buf, n);
  return next_sendto ? next_sendto(fd, buf, n, flags, to, tolen)
                     : syscall(SYS_sendto, fd, buf, n, flags, to, tolen);
}

/* stdio reads and writes large requests straight from the caller's buffer. */
MCOLL_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *f) {
  if (pending()) wait_buf((uintptr_t)buf, size * n);
  return next_fread(buf, size, n, f);
}

MCOLL_EXPORT size_t fwrite(const void *buf, size_t size, size_t n, FILE *f) {
  if (pending()) wait_buf((uintptr_t)buf, size * n);
  return next_fwrite(buf, size, n, f);
}

MCOLL_EXPORT ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
                                      const struct iovec *remote, unsigned long nremote,
                                      unsigned long flags) {
  if (pending()) wait_iov(local, (int)nlocal);
  return syscall(SYS_process_vm_readv, pid, local, nlocal, remote, nremote, flags);
}

MCOLL_EXPORT ssize_t process_vm_writev(pid_t pid, const struct iovec *local, unsigned long nlocal,
                                       const struct iovec *remote, unsigned long nremote,
                                       unsigned long flags) {
  if (pending()) wait_iov(local, (int)nlocal);
  return syscall(SYS_process_vm_writev, pid, local, nlocal, remote, nremote, flags);
}

#endif

/* ---- the application's SIGSEGV handler ---------------------------------------------- */
int mcoll__tnbc_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
#ifdef MCOLL_NO_INTERPOSE
  return sigaction(sig, act, old);
#else
  return (next_sigaction ? next_sigaction : __sigaction)(sig, act, old);
#endif
}

#ifndef MCOLL_NO_INTERPOSE
/* While mcoll's handler is installed, the application's SIGSEGV handler is kept
 * behind it (called for every fault that is not T-NBC's), and reported back as the
 * current one. */
MCOLL_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  if (sig != SIGSEGV || !mcoll__tnbc_handler_installed)
    return mcoll__tnbc_real_sigaction(sig, act, old);
  struct sigaction previous = mcoll__tnbc_app_segv;
  if (act) mcoll__tnbc_app_segv = *act;
  if (old) *old = previous;
  return 0;
}

MCOLL_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  if (sig != SIGSEGV || !mcoll__tnbc_handler_installed) {
    if (next_signal) return next_signal(sig, handler);
    struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_RESTART}, old;
    sigemptyset(&sa.sa_mask);
    return mcoll__tnbc_real_sigaction(sig, &sa, &old) == 0 ? old.sa_handler : SIG_ERR;
  }
  struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_RESTART}, old;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, &old);
  return old.sa_handler; /* (shares its storage with sa_sigaction) */
}
#endif
