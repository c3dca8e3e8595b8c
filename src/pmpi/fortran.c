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

/* Every collective of the table (core/collectives.h) but alltoallw, whose arrays of
 * datatypes are converted below: INTEGER arguments by reference, converted by
 * their kind. */
#define F_DECL_SBUF void *
#define F_DECL_RBUF void *
#define F_DECL_COUNT F *
#define F_DECL_ROOT F *
#define F_DECL_TYPE F *
#define F_DECL_OP F *
#define F_DECL_COMM F *
#define F_DECL_INTS F *
#define F_DECL_ROOT_INTS F *
#define F_ARG_SBUF B
#define F_ARG_RBUF B
#define F_ARG_COUNT *
#define F_ARG_ROOT *
#define F_ARG_TYPE T
#define F_ARG_OP O
#define F_ARG_COMM C
#define F_ARG_INTS I
#define F_ARG_ROOT_INTS I
#define F_PARAM(kind, name) F_DECL_##kind name,
#define F_ARG(kind, name) , F_ARG_##kind(name)
#define FORTRAN_ENTRY_NONE FORTRAN_ENTRY_SCALAR
#define FORTRAN_ENTRY_VECTOR FORTRAN_ENTRY_SCALAR
#define FORTRAN_ENTRY_W(Name, lower, UPPER)
#define FORTRAN_ENTRY_SCALAR(Name, lower, UPPER)                                              \
  static void f_##lower(MCOLL_PARAMS_##UPPER(F_PARAM) F *ierr) {                              \
    SET_IERR(MPI_##Name(MCOLL_ARGLIST(MCOLL_PARAMS_##UPPER, F_ARG)));                         \
  }                                                                                           \
  FORTRAN_COLL(mpi_##lower, MPI_##UPPER, ompi_##lower##_f, f_##lower)
#define FORTRAN_ENTRY(Name, lower, UPPER, shape, tnbc) FORTRAN_ENTRY_##shape(Name, lower, UPPER)
MCOLL_COLLECTIVES(FORTRAN_ENTRY)

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
