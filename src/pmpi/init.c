/* Start-up and shutdown; communicator contexts are freed by their attribute's
 * delete callback, so MPI_Comm_free needs nothing of its own. */
#include <stdatomic.h>
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

/* Collective over MPI_COMM_WORLD, once the host MPI runs; once (the Fortran entry
 * points of fortran.c may reach MPI_Init too). */
static atomic_int started_once, finished_once;
void mcoll__started(void) {
  if (mcoll__cfg.DISABLE || atomic_exchange(&started_once, 1)) return;
  mcoll__host_progress_init();
  mcoll__topo_world_init();
}

void mcoll__finishing(void) {
  if (mcoll__cfg.DISABLE || atomic_exchange(&finished_once, 1)) return;
  if (mcoll__cfg.VERBOSE) report();
  mcoll__comm_free_all();
  mcoll__topo_world_free();
  mcoll__types_release();
  mcoll__host_progress_finalize();
}

MCOLL_EXPORT int MPI_Init(int *argc, char ***argv) {
  mcoll__config_load();
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) mcoll__started();
  return rc;
}

MCOLL_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  mcoll__config_load();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) mcoll__started();
  return rc;
}

MCOLL_EXPORT int MPI_Finalize(void) {
  mcoll__finishing();
  return PMPI_Finalize();
}

MCOLL_EXPORT int MPI_Comm_free(MPI_Comm *comm) { return PMPI_Comm_free(comm); }
