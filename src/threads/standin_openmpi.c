/* Open MPI's stand-in, the part standin.c does not generate: the translation of
 * predefined handles between the rank's namespace and the host library (see
 * standin_openmpi.h), and the calls that take arrays of handles. */
#include <stdint.h>
#include <stdlib.h>

#include "addr_map.h"
#include "table.h"
#include "standin_openmpi.h"

#define EXPORT __attribute__((visibility("default")))

/* The objects' indices in openmpi_objects.txt by address: the rank's copies and the
 * host library's. */
static struct addr_map rank_index, host_index;
static const void *const *host_objects;

static void index_table(struct addr_map *m, const void *const *objects)
{
  for (int i = 0; i < thr_standin_nobjects; i++)
    addr_map_put(m, (uintptr_t)objects[i], i);
}

void thr_standin_objects_bind(const void *const *host)
{
  host_objects = host;
  index_table(&rank_index, (const void *const *)thr_standin_objects);
  index_table(&host_index, host);
}

/* The index of the object at handle, -1 when it is none of them (most handles the host or
 * the runtime made are outside the table's range: two compares). */
static int index_of(const struct addr_map *m, void *handle)
{
  return (int)addr_map_get(m, (uintptr_t)handle, -1);
}

struct thr_comm_shells thr_standin_shells;

void *thr_standin_comm_shell_handle(void *handle)
{
  const struct thr_comm_shells *s = &thr_standin_shells;
  unsigned char *p = handle;
  if (!s->base || p < s->base || p >= s->base + s->count * s->bytes)
    return handle;
  void *runtime_handle;
  memcpy(&runtime_handle, s->base + (size_t)(p - s->base) / s->bytes * s->bytes + s->handle_at,
         sizeof runtime_handle);
  return runtime_handle;
}

void *thr_standin_to_host(void *handle)
{
  int i = index_of(&rank_index, handle);
  return i < 0 ? thr_standin_comm_shell_handle(handle) : (void *)host_objects[i];
}

void *thr_standin_to_rank(void *handle)
{
  int i = index_of(&host_index, handle);
  return i < 0 ? handle : thr_standin_objects[i];
}

static void requests_in(int n, MPI_Request reqs[])
{
  for (int i = 0; i < n; i++)
    reqs[i] = thr_standin_to_host(reqs[i]);
}

static void requests_out(int n, MPI_Request reqs[])
{
  for (int i = 0; i < n; i++)
    reqs[i] = thr_standin_to_rank(reqs[i]);
}

/* n types, the host's, in a new array (the program's may be read-only). */
static MPI_Datatype *types_in(int n, const MPI_Datatype types[])
{
  MPI_Datatype *host = malloc((size_t)(n > 0 ? n : 1) * sizeof *host);
  for (int i = 0; i < n; i++)
    host[i] = thr_standin_to_host(types[i]);
  return host;
}

/* Each under its MPI_ and PMPI_ name. */
#define BOTH(ret, name, params, ...) \
  EXPORT ret MPI_##name params __VA_ARGS__ EXPORT ret PMPI_##name params __VA_ARGS__

BOTH(int, Startall, (int n, MPI_Request reqs[]), {
  requests_in(n, reqs);
  int rc = api->Startall(self, n, reqs);
  requests_out(n, reqs);
  return rc;
})

BOTH(int, Waitall, (int n, MPI_Request reqs[], MPI_Status statuses[]), {
  requests_in(n, reqs);
  int rc = api->Waitall(self, n, reqs, statuses);
  requests_out(n, reqs);
  return rc;
})

BOTH(int, Testall, (int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]), {
  requests_in(n, reqs);
  int rc = api->Testall(self, n, reqs, flag, statuses);
  requests_out(n, reqs);
  return rc;
})

BOTH(int, Waitany, (int n, MPI_Request reqs[], int *index, MPI_Status *status), {
  requests_in(n, reqs);
  int rc = api->Waitany(self, n, reqs, index, status);
  requests_out(n, reqs);
  return rc;
})

BOTH(int, Waitsome, (int n, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[]), {
  requests_in(n, reqs);
  int rc = api->Waitsome(self, n, reqs, outcount, indices, statuses);
  requests_out(n, reqs);
  return rc;
})

BOTH(int, Testsome, (int n, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[]), {
  requests_in(n, reqs);
  int rc = api->Testsome(self, n, reqs, outcount, indices, statuses);
  requests_out(n, reqs);
  return rc;
})

BOTH(int, Testany, (int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status), {
  requests_in(n, reqs);
  int rc = api->Testany(self, n, reqs, index, flag, status);
  requests_out(n, reqs);
  return rc;
})

/* The schedule is built inside the call: the host's type arrays can go after it. */
BOTH(int, Ialltoallw, (const void *sbuf, const int *scounts, const int *sdispls,
                       const MPI_Datatype *stypes, void *rbuf, const int *rcounts,
                       const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm,
                       MPI_Request *req), {
  comm = thr_standin_to_host(comm);
  int size;
  api->Comm_size(self, comm, &size);
  MPI_Datatype *s = sbuf == MPI_IN_PLACE ? NULL : types_in(size, stypes);
  MPI_Datatype *r = types_in(size, rtypes);
  int rc = api->Ialltoallw(self, sbuf, scounts, sdispls, s, rbuf, rcounts, rdispls, r, comm, req);
  free(s);
  free(r);
  return rc;
})

/* A persistent call reads its arguments at every start, so the host's type arrays live
 * as long as the program: two arrays of the communicator's size per init call. */
BOTH(int, Alltoallw_init, (const void *sbuf, const int *scounts, const int *sdispls,
                           const MPI_Datatype *stypes, void *rbuf, const int *rcounts,
                           const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm,
                           MPI_Info info, MPI_Request *req), {
  comm = thr_standin_to_host(comm);
  info = thr_standin_to_host(info);
  int size;
  api->Comm_size(self, comm, &size);
  MPI_Datatype *s = sbuf == MPI_IN_PLACE ? NULL : types_in(size, stypes);
  MPI_Datatype *r = types_in(size, rtypes);
  return api->Alltoallw_init(self, sbuf, scounts, sdispls, s, rbuf, rcounts, rdispls, r, comm,
                             info, req);
})

BOTH(int, Alltoallw, (const void *sbuf, const int *scounts, const int *sdispls,
                      const MPI_Datatype *stypes, void *rbuf, const int *rcounts,
                      const int *rdispls, const MPI_Datatype *rtypes, MPI_Comm comm), {
  comm = thr_standin_to_host(comm);
  int size;
  api->Comm_size(self, comm, &size);
  MPI_Datatype *s = sbuf == MPI_IN_PLACE ? NULL : types_in(size, stypes);
  MPI_Datatype *r = types_in(size, rtypes);
  int rc = api->Alltoallw(self, sbuf, scounts, sdispls, s, rbuf, rcounts, rdispls, r, comm);
  free(s);
  free(r);
  return rc;
})

BOTH(int, Type_create_struct, (int n, const int *b, const MPI_Aint *d, const MPI_Datatype *t,
                               MPI_Datatype *o), {
  MPI_Datatype *host = types_in(n, t);
  int rc = api->host_Type_create_struct(n, b, d, host, o);
  free(host);
  *o = thr_standin_to_rank(*o);
  return rc;
})
