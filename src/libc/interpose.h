/* The libc calls that T-NBC (tnbc/tnbc.h) must see, interposed by the library:
 * free, realloc, munmap, mprotect; read, readv, pread(v), recv, recvfrom, recvmsg,
 * fread; write, writev, pwrite(v), send, sendto, sendmsg, fwrite;
 * process_vm_readv/writev; open, openat, pipe, pipe2 (retried on EFAULT); sigaction
 * and signal for SIGSEGV; pthread_sigmask and sigprocmask, which cannot block SIGSEGV
 * while MCOLL_TNBC is set (a fault on a protected page in a thread that blocks it
 * would kill the process: the kernel forces the default action).
 *
 * Why a layer of its own, at the bottom: every other file of mcoll calls free(), so
 * the interposed calls must depend on nothing above them. They read T-NBC's state,
 * which lives here and which T-NBC writes, and reach T-NBC's waits through the guard
 * it installs when it starts. While no T-NBC call is pending each costs one load. */
#ifndef MCOLL_LIBC_INTERPOSE_H
#define MCOLL_LIBC_INTERPOSE_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* T-NBC calls not yet settled: while nonzero the calls above wait for the bytes they
 * touch. */
extern atomic_int mcoll__tnbc_unsettled;
/* Nonzero once T-NBC remembers ranges it found protectable: free and munmap tell it. */
extern atomic_int mcoll__tnbc_known_any;

/* How an interposed call uses the memory it waits for: a call that only reads it
 * needs no wait for a send buffer's read-only pages (whose sends may need the
 * calling thread's own progress inside the host MPI: the host writes from them);
 * one that writes it waits for those too; one that gives the pages back (free,
 * munmap) takes them out of T-NBC's hands; one that protects them (mprotect) also
 * makes their faults the application's. */
enum mcoll_libc_access {
  MCOLL_LIBC_READS,
  MCOLL_LIBC_WRITES,
  MCOLL_LIBC_RELEASES,
  MCOLL_LIBC_PROTECTS
};

/* What T-NBC does for the interposed calls (installed before either counter above
 * becomes nonzero). */
struct mcoll_libc_guard {
  /* Waits until no pending call has bytes in [lo, lo + len) that `access` cannot
   * use yet; unless caller (the interposed function's return address) lies in the
   * host MPI (mcoll__libc_host_caller). */
  int (*wait_range)(uintptr_t lo, size_t len, enum mcoll_libc_access access, const void *caller);
  /* Forgets the protectable ranges that meet [lo, hi). */
  void (*forget)(uintptr_t lo, uintptr_t hi);
};
void mcoll__libc_guard_install(const struct mcoll_libc_guard *guard);

/* Whether code at caller belongs to the host MPI's stack (the library defining
 * PMPI_Init; libmpi*, libopen-*, mca_*, PMIx, UCX, libfabric, libevent, hwloc, ... by
 * name): such calls never wait for T-NBC, since what they would wait for may need
 * the host progress they are part of. Takes the loader's lock (dladdr) the first time
 * per object: not for a signal handler. */
int mcoll__libc_host_caller(const void *caller);

/* SIGSEGV as the application set it, while T-NBC's handler runs in front of it
 * (handler_installed): the application's sigaction/signal calls read and write this. */
extern struct sigaction mcoll__tnbc_app_segv;
extern int mcoll__tnbc_handler_installed;
/* The libc's own sigaction. */
int mcoll__tnbc_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* The kernel's mprotect, for T-NBC's own protection changes (the interposed one
 * waits for pending pages). */
int mcoll__libc_mprotect(void *addr, size_t len, int prot);

#endif
