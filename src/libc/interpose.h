/* The libc calls that T-NBC (tnbc/tnbc.h) must see, interposed by the library:
 * free, realloc, munmap; read, readv, recv, recvfrom, fread; write, writev, send,
 * sendto, fwrite; process_vm_readv/writev; sigaction and signal for SIGSEGV.
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

/* What T-NBC does for the interposed calls (installed before either counter above
 * becomes nonzero). */
struct mcoll_libc_guard {
  /* Waits until no pending call has protected bytes in [lo, lo + len). */
  int (*wait_range)(uintptr_t lo, size_t len);
  /* Forgets the protectable ranges that meet [lo, hi). */
  void (*forget)(uintptr_t lo, uintptr_t hi);
};
void mcoll__libc_guard_install(const struct mcoll_libc_guard *guard);

/* SIGSEGV as the application set it, while T-NBC's handler runs in front of it
 * (handler_installed): the application's sigaction/signal calls read and write this. */
extern struct sigaction mcoll__tnbc_app_segv;
extern int mcoll__tnbc_handler_installed;
/* The libc's own sigaction. */
int mcoll__tnbc_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

#endif
