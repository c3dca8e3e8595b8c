/* T-NBC hazards outside MPI: libc calls that would meet a protected receive buffer
 * wait for its sub-messages first (the kernel returns EFAULT instead of faulting,
 * free/realloc/munmap would hand protected pages back, and T-NBC's unprotect would
 * undo the application's mprotect); calls whose pointer leads to a string or a small
 * array (open, pipe) wait and retry only when the kernel said EFAULT; sigaction and
 * signal for SIGSEGV keep T-NBC's handler in front and chain to the application's;
 * no thread may block SIGSEGV. fork waits through pthread_atfork (tnbc/tnbc.c). See
 * libc/interpose.h. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
static ssize_t (*next_pread)(int, void *, size_t, off_t);
static ssize_t (*next_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*next_preadv)(int, const struct iovec *, int, off_t);
static ssize_t (*next_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*next_sendmsg)(int, const struct msghdr *, int);
static ssize_t (*next_recvmsg)(int, struct msghdr *, int);
static int (*next_open)(const char *, int, ...);
static int (*next_openat)(int, const char *, int, ...);
static int (*next_pipe)(int *);
static int (*next_pipe2)(int *, int);
static int (*next_pthread_sigmask)(int, const sigset_t *, sigset_t *);
static int (*next_sigprocmask)(int, const sigset_t *, sigset_t *);
/* MCOLL_TNBC is set: SIGSEGV must reach T-NBC's handler in every thread, from the
 * first one on (threads inherit their creator's mask, also from before MPI_Init).
 * -1 until known. */
static int tnbc_requested = -1;
static int tnbc_is_requested(void) {
  if (tnbc_requested < 0) {
    const char *tnbc = getenv("MCOLL_TNBC");
    tnbc_requested = tnbc && atoi(tnbc) != 0;
  }
  return tnbc_requested;
}

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

/* The calls below may come before the constructor above (other libraries'
 * constructors open files and set signal masks): resolved at their first use. */
#define NEXT(fn)                                                                                   \
  (*(__typeof__(next_##fn) *)resolve((void **)&next_##fn, #fn))
static void *resolve(void **slot, const char *name) {
  if (!*slot) *slot = dlsym(RTLD_NEXT, name);
  return slot;
}

static inline int pending(void) {
  return atomic_load_explicit(&mcoll__tnbc_unsettled, memory_order_relaxed) != 0;
}

/* By address only: the compiler takes a buffer passed on from read() for one not
 * yet written, which the wait never reads. */
static void wait_buf(const void *caller, uintptr_t buf, size_t n, enum mcoll_libc_access access) {
  if (guard.wait_range) guard.wait_range(buf, n, access, caller);
}

static void wait_iov(const void *caller, const struct iovec *iov, int n,
                     enum mcoll_libc_access access) {
  for (int i = 0; i < n; i++) wait_buf(caller, (uintptr_t)iov[i].iov_base, iov[i].iov_len, access);
}

/* Where the interposed function was called from (its return address). */
#define CALLER __builtin_return_address(0)

#define READS MCOLL_LIBC_READS
#define WRITES MCOLL_LIBC_WRITES

static void forget(uintptr_t lo, uintptr_t hi) {
  if (guard.forget) guard.forget(lo, hi);
}

/* ---- memory given back -------------------------------------------------------------- */
/* A malloc block about to be freed or moved: its header and usable bytes. */
static void guard_block(const void *caller, void *p) {
  int busy = pending(), known = atomic_load_explicit(&mcoll__tnbc_known_any, memory_order_relaxed);
  if (!p || (!busy && !known)) return;
  uintptr_t lo = (uintptr_t)p - 2 * sizeof(size_t), hi = (uintptr_t)p + malloc_usable_size(p);
  if (busy) wait_buf(caller, lo, hi - lo, MCOLL_LIBC_RELEASES);
  if (known) forget(lo, hi);
}

MCOLL_EXPORT void free(void *p) {
  guard_block(CALLER, p);
  (next_free ? next_free : __libc_free)(p);
}

MCOLL_EXPORT void *realloc(void *p, size_t n) {
  guard_block(CALLER, p);
  return (next_realloc ? next_realloc : __libc_realloc)(p, n);
}

MCOLL_EXPORT int munmap(void *addr, size_t len) {
  if (pending()) wait_buf(CALLER, (uintptr_t)addr, len, MCOLL_LIBC_RELEASES);
  if (atomic_load_explicit(&mcoll__tnbc_known_any, memory_order_relaxed))
    forget((uintptr_t)addr, (uintptr_t)addr + len);
  return (int)syscall(SYS_munmap, addr, len);
}

/* The application's protection holds once the pages' data is in (T-NBC unprotects
 * each page as its data arrives, and never after). */
MCOLL_EXPORT int mprotect(void *addr, size_t len, int prot) {
  if (pending()) wait_buf(CALLER, (uintptr_t)addr, len, MCOLL_LIBC_PROTECTS);
  return mcoll__libc_mprotect(addr, len, prot);
}

/* ---- system calls on the buffer ------------------------------------------------------- */
MCOLL_EXPORT ssize_t read(int fd, void *buf, size_t n) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, WRITES);
  return next_read ? next_read(fd, buf, n) : syscall(SYS_read, fd, buf, n);
}

MCOLL_EXPORT ssize_t write(int fd, const void *buf, size_t n) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, READS);
  return next_write ? next_write(fd, buf, n) : syscall(SYS_write, fd, buf, n);
}

MCOLL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n) {
  if (pending()) wait_iov(CALLER, iov, n, WRITES);
  return next_readv ? next_readv(fd, iov, n) : syscall(SYS_readv, fd, iov, n);
}

MCOLL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n) {
  if (pending()) wait_iov(CALLER, iov, n, READS);
  return next_writev ? next_writev(fd, iov, n) : syscall(SYS_writev, fd, iov, n);
}

MCOLL_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, WRITES);
  return next_recv ? next_recv(fd, buf, n, flags) : syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
}

MCOLL_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, READS);
  return next_send ? next_send(fd, buf, n, flags) : syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
}

MCOLL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
                              socklen_t *fromlen) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, WRITES);
  return next_recvfrom ? next_recvfrom(fd, buf, n, flags, from, fromlen)
                       : syscall(SYS_recvfrom, fd, buf, n, flags, from, fromlen);
}

MCOLL_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
                            socklen_t tolen) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, READS);
  return next_sendto ? next_sendto(fd, buf, n, flags, to, tolen)
                     : syscall(SYS_sendto, fd, buf, n, flags, to, tolen);
}

/* stdio reads and writes large requests straight from the caller's buffer. */
MCOLL_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *f) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, size * n, WRITES);
  return next_fread(buf, size, n, f);
}

MCOLL_EXPORT size_t fwrite(const void *buf, size_t size, size_t n, FILE *f) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, size * n, READS);
  return next_fwrite(buf, size, n, f);
}

MCOLL_EXPORT ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
                                      const struct iovec *remote, unsigned long nremote,
                                      unsigned long flags) {
  if (pending()) wait_iov(CALLER, local, (int)nlocal, WRITES);
  return syscall(SYS_process_vm_readv, pid, local, nlocal, remote, nremote, flags);
}

MCOLL_EXPORT ssize_t process_vm_writev(pid_t pid, const struct iovec *local, unsigned long nlocal,
                                       const struct iovec *remote, unsigned long nremote,
                                       unsigned long flags) {
  if (pending()) wait_iov(CALLER, local, (int)nlocal, READS);
  return syscall(SYS_process_vm_writev, pid, local, nlocal, remote, nremote, flags);
}

/* Positioned I/O (ROMIO and OMPIO write MPI-IO's buffers with these). The 64 forms are
 * the same functions on LP64. */
MCOLL_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, WRITES);
  return NEXT(pread)(fd, buf, n, off);
}

MCOLL_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  if (pending()) wait_buf(CALLER, (uintptr_t)buf, n, READS);
  return NEXT(pwrite)(fd, buf, n, off);
}

MCOLL_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off) {
  if (pending()) wait_iov(CALLER, iov, n, WRITES);
  return NEXT(preadv)(fd, iov, n, off);
}

MCOLL_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off) {
  if (pending()) wait_iov(CALLER, iov, n, READS);
  return NEXT(pwritev)(fd, iov, n, off);
}

/* (Aliases, so that the caller seen is the caller's.) */
MCOLL_EXPORT ssize_t pread64(int, void *, size_t, off_t) __attribute__((alias("pread")));
MCOLL_EXPORT ssize_t pwrite64(int, const void *, size_t, off_t) __attribute__((alias("pwrite")));
MCOLL_EXPORT ssize_t preadv64(int, const struct iovec *, int, off_t) __attribute__((alias("preadv")));
MCOLL_EXPORT ssize_t pwritev64(int, const struct iovec *, int, off_t)
    __attribute__((alias("pwritev")));

MCOLL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  if (pending() && msg) wait_iov(CALLER, msg->msg_iov, (int)msg->msg_iovlen, READS);
  return NEXT(sendmsg)(fd, msg, flags);
}

MCOLL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  if (pending() && msg) wait_iov(CALLER, msg->msg_iov, (int)msg->msg_iovlen, WRITES);
  return NEXT(recvmsg)(fd, msg, flags);
}

/* A path's length is unknown until it is read: on EFAULT, wait for what a path can
 * span and try again. */
static int path_fault(const void *caller, int result, const char *path) {
  if (result >= 0 || errno != EFAULT || !pending()) return 0;
  wait_buf(caller, (uintptr_t)path, PATH_MAX, READS);
  return 1;
}

static mode_t open_mode(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

MCOLL_EXPORT int open(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  int fd = NEXT(open)(path, flags, mode);
  if (path_fault(CALLER, fd, path)) fd = NEXT(open)(path, flags, mode);
  return fd;
}

MCOLL_EXPORT int open64(const char *, int, ...) __attribute__((alias("open")));

MCOLL_EXPORT int openat(int dir, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  int fd = NEXT(openat)(dir, path, flags, mode);
  if (path_fault(CALLER, fd, path)) fd = NEXT(openat)(dir, path, flags, mode);
  return fd;
}

MCOLL_EXPORT int pipe(int fds[2]) {
  int r = NEXT(pipe)(fds);
  if (r < 0 && errno == EFAULT && pending()) {
    wait_buf(CALLER, (uintptr_t)fds, 2 * sizeof *fds, WRITES);
    r = NEXT(pipe)(fds);
  }
  return r;
}

MCOLL_EXPORT int pipe2(int fds[2], int flags) {
  int r = NEXT(pipe2)(fds, flags);
  if (r < 0 && errno == EFAULT && pending()) {
    wait_buf(CALLER, (uintptr_t)fds, 2 * sizeof *fds, WRITES);
    r = NEXT(pipe2)(fds, flags);
  }
  return r;
}

/* ---- SIGSEGV never blocked ---------------------------------------------------------------
 * A synchronous SIGSEGV in a thread that blocks it kills the process; helper threads
 * often block every signal. While MCOLL_TNBC is set SIGSEGV is taken out of every
 * mask a thread or a handler asks for (so T-NBC protects freely instead of checking
 * every thread's mask); blocking it has no other effect on a fault anyway. */
static const sigset_t *without_segv(int how, const sigset_t *set, sigset_t *copy) {
  if (!set || how == SIG_UNBLOCK || !sigismember(set, SIGSEGV) || !tnbc_is_requested())
    return set;
  *copy = *set;
  sigdelset(copy, SIGSEGV);
  return copy;
}

MCOLL_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  sigset_t copy;
  return NEXT(pthread_sigmask)(how, without_segv(how, set, &copy), old);
}

MCOLL_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  sigset_t copy;
  return NEXT(sigprocmask)(how, without_segv(how, set, &copy), old);
}

#endif

/* ---- who calls ----------------------------------------------------------------------
 * The host MPI's own code (its progress engine on whichever thread drives it, its
 * transports, its helper threads) never waits for T-NBC: what it would wait for may
 * need that same progress, which it holds (a progress lock, the only thread on a
 * socket). Only the application's own calls wait. Known by the object the call comes
 * from: the one that defines PMPI_Init, and the MPI stack's libraries and plugins by
 * name. Verdicts are kept per object (base address | 1 if the host's). */
enum { CALLER_OBJECTS = 64 };
static _Atomic uintptr_t caller_objects[CALLER_OBJECTS];

static int host_object(const char *path, const void *base) {
  static const char *const prefixes[] = {
      "libmpi", "libopen-", "libmca", "mca_", "libpmix", "libpmi", "libprrte", "libucp",
      "libucs", "libuct", "libucm", "libfabric", "libpsm", "libibverbs", "librdmacm", "libmlx",
      "libevent", "libhwloc", "libyaksa", "libhcoll", "libxpmem", "libknem", "libmpl"};
  Dl_info mpi;
  void *pmpi_init = dlsym(RTLD_DEFAULT, "PMPI_Init");
  if (pmpi_init && dladdr(pmpi_init, &mpi) && mpi.dli_fbase == base) return 1;
  const char *name = path ? strrchr(path, '/') : NULL;
  name = name ? name + 1 : path ? path : "";
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 1;
  size_t n = strlen(name);
  return n > 6 && !strcmp(name + n - 6, "-fi.so"); /* libfabric's providers */
}

int mcoll__libc_host_caller(const void *caller) {
  Dl_info info;
  if (!caller || !dladdr(caller, &info) || !info.dli_fbase) return 0;
  uintptr_t base = (uintptr_t)info.dli_fbase;
  for (int i = 0; i < CALLER_OBJECTS; i++) {
    uintptr_t known = atomic_load_explicit(&caller_objects[i], memory_order_relaxed);
    if ((known & ~(uintptr_t)1) == base) return (int)(known & 1);
    if (!known) {
      uintptr_t verdict = base | (uintptr_t)host_object(info.dli_fname, info.dli_fbase);
      atomic_compare_exchange_strong(&caller_objects[i], &known, verdict);
      return (int)(verdict & 1);
    }
  }
  return host_object(info.dli_fname, info.dli_fbase);
}

int mcoll__libc_mprotect(void *addr, size_t len, int prot) {
  return (int)syscall(SYS_mprotect, addr, len, prot);
}

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
  struct sigaction unmasked;
  if (act && sigismember(&act->sa_mask, SIGSEGV) && tnbc_is_requested()) {
    unmasked = *act; /* (a handler of its own may read a protected page) */
    sigdelset(&unmasked.sa_mask, SIGSEGV);
    act = &unmasked;
  }
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
