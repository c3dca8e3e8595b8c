#include "core/context.h"
#include "core/tls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

/* Created by the first lookup of any thread (under keyval_lock), freed at MPI_Finalize. */
static _Atomic int context_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t keyval_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcoll_comm *live_contexts;

/* Ids of contexts: agreed by the ranks of a group at set-up (one more than the
 * largest any of them has used), so that equal ids on two ranks name one context. */
static atomic_uint last_context_id; /* ids matter only when sharing (one MPI thread) */
static atomic_ulong contexts_built, contexts_shared;

static void context_destroy(struct mcoll_comm *c) {
  pthread_mutex_lock(&live_lock);
  if (c->prev) c->prev->next = c->next;
  else if (live_contexts == c) live_contexts = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&live_lock);
  mcoll__shm_detach(&c->shm);
  mcoll__topo_free(&c->topo);
  if (c->p2p != MPI_COMM_NULL) PMPI_Comm_free(&c->p2p);
  if (c->group != MPI_GROUP_NULL) PMPI_Group_free(&c->group);
  free(c->cma_ready);
  free(c->users);
  free(c);
}

static int context_add_user(struct mcoll_comm *c, MPI_Comm comm) {
  if (c->nusers == c->users_cap) {
    int cap = c->users_cap ? 2 * c->users_cap : 2;
    MPI_Comm *users = realloc(c->users, (size_t)cap * sizeof *users);
    if (!users) return 0;
    c->users = users;
    c->users_cap = cap;
  }
  c->users[c->nusers++] = comm;
  return 1;
}

/* Drops comm from c's users; 1 when none is left. */
static int context_drop_user(struct mcoll_comm *c, MPI_Comm comm) {
  for (int i = 0; i < c->nusers; i++)
    if (c->users[i] == comm) {
      c->users[i] = c->users[--c->nusers];
      break;
    }
  return c->nusers == 0;
}

/* Each thread remembers the last communicator it looked up; freeing any context
 * bumps the epoch, which empties every thread's memory (a freed communicator's
 * handle may come back for a new one). */
static atomic_uint context_epoch;
static MCOLL_TLS struct {
  MPI_Comm comm;
  struct mcoll_comm *c;
  unsigned epoch;
} last_lookup = {MPI_COMM_NULL, NULL, 0};

static int context_delete(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)keyval, (void)extra;
  atomic_fetch_add_explicit(&context_epoch, 1, memory_order_release);
  pthread_mutex_lock(&live_lock);
  int last = context_drop_user(attr, comm);
  pthread_mutex_unlock(&live_lock);
  if (last) context_destroy(attr);
  return MPI_SUCCESS;
}

/* Why share: every dup of MPI_COMM_WORLD (libraries dup it, many codes make one per
 * phase) would otherwise get a segment and communicators of its own: megabytes of
 * shared memory, context ids and milliseconds each. Sharing is safe when the groups
 * are identical and each process makes its calls in one sequence: collectives on
 * communicators of one group must then come in the same order on every rank (else
 * the program may deadlock natively: MPI-3.1 §5.14), so the shared sequence numbers
 * advance alike. Several threads calling MPI could interleave calls on two such
 * communicators differently on each rank: no sharing then. */
static int sharing_allowed(void) {
  if (!mcoll__cfg.SHARE_CONTEXT) return 0;
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  return provided <= MPI_THREAD_FUNNELED;
}

/* The live context with the smallest id whose group is group, or NULL. */
static struct mcoll_comm *identical_context(MPI_Group group) {
  struct mcoll_comm *best = NULL;
  pthread_mutex_lock(&live_lock);
  for (struct mcoll_comm *c = live_contexts; c; c = c->next) {
    int result = MPI_UNEQUAL;
    if (!c->usable || c->group == MPI_GROUP_NULL || (best && best->id < c->id)) continue;
    PMPI_Group_compare(group, c->group, &result);
    if (result == MPI_IDENT) best = c;
  }
  pthread_mutex_unlock(&live_lock);
  return best;
}

/* Collective over comm: the context every rank found to share (the same on all), or
 * NULL; sets *id to the id a new context gets. */
static struct mcoll_comm *agree_on_context(MPI_Comm comm, MPI_Group group, unsigned *id) {
  struct mcoll_comm *found = sharing_allowed() ? identical_context(group) : NULL;
  /* One MIN reduction: the smallest and largest candidate id, the largest id used. */
  unsigned last = atomic_load_explicit(&last_context_id, memory_order_relaxed);
  int mine[3] = {found ? (int)found->id : 0, found ? -(int)found->id : 0, -(int)last};
  int all[3] = {0, 0, 0};
  if (PMPI_Allreduce(mine, all, 3, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) return NULL;
  *id = (unsigned)(-all[2]) + 1;
  while (last < *id &&
         !atomic_compare_exchange_weak_explicit(&last_context_id, &last, *id, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  return found && all[0] == -all[1] && all[0] == (int)found->id ? found : NULL;
}

/* Collective over comm; every rank ends with the same `usable`. */
static void context_setup(struct mcoll_comm *c) {
  mcoll_status status = MCOLL_OK;
  int ok = 0, all_ok = 0;
  MCOLL_CHECK_MPI(PMPI_Comm_dup(c->comm, &c->p2p));
  /* Errors of mcoll's own point-to-point come back to the collective that caused them. */
  PMPI_Comm_set_errhandler(c->p2p, MPI_ERRORS_RETURN);
  MCOLL_CHECK(mcoll__topo_build(c->comm, &c->topo));
  if (mcoll__node_has_peers(c)) {
    MCOLL_CHECK(mcoll__shm_attach(c->topo.node_comm, c->topo.real_node_size, &c->shm));
    c->cma_ok = mcoll__cma_probe(c->topo.node_comm, &c->shm);
  }
  /* Nothing uses the node communicator after set-up: its context id goes back now
   * (MPICH has 2048 in all). */
  MCOLL_CHECK_MPI(PMPI_Comm_free(&c->topo.node_comm));
  c->cma_ready = calloc((size_t)c->topo.local_size, sizeof(uint32_t));
  if (!c->cma_ready) MCOLL_CHECK(MCOLL_ERR_NOMEM);
  ok = 1;
cleanup:
  if (status != MCOLL_OK && mcoll__cfg.VERBOSE)
    fprintf(stderr, "mcoll: rank %d: context set-up failed: %s\n", c->rank,
            mcoll__status_str(status));
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm);
  c->usable = all_ok;
  if (!all_ok) {
    /* Every call falls back: hold no communicator (context id) or segment for it. */
    mcoll__shm_detach(&c->shm);
    mcoll__topo_free(&c->topo);
    if (c->p2p != MPI_COMM_NULL) PMPI_Comm_free(&c->p2p);
  }
}

static int context_keyval_create(void) {
  pthread_mutex_lock(&keyval_lock);
  int keyval = atomic_load_explicit(&context_keyval, memory_order_relaxed);
  if (keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, context_delete, &keyval, NULL) == MPI_SUCCESS)
    atomic_store_explicit(&context_keyval, keyval, memory_order_release);
  pthread_mutex_unlock(&keyval_lock);
  return keyval;
}

/* The context for a communicator that has none yet: shared or new. Collective. */
static struct mcoll_comm *context_build(MPI_Comm comm) {
  int inter = 0;
  unsigned id = 0;
  MPI_Group group = MPI_GROUP_NULL;
  struct mcoll_comm *shared = NULL;
  PMPI_Comm_test_inter(comm, &inter);
  if (!inter) {
    PMPI_Comm_group(comm, &group);
    shared = agree_on_context(comm, group, &id);
  }
  if (shared) {
    PMPI_Group_free(&group);
    pthread_mutex_lock(&live_lock);
    int ok = context_add_user(shared, comm);
    pthread_mutex_unlock(&live_lock);
    atomic_fetch_add_explicit(&contexts_shared, 1, memory_order_relaxed);
    return ok ? shared : NULL;
  }
  struct mcoll_comm *c = calloc(1, sizeof *c);
  if (!c) {
    if (group != MPI_GROUP_NULL) PMPI_Group_free(&group);
    return NULL;
  }
  c->comm = comm;
  c->group = group;
  c->id = id;
  c->inter = inter;
  c->p2p = MPI_COMM_NULL;
  c->topo.node_comm = MPI_COMM_NULL;
  PMPI_Comm_rank(comm, &c->rank);
  PMPI_Comm_size(comm, &c->size);
  if (!c->inter) context_setup(c);
  atomic_fetch_add_explicit(&contexts_built, 1, memory_order_relaxed);
  pthread_mutex_lock(&live_lock);
  if (!context_add_user(c, comm)) {
    pthread_mutex_unlock(&live_lock);
    context_destroy(c);
    return NULL;
  }
  c->next = live_contexts;
  if (live_contexts) live_contexts->prev = c;
  live_contexts = c;
  pthread_mutex_unlock(&live_lock);
  return c;
}

struct mcoll_comm *mcoll__comm_get(MPI_Comm comm, enum mcoll_fallback_reason *why) {
  struct mcoll_comm *c = NULL;
  int found = 0;
  unsigned epoch = atomic_load_explicit(&context_epoch, memory_order_acquire);
  if (last_lookup.c && last_lookup.comm == comm && last_lookup.epoch == epoch)
    return last_lookup.c;
  int keyval = atomic_load_explicit(&context_keyval, memory_order_acquire);
  if (keyval == MPI_KEYVAL_INVALID) keyval = context_keyval_create();
  if (keyval == MPI_KEYVAL_INVALID) {
    *why = MCOLL_WHY_NO_CONTEXT;
    return NULL;
  }
  PMPI_Comm_get_attr(comm, keyval, &c, &found);
  if (!found) {
    c = context_build(comm);
    if (!c) {
      *why = MCOLL_WHY_NO_CONTEXT;
      return NULL;
    }
    PMPI_Comm_set_attr(comm, keyval, c);
  }
  if (c->usable) {
    last_lookup.comm = comm;
    last_lookup.c = c;
    last_lookup.epoch = epoch;
    return c;
  }
  *why = c->inter ? MCOLL_WHY_INTERCOMM : MCOLL_WHY_NO_CONTEXT;
  return NULL;
}

void mcoll__context_report(FILE *out) {
  fprintf(out, "mcoll: contexts built=%lu shared=%lu\n", atomic_load(&contexts_built),
          atomic_load(&contexts_shared));
}

void mcoll__comm_free_all(void) {
  while (live_contexts) {
    struct mcoll_comm *c = live_contexts;
    /* Deleting the attribute runs context_delete, which drops the user and
     * destroys c with its last one. */
    if (PMPI_Comm_delete_attr(c->users[c->nusers - 1], context_keyval) != MPI_SUCCESS) {
      pthread_mutex_lock(&live_lock);
      int last = context_drop_user(c, c->users[c->nusers - 1]);
      pthread_mutex_unlock(&live_lock);
      if (last) context_destroy(c);
    }
  }
  int keyval = atomic_exchange(&context_keyval, MPI_KEYVAL_INVALID);
  if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&keyval);
}
