/* Open MPI's handles are pointers (addresses of library objects). The runtime's
 * communicators and requests take values no object can have (non-canonical addresses,
 * kind in bits 63-56), so that programs compare them with MPI's constants and a
 * dereference faults at once. Included by handles.h only. */
#include <stdint.h>

#define THR_COMM_HANDLE_BASE ((uintptr_t)0xc1 << 56)
#define THR_REQUEST_HANDLE_BASE ((uintptr_t)0xc2 << 56)
#define THR_GROUP_HANDLE_BASE ((uintptr_t)0xc3 << 56)
#define THR_HANDLE_KIND_MASK ((uintptr_t)0xff << 56)
#define THR_HANDLE_INDEX_MASK ((uintptr_t)0x7fffffff)

/* For messages naming a bad handle. */
#define THR_HANDLE_FMT "%p"
#define THR_HANDLE_ARG(handle) ((void *)(handle))

static inline MPI_Comm thr_comm_handle(int index)
{
  return (MPI_Comm)(THR_COMM_HANDLE_BASE | (uintptr_t)index);
}

/* The table index of a communicator handle the runtime gave out, -1 if it is none. */
static inline int thr_comm_index(MPI_Comm handle)
{
  uintptr_t h = (uintptr_t)handle;
  return (h & THR_HANDLE_KIND_MASK) == THR_COMM_HANDLE_BASE ? (int)(h & THR_HANDLE_INDEX_MASK) : -1;
}

static inline MPI_Request thr_request_handle(int index)
{
  return (MPI_Request)(THR_REQUEST_HANDLE_BASE | (uintptr_t)index);
}

static inline int thr_request_index(MPI_Request handle)
{
  uintptr_t h = (uintptr_t)handle;
  return (h & THR_HANDLE_KIND_MASK) == THR_REQUEST_HANDLE_BASE ? (int)(h & THR_HANDLE_INDEX_MASK)
                                                                : -1;
}

/* Groups (groups.c). */
static inline MPI_Group thr_group_handle(int index)
{
  return (MPI_Group)(THR_GROUP_HANDLE_BASE | (uintptr_t)index);
}

static inline int thr_group_index(MPI_Group handle)
{
  uintptr_t h = (uintptr_t)handle;
  return (h & THR_HANDLE_KIND_MASK) == THR_GROUP_HANDLE_BASE ? (int)(h & THR_HANDLE_INDEX_MASK) : -1;
}

/* (handles_openmpi.c) */
extern const void *thr_openmpi_host_objects[];
void thr_openmpi_handles_init(void);
size_t thr_openmpi_basic_type_size(MPI_Datatype type);
void *thr_openmpi_host_symbol(const char *name);

#define THR_HOST_OBJECTS thr_openmpi_host_objects
#define THR_HOST_SYMBOL thr_openmpi_host_symbol
static inline void thr_handles_init(void)
{
  thr_openmpi_handles_init();
}

/* The size in bytes of a predefined type laid out without holes, 0 for any other type. */
static inline size_t thr_basic_type_size(MPI_Datatype type)
{
  return thr_openmpi_basic_type_size(type);
}
