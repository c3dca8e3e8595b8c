#include "core/host_progress.h"

#include <mpi.h>
#include <stdatomic.h>

/* A duplicate of MPI_COMM_WORLD on which nothing is ever sent, so a probe on it
 * finds no queue to scan. MPICH's iprobe skips progress on communicators of one
 * rank (a duplicate of MPI_COMM_SELF would not do). */
static MPI_Comm probe_comm = MPI_COMM_NULL;
/* Set from MPI_Finalize on: no PMPI call may follow it. */
static atomic_int host_finalized;

enum { PROBE_TAG = 32767 }; /* within the MPI_TAG_UB every MPI guarantees */

void mcoll__host_progress_init(void) {
  if (probe_comm != MPI_COMM_NULL) return;
  if (PMPI_Comm_dup(MPI_COMM_WORLD, &probe_comm) != MPI_SUCCESS) probe_comm = MPI_COMM_NULL;
  else PMPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN);
}

void mcoll__host_progress_finalize(void) {
  atomic_store(&host_finalized, 1);
  if (probe_comm != MPI_COMM_NULL) PMPI_Comm_free(&probe_comm);
}

static void (*_Atomic background_progress)(void);
static int (*_Atomic background_pending)(void);

void mcoll__set_background(void (*progress)(void), int (*pending)(void)) {
  atomic_store(&background_pending, pending);
  atomic_store(&background_progress, progress);
}

int mcoll__background_pending(void) {
  int (*pending)(void) = atomic_load_explicit(&background_pending, memory_order_acquire);
  return pending && pending();
}

void mcoll__host_progress(void) {
  if (atomic_load_explicit(&host_finalized, memory_order_relaxed)) return;
  void (*progress)(void) = atomic_load_explicit(&background_progress, memory_order_acquire);
  if (progress) progress();
  int flag;
  if (probe_comm != MPI_COMM_NULL) {
    PMPI_Iprobe(MPI_ANY_SOURCE, PROBE_TAG, probe_comm, &flag, MPI_STATUS_IGNORE);
    return;
  }
  /* MPI initialised without our MPI_Init: probe MPI_COMM_WORLD for a message from
   * ourselves (a probe takes nothing away from the application). */
  int me;
  if (PMPI_Comm_rank(MPI_COMM_WORLD, &me) != MPI_SUCCESS) return;
  PMPI_Iprobe(me, PROBE_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}
