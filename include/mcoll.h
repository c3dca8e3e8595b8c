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

/* Prints the rules in force: where they come from (built-in or MCOLL_RULES's file)
 * and their entries. */
MCOLL_EXPORT void mcoll_print_rules(FILE *out);

/* Run collective `coll` ("alltoall", ...) with algorithm `alg` from now on, as
 * MCOLL_ALG_<COLL> would; NULL, "" or "auto" restores the automatic choice. Every rank of
 * a communicator must make the same choice before its next call. Returns 0, or -1
 * for an unknown collective or algorithm (nothing changes then). */
MCOLL_EXPORT int mcoll_set_algorithm(const char *coll, const char *alg);
/* The name of algorithm `index` (from 0) of a collective inside a node, or NULL past
 * the last one (or for an unknown collective): what mcoll_set_algorithm accepts. */
MCOLL_EXPORT const char *mcoll_algorithm_name(const char *coll, int index);

/* Sets parameter MCOLL_<name> (a number, as in the environment) while running, for
 * benchmarks and tuning; every rank must set the same before its next call. The
 * segment's geometry (SHM_*) and DISABLE cannot change. Returns 0, or -1 (nothing
 * changes then). */
MCOLL_EXPORT int mcoll_set_param(const char *name, const char *value);

/* Print the hierarchy mcoll uses for MPI_COMM_WORLD; collective over it. */
MCOLL_EXPORT void mcoll_print_hierarchy(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
