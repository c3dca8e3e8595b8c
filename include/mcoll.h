/* mcoll: multicore-aware collectives for unmodified MPI programs.
 *
 * mcoll takes over MPI's collectives through the profiling interface (PMPI):
 * preload it (mcollrun, LD_PRELOAD) or link -lmcoll ahead of the MPI library.
 * This header is only needed to query it. */
#ifndef MCOLL_H
#define MCOLL_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MCOLL_EXPORT __attribute__((visibility("default")))

/* "major.minor.patch" of the loaded library. */
MCOLL_EXPORT const char *mcoll_version(void);

/* The MPI flavour the library was built for: "openmpi" or "mpich". */
MCOLL_EXPORT const char *mcoll_flavour(void);

/* Print every parameter (name, value in force, default, meaning). */
MCOLL_EXPORT void mcoll_print_params(FILE *out);

/* Print every collective's algorithms (names for MCOLL_ALG_<COLL>). */
MCOLL_EXPORT void mcoll_print_algorithms(FILE *out);

/* Print the hierarchy mcoll uses for MPI_COMM_WORLD; collective over it. */
MCOLL_EXPORT void mcoll_print_hierarchy(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
