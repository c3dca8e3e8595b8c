/* Open MPI's stand-in, for its Fortran library (libmpi_mpifh.so.40, which the `use mpi`
 * and `use mpi_f08` modules call too). Its wrappers turn each Fortran handle (an index
 * into a table of libmpi) into a C handle with MPI_<Kind>_f2c and back with _c2f, then
 * make the C call; they also need a few internals of libmpi. Here: the conversions for
 * the runtime's communicators and requests (own numbering), the host's for datatypes,
 * operations, infos and error handlers (its objects, then translated), Fortran strings,
 * and the internals as calls that stop the job naming what is missing. */
#include <stdlib.h>
#include <string.h>

#include "table.h"
#include "standin_openmpi.h"
#include "handles.h"

#define EXPORT __attribute__((visibility("default")))
#define BOTH(ret, name, params, ...) \
  EXPORT ret MPI_##name params __VA_ARGS__ EXPORT ret PMPI_##name params __VA_ARGS__

/* A function of the host library (base namespace). */
static void *host_function(const char *name)
{
  void *f = api->host_symbol(name);
  if (!f)
    api->missing(self, name);
  return f;
}

/* Fortran communicators: MPI_COMM_WORLD 0, MPI_COMM_SELF 1, MPI_COMM_NULL 2 (mpif.h),
 * then the runtime's table index + 1 (its indices 0 and 1 are world and self).
 *
 * The Fortran MPI_ALLTOALLW wrappers (and MPI_IALLTOALLW, MPIX_ALLTOALLW_INIT) read the C
 * communicator's fields themselves, to size their arrays of types: Open MPI 4.1's
 * c_flags at byte 0xe8 (bit 0: intercommunicator) and c_local_group at 0xf8, a group
 * whose grp_proc_count is the int at 0x10. So the C handle of a Fortran communicator is
 * a shell with these fields: MPI_COMM_WORLD and MPI_COMM_SELF themselves (the rank's
 * zeroed objects, given a group), else one of this rank's shells, which carries the
 * runtime's handle and which the translation to the host turns back into it. */
enum { SHELL_BYTES = 256, SHELLS = 4096, SHELL_FLAGS = 0xe8, SHELL_GROUP = 0xf8,
       GROUP_SIZE = 0x10, SHELL_HANDLE = 0x20 };

static unsigned char *shells;             /* SHELLS x SHELL_BYTES, by Fortran handle */
static unsigned char world_group[SHELL_BYTES], self_group[SHELL_BYTES];

/* Gives object the fields the wrappers read: an intracommunicator of size ranks. */
static void shell_fill(unsigned char *object, unsigned char *group, int size)
{
  void *group_pointer = group;
  object[SHELL_FLAGS] = 0;
  memcpy(object + SHELL_GROUP, &group_pointer, sizeof group_pointer);
  memcpy(group + GROUP_SIZE, &size, sizeof size);
}

BOTH(MPI_Fint, Comm_c2f, (MPI_Comm comm), {
  if (comm == MPI_COMM_WORLD)
    return 0;
  if (comm == MPI_COMM_SELF)
    return 1;
  int index = thr_comm_index(thr_standin_comm_shell_handle(comm));
  return index >= 2 ? index + 1 : 2;
})

BOTH(MPI_Comm, Comm_f2c, (MPI_Fint comm), {
  if (comm < 0 || comm == 2)
    return MPI_COMM_NULL;
  MPI_Comm handle = comm == 0 ? MPI_COMM_WORLD : comm == 1 ? MPI_COMM_SELF : thr_comm_handle(comm - 1);
  int size;
  api->Comm_size(self, thr_standin_to_host(handle), &size);
  if (comm < 2) {
    shell_fill((unsigned char *)handle, comm == 0 ? world_group : self_group, size);
    return handle;
  }
  if (comm >= SHELLS)
    api->missing(self, "MPI_Comm_f2c of more than 4096 communicators");
  if (!shells) {
    shells = calloc(SHELLS, SHELL_BYTES);
    thr_standin_shells = (struct thr_comm_shells){shells, shells ? SHELLS : 0, SHELL_BYTES,
                                                  SHELL_HANDLE};
  }
  unsigned char *shell = shells + (size_t)comm * SHELL_BYTES;
  shell_fill(shell, shell, size);
  memcpy(shell + SHELL_HANDLE, &handle, sizeof handle);
  return (MPI_Comm)(void *)shell;
})

/* Fortran requests: MPI_REQUEST_NULL 0, then the runtime's table index + 1. */
BOTH(MPI_Fint, Request_c2f, (MPI_Request request), {
  int index = thr_request_index(request);
  return index >= 0 ? index + 1 : 0;
})

BOTH(MPI_Request, Request_f2c, (MPI_Fint request), {
  return request > 0 ? thr_request_handle(request - 1) : MPI_REQUEST_NULL;
})

/* Datatypes, operations, infos and error handlers are the host's objects. */
#define HOST_F2C(Kind, Type)                                                                   \
  BOTH(Type, Kind##_f2c, (MPI_Fint handle), {                                                  \
    static Type (*f2c)(MPI_Fint);                                                              \
    if (!f2c)                                                                                  \
      f2c = (Type(*)(MPI_Fint))host_function("PMPI_" #Kind "_f2c");                            \
    return thr_standin_to_rank(f2c(handle));                                                   \
  })                                                                                           \
  BOTH(MPI_Fint, Kind##_c2f, (Type handle), {                                                  \
    static MPI_Fint (*c2f)(Type);                                                              \
    if (!c2f)                                                                                  \
      c2f = (MPI_Fint(*)(Type))host_function("PMPI_" #Kind "_c2f");                            \
    return c2f(thr_standin_to_host(handle));                                                   \
  })

HOST_F2C(Type, MPI_Datatype)
HOST_F2C(Op, MPI_Op)
HOST_F2C(Info, MPI_Info)
HOST_F2C(Errhandler, MPI_Errhandler)

/* A status holds no handle: the host converts it. */
BOTH(int, Status_c2f, (const MPI_Status *c_status, MPI_Fint *f_status), {
  static int (*c2f)(const MPI_Status *, MPI_Fint *);
  if (!c2f)
    c2f = (int (*)(const MPI_Status *, MPI_Fint *))host_function("PMPI_Status_c2f");
  return c2f(c_status, f_status);
})

BOTH(int, Status_f2c, (const MPI_Fint *f_status, MPI_Status *c_status), {
  static int (*f2c)(const MPI_Fint *, MPI_Status *);
  if (!f2c)
    f2c = (int (*)(const MPI_Fint *, MPI_Status *))host_function("PMPI_Status_f2c");
  return f2c(f_status, c_status);
})

/* Fortran strings: blank-padded, no terminator. */
EXPORT int ompi_fortran_string_f2c(const char *fstr, int len, char **cstr)
{
  while (len > 0 && fstr[len - 1] == ' ')
    len--;
  *cstr = malloc((size_t)len + 1);
  if (!*cstr)
    return MPI_ERR_NO_MEM;
  memcpy(*cstr, fstr, (size_t)len);
  (*cstr)[len] = 0;
  return MPI_SUCCESS;
}

EXPORT int ompi_fortran_string_c2f(const char *cstr, char *fstr, int len)
{
  int n = (int)strlen(cstr);
  if (n > len)
    n = len;
  memcpy(fstr, cstr, (size_t)n);
  memset(fstr + n, ' ', (size_t)(len - n));
  return MPI_SUCCESS;
}

/* Internals of libmpi the Fortran library links: what needs them is not implemented. */
#define MISSING(name, what) \
  EXPORT int name(void) { api->missing(self, #name " (" what ")"); return MPI_ERR_INTERN; }
MISSING(ompi_attr_create_keyval_aint, "Fortran attributes")
MISSING(ompi_attr_create_keyval_fint, "Fortran attributes")
MISSING(ompi_attr_get_aint, "Fortran attributes")
MISSING(ompi_attr_get_fint, "Fortran attributes")
MISSING(ompi_attr_set_aint, "Fortran attributes")
MISSING(ompi_attr_set_fint, "Fortran attributes")
MISSING(ompi_datatype_match_size, "MPI_TYPE_MATCH_SIZE")
MISSING(ompi_errhandler_create, "Fortran error handlers")
MISSING(ompi_errhandler_invoke, "an error in a Fortran call")
MISSING(ompi_fortran_argv_blank_f2c, "MPI_COMM_SPAWN")
MISSING(ompi_fortran_argv_count_f2c, "MPI_COMM_SPAWN")
MISSING(ompi_fortran_multiple_argvs_f2c, "MPI_COMM_SPAWN_MULTIPLE")
MISSING(ompi_mpi_errors_are_fatal_comm_handler, "Fortran error handlers")
MISSING(mpi_conversion_fn_null_, "MPI_REGISTER_DATAREP")
