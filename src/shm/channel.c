#include "shm/channel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

/* Every pooled channel of the process, in use or not; newest first. */
static pthread_mutex_t channels_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcoll_channel *channels;
static atomic_ulong channels_made;

static void channel_free(struct mcoll_channel *ch) {
  mcoll__shm_detach(&ch->shm);
  free(ch->cma_ready);
  free(ch->members);
  free(ch);
}

struct mcoll_channel *mcoll__channel_private(void) {
  struct mcoll_channel *ch = calloc(1, sizeof *ch);
  if (ch) ch->users = 1;
  return ch;
}

struct mcoll_channel *mcoll__channel_claim(const int *members, int nmembers, int live_ok) {
  struct mcoll_channel *best = NULL;
  pthread_mutex_lock(&channels_lock);
  for (struct mcoll_channel *ch = channels; ch; ch = ch->next) {
    if ((ch->users && (!live_ok || ch->exclusive)) || ch->nmembers != nmembers || (best && best->id < ch->id))
      continue;
    if (!memcmp(ch->members, members, sizeof *members * (size_t)nmembers)) best = ch;
  }
  if (best) best->users++;
  pthread_mutex_unlock(&channels_lock);
  return best;
}

mcoll_status mcoll__channel_create(MPI_Comm node_comm, int real_node_size, const int *members,
                                   unsigned id, struct mcoll_channel **out) {
  mcoll_status status = MCOLL_OK;
  struct mcoll_channel *ch = calloc(1, sizeof *ch);
  int n = 0;
  PMPI_Comm_size(node_comm, &n);
  if (ch) {
    ch->members = malloc(sizeof *members * (size_t)n);
    ch->cma_ready = calloc((size_t)n, sizeof *ch->cma_ready);
  }
  /* Every rank takes part in the attach even without memory, which then fails it
   * for the whole node. */
  int have_memory = ch && ch->members && ch->cma_ready;
  struct mcoll_shm scratch;
  status = mcoll__shm_attach(node_comm, real_node_size, have_memory ? &ch->shm : &scratch);
  if (!have_memory && status == MCOLL_OK) {
    mcoll__shm_detach(&scratch);
    status = MCOLL_ERR_NOMEM;
  }
  if (status != MCOLL_OK) {
    if (ch) channel_free(ch);
    return status;
  }
  /* MCOLL_CMA is the same on every rank: all skip the probe's exchange alike. */
  ch->cma_ok = mcoll__cfg.CMA ? mcoll__cma_probe(node_comm, &ch->shm) : 0;
  memcpy(ch->members, members, sizeof *members * (size_t)n);
  ch->nmembers = n;
  ch->id = id;
  ch->users = 1;
  ch->pooled = 1;
  atomic_fetch_add_explicit(&channels_made, 1, memory_order_relaxed);
  pthread_mutex_lock(&channels_lock);
  ch->next = channels;
  channels = ch;
  pthread_mutex_unlock(&channels_lock);
  *out = ch;
  return MCOLL_OK;
}

void mcoll__channel_release(struct mcoll_channel *ch) {
  if (!ch) return;
  if (!ch->pooled) {
    channel_free(ch);
    return;
  }
  struct mcoll_channel *evict = NULL;
  pthread_mutex_lock(&channels_lock);
  ch->users--;
  if (!ch->users) ch->exclusive = 0;
  /* Keep the newest unused ones; unmap the oldest beyond the pool's size. An evicted
   * channel's id is never proposed again, so peers that still pool theirs simply
   * fail to agree on it once and make a new one. */
  long idle = 0;
  for (struct mcoll_channel **link = &channels; *link;) {
    struct mcoll_channel *it = *link;
    if (!it->users && ++idle > mcoll__cfg.CHANNEL_POOL) {
      *link = it->next;
      it->next = evict;
      evict = it;
    } else {
      link = &it->next;
    }
  }
  pthread_mutex_unlock(&channels_lock);
  while (evict) {
    struct mcoll_channel *next = evict->next;
    channel_free(evict);
    evict = next;
  }
}

unsigned long mcoll__channels_made(void) { return atomic_load(&channels_made); }

void mcoll__channel_free_all(void) {
  pthread_mutex_lock(&channels_lock);
  struct mcoll_channel *all = channels;
  channels = NULL;
  pthread_mutex_unlock(&channels_lock);
  while (all) {
    struct mcoll_channel *next = all->next;
    channel_free(all);
    all = next;
  }
}
