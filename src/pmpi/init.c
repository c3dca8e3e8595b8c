/* Start-up and shutdown; communicator contexts are freed by their attribute's
 * delete callback, so MPI_Comm_free needs nothing of its own. */
#include <stdio.h>

#include "core/host_progress.h"
#include "topo/topo.h"
#include "pmpi/wrap.h"

static void report(void) {
  int rank, size;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) return;
  fprintf(stderr, "mcoll: report of rank 0 of %d (%s)\n", size, MCOLL_FLAVOUR);
  mcoll__stats_report(stderr);
  mcoll__context_report(stderr);
  fflush(stderr);
}

/* Collective over MPI_COMM_WORLD, once the host MPI runs. */
static void started(void) {
  mcoll__host_progress_init();
  mcoll__topo_world_init();
}

MCOLL_EXPORT int MPI_Init(int *argc, char ***argv) {
  mcoll__config_load();
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS && !mcoll__cfg.DISABLE) started();
  return rc;
}

MCOLL_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  mcoll__config_load();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS && !mcoll__cfg.DISABLE) started();
  return rc;
}

MCOLL_EXPORT int MPI_Finalize(void) {
  if (mcoll__cfg.VERBOSE && !mcoll__cfg.DISABLE) report();
  mcoll__comm_free_all();
  mcoll__topo_world_free();
  mcoll__types_release();
  mcoll__host_progress_finalize();
  return PMPI_Finalize();
}

MCOLL_EXPORT int MPI_Comm_free(MPI_Comm *comm) { return PMPI_Comm_free(comm); }
