/* What tnbc.c and interpose.c share. */
#ifndef MCOLL_TNBC_INTERNAL_H
#define MCOLL_TNBC_INTERNAL_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

/* The libc's sigaction (the application's calls reach interpose.c's). */
int mcoll__tnbc_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* SIGSEGV as the application set it (ours runs in front while T-NBC is on). */
extern struct sigaction mcoll__tnbc_app_segv;
extern int mcoll__tnbc_handler_installed;

/* Waits until no pending call has protected pages (fork). */
void mcoll__tnbc_wait_all(void);

/* Ranges found protectable are remembered; freeing or unmapping them forgets. */
extern atomic_int mcoll__tnbc_known_any;
void mcoll__tnbc_forget(uintptr_t lo, uintptr_t hi);

#endif
