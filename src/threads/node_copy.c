/* Large messages between processes of one node: the receiver copies once from the
 * sender's buffer (process_vm_readv) and then sets the sender's completion flag
 * (process_vm_writev), instead of the host MPI's transfer into a runtime buffer and a
 * second copy into the receive's. Only the envelope goes through the host MPI, so the
 * matching stays where it is. The copies are libmcoll's (shm/cma.c). */
#include "runtime.h"
#include "shm/shm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Messages from this many bytes go by single copy (MCOLL_THREADS_NODE_COPY; 0: never).
 * Below it the host MPI's eager transfer answers without waiting for the receive. */
enum { NODE_COPY_MIN = 65536 };

static atomic_long messages_read; /* (MCOLL_THREADS_STATS) */
static unsigned char *same_node; /* per host process: 1 when single copy reaches it */
static size_t copy_min;          /* messages from this size go by single copy; 0: none */

/* Collective over the host's processes: which of them share this node, and whether
 * every process of the node can read its neighbour's memory (Yama's ptrace_scope=1
 * allows it only to a declared tracer: declare any; a container may forbid it). */
void thr_node_copy_init(MPI_Comm node, int process, int processes)
{
  same_node = thr_calloc((size_t)processes, 1);
  const char *env = getenv("MCOLL_THREADS_NODE_COPY");
  long min = env && *env ? strtol(env, NULL, 0) : NODE_COPY_MIN;
  int n, me;
  PMPI_Comm_size(node, &n);
  PMPI_Comm_rank(node, &me);
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  static uint64_t probe_word = 0x6d636f6c6c6e6f64ull;
  uint64_t mine[3] = {(uint64_t)process, (uint64_t)getpid(), (uintptr_t)&probe_word};
  uint64_t *all = thr_malloc((size_t)n * sizeof mine);
  PMPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, node);
  int ok = 1, all_ok = 0;
  if (n > 1) {
    const uint64_t *next = all + 3 * ((me + 1) % n);
    uint64_t got = 0;
    ok = mcoll__cma_read((pid_t)next[1], &got, next[2], sizeof got) == 0 && got == probe_word;
  }
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node);
  for (int i = 0; i < n; i++)
    same_node[all[3 * i]] = all_ok && i != me;
  free(all);
  copy_min = min > 0 && all_ok ? (size_t)min : 0;
}

int thr_node_copy_takes(int process, size_t len)
{
  return copy_min && len >= copy_min && same_node[process];
}

void thr_node_copy_read(const struct thr_msg *m, void *dst, size_t len)
{
  int err = mcoll__cma_read(m->peer_pid, dst, m->peer_addr, len);
  if (err)
    thr_fatal("process_vm_readv of %zu bytes from process %d: %s", len, (int)m->peer_pid,
              strerror(err));
}

void thr_node_copy_release(const struct thr_msg *m)
{
  atomic_fetch_add_explicit(&messages_read, 1, memory_order_relaxed);
  int one = 1;
  int err = mcoll__cma_write(m->peer_pid, m->peer_done, &one, sizeof one);
  if (err)
    thr_fatal("process_vm_writev to process %d: %s", (int)m->peer_pid, strerror(err));
}

long thr_node_copy_count(void)
{
  return atomic_load_explicit(&messages_read, memory_order_relaxed);
}
