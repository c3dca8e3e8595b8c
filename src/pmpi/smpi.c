/* The SMPI extension (mcoll.h) for ranks that are processes: no address can pass
 * between processes, so a send is an MPI_Isend of the buffer, which is freed once the
 * send completes, and a receive allocates a buffer of the message's size and receives
 * into it. Thread ranks of one process hand the buffer itself over (src/threads). */
#include <pthread.h>
#include <stdlib.h>

#include "mcoll.h"
#include "pmpi/wrap.h"

/* Sends in flight and their buffers. An SMPI send returns at once, as the handoff between
 * thread ranks does (a ring of sends followed by receives must not wait on itself). */
struct smpi_pending {
  struct smpi_pending *next;
  MPI_Request request;
  void *buffer;
};

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smpi_pending *pending;

/* Frees the buffers of the sends that have completed; all of them when wait is set. */
static void reap(int wait)
{
  pthread_mutex_lock(&pending_lock);
  for (struct smpi_pending **p = &pending; *p;) {
    struct smpi_pending *s = *p;
    int done = 1;
    if (wait)
      PMPI_Wait(&s->request, MPI_STATUS_IGNORE);
    else
      PMPI_Test(&s->request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      p = &s->next;
      continue;
    }
    *p = s->next;
    free(s->buffer);
    free(s);
  }
  pthread_mutex_unlock(&pending_lock);
}

void mcoll__smpi_finish(void) { reap(1); }

MCOLL_EXPORT int MPIX_Smpi_alloc(MPI_Aint size, void *baseptr)
{
  void *p = size >= 0 ? malloc(size ? (size_t)size : 1) : NULL;
  *(void **)baseptr = p;
  return p ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

MCOLL_EXPORT int MPIX_Smpi_free(void *ptr)
{
  free(ptr);
  return MPI_SUCCESS;
}

MCOLL_EXPORT int MPIX_Smpi_send(void *ptr, int count, MPI_Datatype type, int dest, int tag,
                                MPI_Comm comm)
{
  reap(0);
  struct smpi_pending *s = malloc(sizeof *s);
  if (!s)
    return MPI_ERR_NO_MEM;
  int err = MPI_Isend(ptr, count, type, dest, tag, comm, &s->request);
  if (err != MPI_SUCCESS) {
    free(s);
    return err;
  }
  s->buffer = ptr;
  pthread_mutex_lock(&pending_lock);
  s->next = pending;
  pending = s;
  pthread_mutex_unlock(&pending_lock);
  return MPI_SUCCESS;
}

MCOLL_EXPORT int MPIX_Smpi_recv(void *ptrp, int count, MPI_Datatype type, int source, int tag,
                                MPI_Comm comm, MPI_Status *status)
{
  void **out = ptrp;
  *out = NULL;
  MPI_Status local;
  if (status == MPI_STATUS_IGNORE)
    status = &local;
  if (source == MPI_PROC_NULL)
    return MPI_Recv(NULL, 0, type, source, tag, comm, status);
  /* A matched probe: the message measured is the one received, even with wildcards and
   * other threads receiving. */
  MPI_Message message;
  int err = MPI_Mprobe(source, tag, comm, &message, status);
  if (err != MPI_SUCCESS)
    return err;
  int bytes, type_size;
  MPI_Get_count(status, MPI_BYTE, &bytes);
  MPI_Type_size(type, &type_size);
  int fits = (long long)bytes <= (long long)count * type_size;
  void *p = malloc(bytes ? (size_t)bytes : 1);
  if (!p)
    return MPI_ERR_NO_MEM;
  err = MPI_Mrecv(p, bytes, MPI_BYTE, &message, status);
  *out = p;
  reap(0);
  /* A message longer than count x type: its whole buffer, and MPI_ERR_TRUNCATE. */
  return err != MPI_SUCCESS ? err : fits ? MPI_SUCCESS : MPI_ERR_TRUNCATE;
}
