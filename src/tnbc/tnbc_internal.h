/* What the files of tnbc/ share. */
#ifndef MCOLL_TNBC_INTERNAL_H
#define MCOLL_TNBC_INTERNAL_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "libc/interpose.h" /* the SIGSEGV handler's state, the known ranges' flag */

/* Waits until no pending call has protected pages (fork). */
void mcoll__tnbc_wait_all(void);

/* Ranges found protectable are remembered; freeing or unmapping them forgets. */
void mcoll__tnbc_forget(uintptr_t lo, uintptr_t hi);

/* ---- trace and order files (trace.c) ---- */
/* MCOLL_TNBC_TRACE, MCOLL_TNBC_ORDER given (from mcoll__tnbc_start). */
extern int mcoll__tnbc_tracing, mcoll__tnbc_ordering;
void mcoll__tnbc_trace_start(int world_rank);
/* Writes the trace file (once; also at exit). */
void mcoll__tnbc_trace_stop(void);

/* A call site: what a trace records and an order file is matched on. */
struct mcoll_tnbc_site {
  char key[160];  /* "<object file>+0x<offset>" of the return address */
  char coll[16];  /* "alltoall", ... */
  int size, rank; /* of the communicator */
  size_t count;   /* receive bytes */
  int nblocks;    /* received blocks (indices 0..nblocks-1) */
};
void mcoll__tnbc_site_key(const void *ret, char *key, size_t n);
/* One traced call at site: block indices in first-touch and in completion order. */
void mcoll__tnbc_trace_add(const struct mcoll_tnbc_site *site, const int *touched, int ntouched,
                           const int *done, int ndone);
/* The order file's order for site as all n indices (touched first): 1, or 0 if none. */
int mcoll__tnbc_order_find(const struct mcoll_tnbc_site *site, int *order, int n);

#endif
