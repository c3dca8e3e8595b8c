/* The stand-in MPI library: loaded in each rank's namespace under the host MPI's
 * soname, it passes every call to the runtime in the base namespace. Calls the
 * runtime lacks are stubs (generated from the host library's export list) that stop
 * the job naming the call. */
#include <stdlib.h>

#include "table.h"

#define EXPORT __attribute__((visibility("default")))

/* (hidden: not seen by the program) */
struct thr_rank *self;
const struct thr_api *api;

#if defined(OMPI_MAJOR_VERSION)
#include "standin_openmpi.h"
#endif

EXPORT void mcoll_threads_standin_bind(struct thr_rank *rank, const struct thr_api *table)
{
  self = rank;
  api = table;
#if defined(OMPI_MAJOR_VERSION)
  thr_standin_objects_bind(table->host_objects);
#endif
}

EXPORT void mcoll_threads_standin_missing(const char *name)
{
  api->missing(self, name);
}

/* Each call under its MPI_ and its PMPI_ name (the Fortran bindings call either). */
#if !defined(OMPI_MAJOR_VERSION)
#define STANDIN_RUNTIME(ret, name, params, args) \
  EXPORT ret MPI_##name params { return api->name(self, THR_UNPAREN args); } \
  EXPORT ret PMPI_##name params { return api->name(self, THR_UNPAREN args); }
#define STANDIN_SMPI(ret, name, params, args) \
  EXPORT ret MPIX_##name params { return api->name(self, THR_UNPAREN args); }
#define STANDIN_RUNTIME0(ret, name) \
  EXPORT ret MPI_##name(void) { return api->name(self); } \
  EXPORT ret PMPI_##name(void) { return api->name(self); }
#define STANDIN_HOST(ret, name, params, args) \
  EXPORT ret MPI_##name params { return api->host_##name args; } \
  EXPORT ret PMPI_##name params { return api->host_##name args; }
#endif

THR_RUNTIME_CALLS(STANDIN_RUNTIME)
THR_SMPI_CALLS(STANDIN_SMPI)
THR_RUNTIME_CALLS0(STANDIN_RUNTIME0)
THR_HOST_CALLS(STANDIN_HOST)
THR_NBC_CALLS(STANDIN_RUNTIME)
THR_GROUP_CALLS(STANDIN_RUNTIME)

#if defined(OMPI_MAJOR_VERSION)
/* Open MPI 4.1 names the persistent collectives MPIX_<Coll>_init (its pcollreq extension):
 * the same calls. (The MPIX_I<coll> names this also makes are unused.) */
#define STANDIN_MPIX(ret, name, params, args) \
  EXPORT ret MPIX_##name params { return MPI_##name args; } \
  EXPORT ret PMPIX_##name params { return MPI_##name args; }
THR_NBC_CALLS(STANDIN_MPIX)
#endif

/* exit() of the program or of any library in the namespace ends this rank only;
 * the runtime runs the namespace's atexit handlers and flushes its stdio. */
EXPORT void exit(int status)
{
  api->exit(self, status);
  abort(); /* (not reached) */
}

/* Data objects the host library exports, which programs may refer to (Open MPI's: in
 * the generated objects.c). */
#if !defined(OMPI_MAJOR_VERSION)
EXPORT int *const MPI_UNWEIGHTED = (int *)(void *)&self;
EXPORT int *const MPI_WEIGHTS_EMPTY = (int *)(void *)&api;
EXPORT MPI_Fint *MPI_F_STATUS_IGNORE = 0;
EXPORT MPI_Fint *MPI_F_STATUSES_IGNORE = 0;
#endif
