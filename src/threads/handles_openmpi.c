/* Open MPI's runtime side of the handles: the host library's data objects by index
 * (the stand-ins translate the ranks' predefined handles to these), and the sizes of
 * the predefined types without holes, found without a call. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#include "addr_map.h"
#include "runtime.h"
#include "handles.h"

enum { MAX_OBJECTS = 256 };

/* (generated from openmpi_objects.txt) */
extern const char *const thr_openmpi_object_names[];
extern const int thr_openmpi_nobjects;

const void *thr_openmpi_host_objects[MAX_OBJECTS];

/* The host library, by an explicit handle: dlsym(RTLD_DEFAULT) searches the namespace of
 * its caller, which for a call made on a stand-in's behalf (a tail call) is the rank's. */
static void *host_library;

/* The predefined types without holes, by address, and their sizes. */
static struct addr_map basics;

void thr_openmpi_handles_init(void)
{
  if (thr_openmpi_nobjects > MAX_OBJECTS)
    thr_fatal("%d library objects, room for %d", thr_openmpi_nobjects, MAX_OBJECTS);
  host_library = dlmopen(LM_ID_BASE, "libmpi.so.40", RTLD_LAZY | RTLD_NOLOAD);
  if (!host_library)
    thr_fatal("the host MPI library libmpi.so.40 is not loaded: %s", dlerror());
  for (int i = 0; i < thr_openmpi_nobjects; i++) {
    thr_openmpi_host_objects[i] = dlsym(host_library, thr_openmpi_object_names[i]);
    if (!thr_openmpi_host_objects[i])
      thr_fatal("the host MPI library has no %s (another Open MPI than the one the stand-in "
                "was built for?)", thr_openmpi_object_names[i]);
  }
  const MPI_Datatype types[] = {
    MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_SHORT, MPI_UNSIGNED_SHORT,
    MPI_INT, MPI_UNSIGNED, MPI_LONG, MPI_UNSIGNED_LONG, MPI_LONG_LONG_INT, MPI_LONG_LONG,
    MPI_UNSIGNED_LONG_LONG, MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_WCHAR, MPI_PACKED,
    MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T, MPI_UINT16_T,
    MPI_UINT32_T, MPI_UINT64_T, MPI_C_BOOL, MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
    MPI_C_LONG_DOUBLE_COMPLEX, MPI_AINT, MPI_OFFSET, MPI_COUNT, MPI_FLOAT_INT, MPI_DOUBLE_INT,
    MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT, MPI_CHARACTER, MPI_LOGICAL,
    MPI_INTEGER, MPI_REAL, MPI_DOUBLE_PRECISION, MPI_COMPLEX, MPI_DOUBLE_COMPLEX,
    MPI_INTEGER1, MPI_INTEGER2, MPI_INTEGER4, MPI_INTEGER8, MPI_REAL4, MPI_REAL8,
    MPI_2INTEGER, MPI_2REAL, MPI_2DOUBLE_PRECISION,
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
    int size;
    MPI_Aint lb, extent;
    if (PMPI_Type_size(types[i], &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(types[i], &lb, &extent) != MPI_SUCCESS)
      continue;
    /* Holes (MPI_DOUBLE_INT) or nothing (an unavailable Fortran type): not basic. */
    if (size <= 0 || lb != 0 || extent != size)
      continue;
    addr_map_put(&basics, (uintptr_t)types[i], size);
  }
}

void *thr_openmpi_host_symbol(const char *name)
{
  return dlsym(host_library, name);
}

size_t thr_openmpi_basic_type_size(MPI_Datatype type)
{
  return (size_t)addr_map_get(&basics, (uintptr_t)type, 0);
}
