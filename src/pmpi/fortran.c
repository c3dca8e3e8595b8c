/* Fortran entry points.
 *
 * Open MPI's Fortran bindings call PMPI_* directly (mpif.h and `use mpi` through
 * mpi_bcast_ and its other manglings; `use mpi_f08` through ompi_bcast_f), so a C
 * interposer never sees them: here mcoll defines those symbols itself, converts the
 * handles (MPI_*_f2c) and Fortran's MPI_IN_PLACE / MPI_BOTTOM, and calls its own
 * MPI_* collectives. MPICH's bindings call MPI_* (taken over already), except
 * mpi_f08's barrier, which has no buffer and calls PMPI_Barrier.
 *
 * On both MPIs some Fortran MPI_Init/MPI_Finalize reach PMPI_Init/PMPI_Finalize
 * (Open MPI: every binding; MPICH: mpi_f08): their entry points here run the host's
 * own (the next definition, dlsym(RTLD_NEXT)) with mcoll's start-up after it and
 * its shutdown before it. */
#include <dlfcn.h>
#include <stdlib.h>

#include "pmpi/wrap.h"

_Static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER arrays are passed as int arrays");

/* ---- MPI_Init / MPI_Finalize, every binding, both MPIs ---- */

typedef void (*fortran_fn1)(void *);
typedef void (*fortran_fn3)(void *, void *, void *);

static void *next_definition(const char *name) {
  void *fn = dlsym(RTLD_NEXT, name);
  if (!fn) {
    /* Nothing below defines it: the program cannot have called it through this MPI. */
    fprintf(stderr, "mcoll: no host MPI definition of %s\n", name);
    abort();
  }
  return fn;
}

#define FORTRAN_INIT(sym)                                                        \
  MCOLL_EXPORT void sym(void *ierr) {                                            \
    mcoll__before_init();                                                        \
    ((fortran_fn1)next_definition(#sym))(ierr);                                  \
    mcoll__started();                                                            \
  }
#define FORTRAN_INIT_THREAD(sym)                                                 \
  MCOLL_EXPORT void sym(void *required, void *provided, void *ierr) {            \
    mcoll__before_init();                                                        \
    ((fortran_fn3)next_definition(#sym))(required, provided, ierr);              \
    mcoll__started();                                                            \
  }
#define FORTRAN_FINALIZE(sym)                                                    \
  MCOLL_EXPORT void sym(void *ierr) {                                            \
    mcoll__finishing();                                                          \
    ((fortran_fn1)next_definition(#sym))(ierr);                                  \
  }

/* mpi_f08 (both MPIs) */
FORTRAN_INIT(mpi_init_f08_)
FORTRAN_INIT_THREAD(mpi_init_thread_f08_)
FORTRAN_FINALIZE(mpi_finalize_f08_)

typedef MPI_Fint F;
#define SET_IERR(rc) \
  if (ierr) *ierr = (MPI_Fint)(rc)

#ifdef MPICH_VERSION
/* type(MPI_Comm) is one INTEGER, passed by reference; ierror is optional (NULL). */
MCOLL_EXPORT void mpi_barrier_f08_(F *comm, F *ierr) { SET_IERR(MPI_Barrier(MPI_Comm_f2c(*comm))); }
#endif

#ifdef OPEN_MPI
/* mpif.h and `use mpi`, in every mangling Open MPI defines; mpi_f08 goes through
 * ompi_*_f as well. */
#define FORTRAN_MANGLINGS(X, lower, upper, ompi) X(lower) X(lower##_) X(lower##__) X(upper) X(ompi)
FORTRAN_MANGLINGS(FORTRAN_INIT, mpi_init, MPI_INIT, ompi_init_f)
FORTRAN_MANGLINGS(FORTRAN_INIT_THREAD, mpi_init_thread, MPI_INIT_THREAD, ompi_init_thread_f)
FORTRAN_MANGLINGS(FORTRAN_FINALIZE, mpi_finalize, MPI_FINALIZE, ompi_finalize_f)

/* ---- the collectives, Open MPI only ---- */

/* Fortran's MPI_IN_PLACE and MPI_BOTTOM are the addresses of these (libmpi). */
extern char mpi_fortran_in_place_, mpi_fortran_bottom_;

static void *buf_f2c(void *buf) {
  if (buf == &mpi_fortran_in_place_) return MPI_IN_PLACE;
  if (buf == &mpi_fortran_bottom_) return MPI_BOTTOM;
  return buf;
}

#define T(f) MPI_Type_f2c(*(f))
#define C(f) MPI_Comm_f2c(*(f))
#define O(f) MPI_Op_f2c(*(f))
#define B(p) buf_f2c(p)
#define I(p) ((const int *)(p))

/* Defines impl and every name the bindings call it by (aliases of one function). */
#define FORTRAN_ALIAS(sym, impl) MCOLL_EXPORT __typeof__(impl) sym __attribute__((alias(#impl)));
#define FORTRAN_COLL(lower, upper, ompi, impl)                            \
  FORTRAN_ALIAS(lower, impl) FORTRAN_ALIAS(lower##_, impl) FORTRAN_ALIAS(lower##__, impl) \
  FORTRAN_ALIAS(upper, impl) FORTRAN_ALIAS(ompi, impl)

static void f_barrier(F *comm, F *ierr) { SET_IERR(MPI_Barrier(C(comm))); }
FORTRAN_COLL(mpi_barrier, MPI_BARRIER, ompi_barrier_f, f_barrier)

static void f_bcast(void *buf, F *count, F *type, F *root, F *comm, F *ierr) {
  SET_IERR(MPI_Bcast(B(buf), *count, T(type), *root, C(comm)));
}
FORTRAN_COLL(mpi_bcast, MPI_BCAST, ompi_bcast_f, f_bcast)

static void f_reduce(void *sbuf, void *rbuf, F *count, F *type, F *op, F *root, F *comm, F *ierr) {
  SET_IERR(MPI_Reduce(B(sbuf), B(rbuf), *count, T(type), O(op), *root, C(comm)));
}
FORTRAN_COLL(mpi_reduce, MPI_REDUCE, ompi_reduce_f, f_reduce)

static void f_allreduce(void *sbuf, void *rbuf, F *count, F *type, F *op, F *comm, F *ierr) {
  SET_IERR(MPI_Allreduce(B(sbuf), B(rbuf), *count, T(type), O(op), C(comm)));
}
FORTRAN_COLL(mpi_allreduce, MPI_ALLREDUCE, ompi_allreduce_f, f_allreduce)

static void f_scan(void *sbuf, void *rbuf, F *count, F *type, F *op, F *comm, F *ierr) {
  SET_IERR(MPI_Scan(B(sbuf), B(rbuf), *count, T(type), O(op), C(comm)));
}
FORTRAN_COLL(mpi_scan, MPI_SCAN, ompi_scan_f, f_scan)

static void f_exscan(void *sbuf, void *rbuf, F *count, F *type, F *op, F *comm, F *ierr) {
  SET_IERR(MPI_Exscan(B(sbuf), B(rbuf), *count, T(type), O(op), C(comm)));
}
FORTRAN_COLL(mpi_exscan, MPI_EXSCAN, ompi_exscan_f, f_exscan)

static void f_reduce_scatter(void *sbuf, void *rbuf, F *counts, F *type, F *op, F *comm, F *ierr) {
  SET_IERR(MPI_Reduce_scatter(B(sbuf), B(rbuf), I(counts), T(type), O(op), C(comm)));
}
FORTRAN_COLL(mpi_reduce_scatter, MPI_REDUCE_SCATTER, ompi_reduce_scatter_f, f_reduce_scatter)

static void f_reduce_scatter_block(void *sbuf, void *rbuf, F *count, F *type, F *op, F *comm,
                                   F *ierr) {
  SET_IERR(MPI_Reduce_scatter_block(B(sbuf), B(rbuf), *count, T(type), O(op), C(comm)));
}
FORTRAN_COLL(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK, ompi_reduce_scatter_block_f,
             f_reduce_scatter_block)

static void f_allgather(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm,
                        F *ierr) {
  SET_IERR(MPI_Allgather(B(sbuf), *scount, T(stype), B(rbuf), *rcount, T(rtype), C(comm)));
}
FORTRAN_COLL(mpi_allgather, MPI_ALLGATHER, ompi_allgather_f, f_allgather)

static void f_allgatherv(void *sbuf, F *scount, F *stype, void *rbuf, F *rcounts, F *displs,
                         F *rtype, F *comm, F *ierr) {
  SET_IERR(MPI_Allgatherv(B(sbuf), *scount, T(stype), B(rbuf), I(rcounts), I(displs), T(rtype),
                          C(comm)));
}
FORTRAN_COLL(mpi_allgatherv, MPI_ALLGATHERV, ompi_allgatherv_f, f_allgatherv)

static void f_gather(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root,
                     F *comm, F *ierr) {
  SET_IERR(MPI_Gather(B(sbuf), *scount, T(stype), B(rbuf), *rcount, T(rtype), *root, C(comm)));
}
FORTRAN_COLL(mpi_gather, MPI_GATHER, ompi_gather_f, f_gather)

static void f_gatherv(void *sbuf, F *scount, F *stype, void *rbuf, F *rcounts, F *displs, F *rtype,
                      F *root, F *comm, F *ierr) {
  SET_IERR(MPI_Gatherv(B(sbuf), *scount, T(stype), B(rbuf), I(rcounts), I(displs), T(rtype), *root,
                       C(comm)));
}
FORTRAN_COLL(mpi_gatherv, MPI_GATHERV, ompi_gatherv_f, f_gatherv)

static void f_scatter(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root,
                      F *comm, F *ierr) {
  SET_IERR(MPI_Scatter(B(sbuf), *scount, T(stype), B(rbuf), *rcount, T(rtype), *root, C(comm)));
}
FORTRAN_COLL(mpi_scatter, MPI_SCATTER, ompi_scatter_f, f_scatter)

static void f_scatterv(void *sbuf, F *scounts, F *displs, F *stype, void *rbuf, F *rcount, F *rtype,
                       F *root, F *comm, F *ierr) {
  SET_IERR(MPI_Scatterv(B(sbuf), I(scounts), I(displs), T(stype), B(rbuf), *rcount, T(rtype), *root,
                        C(comm)));
}
FORTRAN_COLL(mpi_scatterv, MPI_SCATTERV, ompi_scatterv_f, f_scatterv)

static void f_alltoall(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm,
                       F *ierr) {
  SET_IERR(MPI_Alltoall(B(sbuf), *scount, T(stype), B(rbuf), *rcount, T(rtype), C(comm)));
}
FORTRAN_COLL(mpi_alltoall, MPI_ALLTOALL, ompi_alltoall_f, f_alltoall)

static void f_alltoallv(void *sbuf, F *scounts, F *sdispls, F *stype, void *rbuf, F *rcounts,
                        F *rdispls, F *rtype, F *comm, F *ierr) {
  SET_IERR(MPI_Alltoallv(B(sbuf), I(scounts), I(sdispls), T(stype), B(rbuf), I(rcounts),
                         I(rdispls), T(rtype), C(comm)));
}
FORTRAN_COLL(mpi_alltoallv, MPI_ALLTOALLV, ompi_alltoallv_f, f_alltoallv)

static void f_alltoallw(void *sbuf, F *scounts, F *sdispls, F *stypes, void *rbuf, F *rcounts,
                        F *rdispls, F *rtypes, F *comm, F *ierr) {
  MPI_Comm c = C(comm);
  int n = 0, inter = 0, rc = MPI_ERR_NO_MEM;
  if (PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS) inter = 0;
  if ((inter ? PMPI_Comm_remote_size(c, &n) : PMPI_Comm_size(c, &n)) != MPI_SUCCESS) n = 0;
  void *send = B(sbuf);
  MPI_Datatype *types = malloc(sizeof *types * (size_t)(2 * n + 1));
  if (types) {
    for (int i = 0; i < n; i++) {
      types[i] = send == MPI_IN_PLACE ? MPI_DATATYPE_NULL : MPI_Type_f2c(stypes[i]);
      types[n + i] = MPI_Type_f2c(rtypes[i]);
    }
    rc = MPI_Alltoallw(send, I(scounts), I(sdispls), types, B(rbuf), I(rcounts), I(rdispls),
                       types + n, c);
    free(types);
  }
  SET_IERR(rc);
}
FORTRAN_COLL(mpi_alltoallw, MPI_ALLTOALLW, ompi_alltoallw_f, f_alltoallw)
#endif
