/* The function table the stand-in libraries call through (table.h): the runtime's
 * point-to-point and communicator calls (runtime.c, groups.c), the collectives
 * (coll.c, coll_nbc.c) and MPI_Finalize, which needs both. The one file that names
 * every layer, so that none of them names the ones above it. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include "handles.h"
#include "runtime.h"

int thr_Finalize(struct thr_rank *r)
{
  thr_smpi_reap(r, 1);
  struct thr_waiter w = {0};
  while (r->nbc_pending) { /* (others may still need this rank's part of them) */
    thr_nbc_progress(r);
    thr_wait_pause(&w);
  }
  thr_wait_end(&w);
  thr_Barrier(r, MPI_COMM_WORLD);
  thr_orphans_reap(r, 1); /* (their receives are complete: only the envelopes remain) */
  thr_node_send_progress(&r->node_out, 1);
  r->finalized = 1;
  const char *stats = getenv("MCOLL_THREADS_STATS");
  if (stats && atoi(stats) && r->thread == 0) {
    long messages, chunks, ring_taken = 0;
    thr_split_counts(&messages, &chunks);
    for (int t = 0; t < thr_proc.threads; t++) /* (the others may still be counting) */
      ring_taken += thr_proc.ranks[t].node_ring_taken;
    fprintf(stderr, "mcoll threads: process %d: %ld messages split, %ld chunks copied by senders, "
            "%ld read from other processes, %ld through the node's rings, %ld sleeps\n",
            thr_proc.process, messages, chunks, thr_node_copy_count(), ring_taken,
            thr_wait_sleep_count());
  }
  return MPI_SUCCESS;
}

static void call_missing(struct thr_rank *r, const char *name)
{
  thr_fatal("rank %d called %s, which thread ranks do not implement yet", r->world, name);
}

/* exit() in a rank: its namespace's atexit handlers and stdio, then back to the loader. */
static void rank_exit(struct thr_rank *r, int status)
{
  r->exit_status = status;
  r->cxa_finalize(NULL);
  r->fflush(NULL);
  longjmp(r->exit_jump, 1);
}

#define THR_ENTRY(ret, name, params, args) .name = thr_##name,
#define THR_ENTRY0(ret, name) .name = thr_##name,
#define HOST_ENTRY(ret, name, params, args) .host_##name = PMPI_##name,

const struct thr_api thr_runtime_api = {
  THR_RUNTIME_CALLS(THR_ENTRY)
  THR_SMPI_CALLS(THR_ENTRY)
  THR_RUNTIME_CALLS0(THR_ENTRY0)
  THR_HOST_CALLS(HOST_ENTRY)
  THR_NBC_CALLS(THR_ENTRY)
  THR_GROUP_CALLS(THR_ENTRY)
  .missing = call_missing,
  .exit = rank_exit,
  .host_objects = THR_HOST_OBJECTS,
  .host_symbol = THR_HOST_SYMBOL,
};
