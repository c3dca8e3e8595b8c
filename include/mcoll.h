/* mcoll: multicore-aware collectives for unmodified MPI programs.
 *
 * mcoll takes over MPI's collectives through the profiling interface (PMPI):
 * preload it (mcollrun, LD_PRELOAD) or link -lmcoll ahead of the MPI library.
 * This header is needed to query it, and for the SMPI extension (MPIX_Smpi_*). */
#ifndef MCOLL_H
#define MCOLL_H

#include <mpi.h>
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
/* The name of algorithm `index` (from 0) of a collective inside a node ("COLL.inter":
 * between nodes), or NULL past the last one (or for an unknown collective): what
 * mcoll_set_algorithm accepts. */
MCOLL_EXPORT const char *mcoll_algorithm_name(const char *coll, int index);

/* Sets parameter MCOLL_<name> (a number, as in the environment) while running, for
 * benchmarks and tuning; every rank must set the same before its next call. The
 * segment's geometry (SHM_*) and DISABLE cannot change. Returns 0, or -1 (nothing
 * changes then). */
MCOLL_EXPORT int mcoll_set_param(const char *name, const char *value);

/* Print the hierarchy mcoll uses for MPI_COMM_WORLD; collective over it. */
MCOLL_EXPORT void mcoll_print_hierarchy(FILE *out);

/* SMPI: ownership passing (an MPIX_ extension).
 *
 * A rank passes a message's buffer instead of its bytes. Buffers come from the
 * runtime's allocator (MPIX_Smpi_alloc), not from the program's malloc, and any rank may
 * free a buffer it received with MPIX_Smpi_free. Where the peer is a thread rank of the
 * same process (mcollrun --threads) the buffer's address is handed over through the
 * runtime's matching, without a copy; to any other peer (another process, or every peer
 * when the ranks are processes) the bytes are sent as by MPI_Send and the buffer is
 * freed, so a program runs the same everywhere. The types must be contiguous (predefined
 * types or contiguous runs of them). An SMPI send matches a plain receive and an SMPI
 * receive matches a plain send (it then gets a copy).
 *
 * The functions are declared weak: a program that uses them links against the MPI
 * alone and finds them at run time in libmcoll (mcollrun, or -lmcoll) or in the
 * thread-rank runtime; when neither is loaded their addresses are NULL. */

/* A buffer of size bytes from the runtime's allocator in *(void **)baseptr. */
MCOLL_EXPORT int MPIX_Smpi_alloc(MPI_Aint size, void *baseptr) __attribute__((weak));
/* Frees a buffer of MPIX_Smpi_alloc or MPIX_Smpi_recv (NULL: nothing). */
MCOLL_EXPORT int MPIX_Smpi_free(void *ptr) __attribute__((weak));
/* Sends count x type at ptr and gives up the buffer: the caller must not touch or free
 * ptr afterwards. Completes like MPI_Send. */
MCOLL_EXPORT int MPIX_Smpi_send(void *ptr, int count, MPI_Datatype type, int dest, int tag,
                                MPI_Comm comm) __attribute__((weak));
/* Receives a message of at most count x type and the buffer that holds it in
 * *(void **)ptrp (the caller owns it: MPIX_Smpi_free, or MPIX_Smpi_send it on). The
 * length is in status as for MPI_Recv; a longer message gives MPI_ERR_TRUNCATE and its
 * whole buffer. MPI_PROC_NULL gives NULL. */
MCOLL_EXPORT int MPIX_Smpi_recv(void *ptrp, int count, MPI_Datatype type, int source, int tag,
                                MPI_Comm comm, MPI_Status *status) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
