/* MPICH's handles are ints: kind bits 31-30 ("direct" for the runtime's objects,
 * "builtin" for predefined basic types), object kind in bits 29-26. The runtime's
 * communicators and requests take direct handles of the matching object kind, so that
 * programs compare them with MPI's constants. Included by handles.h only. */
#define THR_COMM_HANDLE_BASE 0x84000000u
#define THR_REQUEST_HANDLE_BASE 0xac000000u
#define THR_HANDLE_KIND_MASK 0xfc000000u
#define THR_HANDLE_INDEX_MASK 0x03ffffffu
/* Predefined basic types: builtin datatypes, their size in bits 15-8 (the pair types
 * are not of this kind). */
#define THR_BASIC_TYPE_KIND 0x4c000000u

/* For messages naming a bad handle. */
#define THR_HANDLE_FMT "0x%x"
#define THR_HANDLE_ARG(handle) ((unsigned)(handle))

static inline MPI_Comm thr_comm_handle(int index)
{
  return (MPI_Comm)(THR_COMM_HANDLE_BASE | (unsigned)index);
}

/* The table index of a communicator handle the runtime gave out, -1 if it is none. */
static inline int thr_comm_index(MPI_Comm handle)
{
  unsigned h = (unsigned)handle;
  return (h & THR_HANDLE_KIND_MASK) == THR_COMM_HANDLE_BASE ? (int)(h & THR_HANDLE_INDEX_MASK) : -1;
}

static inline MPI_Request thr_request_handle(int index)
{
  return (MPI_Request)(THR_REQUEST_HANDLE_BASE | (unsigned)index);
}

static inline int thr_request_index(MPI_Request handle)
{
  unsigned h = (unsigned)handle;
  return (h & THR_HANDLE_KIND_MASK) == THR_REQUEST_HANDLE_BASE ? (int)(h & THR_HANDLE_INDEX_MASK)
                                                                : -1;
}

/* The size in bytes of a predefined basic type, 0 for any other type (O(1), no call). */
static inline size_t thr_basic_type_size(MPI_Datatype type)
{
  unsigned h = (unsigned)type;
  return (h & THR_HANDLE_KIND_MASK) == THR_BASIC_TYPE_KIND ? (h >> 8) & 0xffu : 0;
}

/* (Open MPI's runtime keeps tables of the host library's objects.) */
#define THR_HOST_OBJECTS NULL
#define THR_HOST_SYMBOL NULL
static inline void thr_handles_init(void) {}

/* Groups (groups.c): direct handles of MPICH's group kind. */
#define THR_GROUP_HANDLE_BASE 0x88000000u

static inline MPI_Group thr_group_handle(int index)
{
  return (MPI_Group)(THR_GROUP_HANDLE_BASE | (unsigned)index);
}

static inline int thr_group_index(MPI_Group handle)
{
  unsigned h = (unsigned)handle;
  return (h & THR_HANDLE_KIND_MASK) == THR_GROUP_HANDLE_BASE ? (int)(h & THR_HANDLE_INDEX_MASK) : -1;
}
