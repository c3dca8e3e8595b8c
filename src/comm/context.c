#include "comm/context.h"
#include "core/tls.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "task/host.h"

/* Created by the first lookup of any thread (under keyval_lock), freed at MPI_Finalize. */
static _Atomic int context_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t keyval_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcoll_comm *live_contexts;

/* Ids of contexts: agreed by the ranks of a group at set-up (one more than the
 * largest any of them has used), so that equal ids on two ranks name one context. */
static atomic_uint last_context_id; /* ids matter only when sharing (one MPI thread) */
static atomic_ulong contexts_built, contexts_shared, channels_reused;

static void context_destroy(struct mcoll_comm *c) {
  pthread_mutex_lock(&live_lock);
  if (c->prev) c->prev->next = c->next;
  else if (live_contexts == c) live_contexts = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&live_lock);
  mcoll__channel_release(c->chan);
  mcoll__topo_free(&c->topo);
  if (c->p2p != MPI_COMM_NULL) PMPI_Comm_free(&c->p2p);
  if (c->group != MPI_GROUP_NULL) PMPI_Group_free(&c->group);
  free(c->users);
  for (int coll = 0; coll < MCOLL_CHOICE_SLOTS; coll++) free(c->adapt[coll]);
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

/* A shared context serves the communicator of its latest call. Written only when it
 * changes: a private context's progress thread and caller look it up side by side
 * with the same handle, and a read races with nothing. */
static void note_comm(struct mcoll_comm *c, MPI_Comm comm) {
  if (c->comm != comm) c->comm = comm;
}

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
  /* (a progress thread, if any, runs only tasks, which never share: task/task.h) */
  return mcoll__thread_level() <= MPI_THREAD_FUNNELED;
}

/* The live context with the smallest id whose group is group, or NULL. Not one
 * built for a communicator of its own (a persistent request's duplicate, or one
 * that wished for it): before its first non-blocking call agrees it may run tasks,
 * a second user would make that agreement fail on its communicator and on the
 * sharer, and every MPI_I* call and start of both would go to the host MPI. */
static struct mcoll_comm *identical_context(MPI_Group group) {
  struct mcoll_comm *best = NULL;
  pthread_mutex_lock(&live_lock);
  for (struct mcoll_comm *c = live_contexts; c; c = c->next) {
    int result = MPI_UNEQUAL;
    if (!c->usable || c->group == MPI_GROUP_NULL || c->nbc == MCOLL_NBC_YES || c->private_ctx ||
        (best && best->id < c->id))
      continue;
    PMPI_Group_compare(group, c->group, &result);
    if (result == MPI_IDENT) best = c;
  }
  pthread_mutex_unlock(&live_lock);
  return best;
}

/* World ranks of the node's ranks in node-local order (the key of a channel), or
 * NULL when some is not a world process. */
static int *node_members(MPI_Group group, const struct mcoll_topo *t) {
  MPI_Group world = MPI_GROUP_NULL;
  int *members = malloc(sizeof *members * (size_t)t->local_size);
  if (members && PMPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS &&
      PMPI_Group_translate_ranks(group, t->local_size, t->local_ranks, world, members) == MPI_SUCCESS) {
    for (int i = 0; i < t->local_size; i++)
      if (members[i] == MPI_UNDEFINED) {
        free(members);
        members = NULL;
        break;
      }
  } else {
    free(members);
    members = NULL;
  }
  if (world != MPI_GROUP_NULL) PMPI_Group_free(&world);
  return members;
}

/* What the ranks of a new communicator agreed on in one exchange. */
struct agreement {
  int ok;                     /* every rank has its hierarchy */
  struct mcoll_comm *shared;  /* a live context to share, the same on all ranks */
  int node_agreed;            /* every rank of this node proposed the same channel */
  int any_new;                /* some node with peers needs a new channel */
  unsigned id;                /* the id a new context (and channel) gets */
};

/* Collective over comm. A rank proposes the live context with an identical group
 * and the channel of its node's processes it found (or none); the context holds
 * when every rank proposed it, a channel when every rank of its node did. */
static void agree(struct mcoll_comm *c, int ok, struct mcoll_comm *found,
                  const struct mcoll_channel *channel, int needs_channel, struct agreement *out) {
  enum { OK, CTX, CHAN, LAST, N };
  unsigned last = atomic_load_explicit(&last_context_id, memory_order_relaxed);
  int mine[N] = {ok, found ? (int)found->id : 0, !needs_channel ? -1 : channel ? (int)channel->id : 0,
                 (int)last};
  int *all = malloc(sizeof mine * (size_t)c->size);
  memset(out, 0, sizeof *out);
  if (!all || PMPI_Allgather(mine, N, MPI_INT, all, N, MPI_INT, c->comm) != MPI_SUCCESS) {
    /* (all ranks allocate alike; a failed exchange fails everywhere) */
    free(all);
    return;
  }
  int max_last = 0, same_ctx = mine[CTX] != 0;
  out->ok = 1;
  for (int r = 0; r < c->size; r++) {
    const int *their = &all[r * N];
    out->ok &= their[OK];
    same_ctx &= their[CTX] == mine[CTX];
    if (their[LAST] > max_last) max_last = their[LAST];
  }
  out->id = (unsigned)max_last + 1;
  while (last < out->id &&
         !atomic_compare_exchange_weak_explicit(&last_context_id, &last, out->id, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  out->shared = out->ok && same_ctx ? found : NULL;
  if (!out->ok) {
    free(all);
    return;
  }
  /* A node agrees when all its ranks proposed one channel (a node of one rank
   * proposes -1 and needs none). */
  const struct mcoll_topo *t = &c->topo;
  for (int node = 0; node < t->nnodes; node++) {
    int first = -2, agreed = 1;
    for (int r = 0; r < c->size; r++) {
      if (t->node_of[r] != node) continue;
      int chan = all[r * N + CHAN];
      if (first == -2) first = chan;
      agreed &= chan == first && chan != 0;
    }
    if (node == t->node) out->node_agreed = agreed;
    if (!agreed) out->any_new = 1;
  }
  free(all);
}

/* Collective over comm: the split into nodes, by which a node that did not agree
 * (`make`; it has peers) makes a new channel. */
static mcoll_status channel_build(struct mcoll_comm *c, const int *members, unsigned id, int make) {
  mcoll_status status = MCOLL_OK;
  /* On one node the communicator is the node's, in the same order: no split. */
  MPI_Comm node_comm = c->topo.nnodes == 1 ? c->comm : MPI_COMM_NULL;
  if (node_comm == MPI_COMM_NULL)
    MCOLL_CHECK_MPI(PMPI_Comm_split(c->comm, c->topo.node, c->rank, &node_comm));
  if (make) MCOLL_CHECK(mcoll__channel_create(node_comm, c->topo.real_node_size, members, id, &c->chan));
cleanup:
  /* Nothing uses the node communicator after set-up: its context id goes back now
   * (MPICH has 2048 in all). */
  if (node_comm != MPI_COMM_NULL && node_comm != c->comm) PMPI_Comm_free(&node_comm);
  return status;
}

/* Collective over comm: hierarchy, channel and point-to-point communicator of a new
 * context, or the live context to share instead; every rank ends with the same
 * `usable`. The common case communicates once: a communicator of world processes
 * finds its hierarchy from the table of MPI_Init, and a channel over its node's
 * processes is often in use or in the pool already. */
static struct mcoll_comm *context_setup(struct mcoll_comm *c, struct mcoll_comm *found,
                                        int alone) {
  int communicated = 0, ok = 1;
  int *members = NULL;
  struct mcoll_channel *channel = NULL;
  struct agreement agreed;
  if (mcoll__topo_build(c->comm, &c->topo, &communicated) != MCOLL_OK) ok = 0;
  int needs_channel = ok && mcoll__node_has_peers(c);
  /* Threads that build contexts at the same time (MPI_THREAD_MULTIPLE) may agree on
   * one id for two channels of a process (each agreement takes the largest id its
   * ranks have seen, plus one): a channel's id then no longer names one channel on
   * every rank, and a pooled channel claimed by id could be another rank's other
   * channel (test_threads hung 1 run in 7-15 so). Such programs take new channels. */
  int may_claim = mcoll__thread_level() < MPI_THREAD_MULTIPLE;
  if (needs_channel && (members = node_members(c->group, &c->topo)) && may_claim)
    channel = mcoll__channel_claim(members, c->topo.local_size, !alone && sharing_allowed());
  agree(c, ok, found, channel, needs_channel, &agreed);
  c->id = agreed.id;
  ok = agreed.ok;
  if (agreed.shared || !agreed.node_agreed || !ok) {
    mcoll__channel_release(channel);
    channel = NULL;
  }
  if (agreed.shared) {
    free(members);
    return agreed.shared;
  }
  if (ok && agreed.node_agreed) {
    /* Every rank of the node claimed the agreed channel; a rank alone needs none. */
    if (channel) atomic_fetch_add_explicit(&channels_reused, 1, memory_order_relaxed);
    c->chan = channel ? channel : mcoll__channel_private();
    if (!c->chan) ok = 0;
  }
  if (ok && agreed.any_new) {
    /* New channels where a node did not agree; every rank takes part in the split,
     * and all agree that each got its part. */
    int all_ok = 0;
    if (channel_build(c, members, c->id, !agreed.node_agreed) != MCOLL_OK) ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm);
    ok = all_ok;
  }
  /* Inter-node phases run among some ranks only, so their communicator is made
   * now; every rank knows the node count alike. */
  if (ok && c->topo.nnodes > 1 && mcoll__context_p2p(c) != MPI_SUCCESS) ok = 0;
  /* A context of its own keeps its channel to itself too (as identical_context):
   * another context on it would fail its first non-blocking call's agreement. */
  if (ok && alone && c->chan) c->chan->exclusive = 1;
  if (!ok && mcoll__cfg.VERBOSE) fprintf(stderr, "mcoll: rank %d: context set-up failed\n", c->rank);
  free(members);
  c->usable = ok;
  if (!ok) {
    /* Every call falls back: hold no communicator (context id) or segment for it. */
    mcoll__channel_release(c->chan);
    c->chan = NULL;
    mcoll__topo_free(&c->topo);
    if (c->p2p != MPI_COMM_NULL) PMPI_Comm_free(&c->p2p);
  }
  return c;
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
static struct mcoll_comm *context_build(MPI_Comm comm, int alone) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  struct mcoll_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL; /* (an intercommunicator or no memory: the call falls back) */
  c->comm = comm;
  c->inter = inter;
  c->private_ctx = alone;
  c->group = MPI_GROUP_NULL;
  c->p2p = MPI_COMM_NULL;
  PMPI_Comm_rank(comm, &c->rank);
  PMPI_Comm_size(comm, &c->size);
  if (!inter) {
    PMPI_Comm_group(comm, &c->group);
    struct mcoll_comm *found = !alone && sharing_allowed() ? identical_context(c->group) : NULL;
    struct mcoll_comm *shared = context_setup(c, found, alone);
    if (shared != c) {
      PMPI_Group_free(&c->group);
      mcoll__topo_free(&c->topo);
      free(c);
      pthread_mutex_lock(&live_lock);
      int ok = context_add_user(shared, comm);
      pthread_mutex_unlock(&live_lock);
      atomic_fetch_add_explicit(&contexts_shared, 1, memory_order_relaxed);
      return ok ? shared : NULL;
    }
  }
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

/* Communicators whose ranks agreed, at a non-blocking call, that they need a context
 * and channels of their own to run tasks: made at their next blocking collective
 * (where set-up may block), at the same point on every rank. Few and short-lived. */
static pthread_mutex_t wish_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Comm *wishes;
static int nwishes, wishes_cap;
static atomic_int any_wish;

/* comm's place among the wishes, or -1. Under wish_lock. */
static int wish_index(MPI_Comm comm) {
  for (int i = 0; i < nwishes; i++)
    if (wishes[i] == comm) return i;
  return -1;
}

void mcoll__context_wish_own(MPI_Comm comm) {
  pthread_mutex_lock(&wish_lock);
  int known = wish_index(comm) >= 0;
  if (!known && nwishes == wishes_cap) {
    int cap = wishes_cap ? 2 * wishes_cap : 4;
    MPI_Comm *grown = realloc(wishes, sizeof *grown * (size_t)cap);
    if (grown) {
      wishes = grown;
      wishes_cap = cap;
    }
  }
  if (!known && nwishes < wishes_cap) wishes[nwishes++] = comm;
  atomic_store(&any_wish, nwishes > 0);
  pthread_mutex_unlock(&wish_lock);
}

/* 1 if comm wished for its own context; take: the wish is dropped. */
static int wish_find(MPI_Comm comm, int take) {
  if (!atomic_load_explicit(&any_wish, memory_order_relaxed)) return 0;
  pthread_mutex_lock(&wish_lock);
  int i = wish_index(comm);
  if (i >= 0 && take) {
    wishes[i] = wishes[--nwishes];
    atomic_store(&any_wish, nwishes > 0);
  }
  pthread_mutex_unlock(&wish_lock);
  return i >= 0;
}

void mcoll__context_forget(MPI_Comm comm) { wish_find(comm, 1); }

int mcoll__context_wished(MPI_Comm comm) { return wish_find(comm, 0); }

struct mcoll_comm *mcoll__comm_get(MPI_Comm comm, enum mcoll_fallback_reason *why) {
  struct mcoll_comm *c = NULL;
  int found = 0;
  unsigned epoch = atomic_load_explicit(&context_epoch, memory_order_acquire);
  if (last_lookup.c && last_lookup.comm == comm && last_lookup.epoch == epoch &&
      !atomic_load_explicit(&any_wish, memory_order_relaxed)) {
    note_comm(last_lookup.c, comm);
    return last_lookup.c;
  }
  int keyval = atomic_load_explicit(&context_keyval, memory_order_acquire);
  if (keyval == MPI_KEYVAL_INVALID) keyval = context_keyval_create();
  if (keyval == MPI_KEYVAL_INVALID) {
    *why = MCOLL_WHY_NO_CONTEXT;
    return NULL;
  }
  PMPI_Comm_get_attr(comm, keyval, &c, &found);
  int alone = wish_find(comm, 1);
  if (found && alone) {
    /* Leave the shared context (or channel) for one of its own (see wish_own). */
    PMPI_Comm_delete_attr(comm, keyval);
    found = 0;
  }
  if (!found) {
    c = context_build(comm, alone);
    if (!c) {
      *why = MCOLL_WHY_NO_CONTEXT;
      return NULL;
    }
    PMPI_Comm_set_attr(comm, keyval, c);
  }
  if (c->usable) {
    note_comm(c, comm);
    last_lookup.comm = comm;
    last_lookup.c = c;
    last_lookup.epoch = epoch;
    return c;
  }
  *why = c->inter ? MCOLL_WHY_INTERCOMM : MCOLL_WHY_NO_CONTEXT;
  return NULL;
}

struct mcoll_comm *mcoll__comm_peek(MPI_Comm comm) {
  if (last_lookup.c && last_lookup.comm == comm &&
      last_lookup.epoch == atomic_load_explicit(&context_epoch, memory_order_acquire))
    return last_lookup.c;
  return NULL;
}

struct mcoll_comm *mcoll__comm_find(MPI_Comm comm, int *exists) {
  unsigned epoch = atomic_load_explicit(&context_epoch, memory_order_acquire);
  *exists = 1;
  if (last_lookup.c && last_lookup.comm == comm && last_lookup.epoch == epoch) {
    note_comm(last_lookup.c, comm);
    return last_lookup.c;
  }
  int keyval = atomic_load_explicit(&context_keyval, memory_order_acquire), found = 0;
  struct mcoll_comm *c = NULL;
  if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_get_attr(comm, keyval, &c, &found);
  *exists = found;
  if (!found || !c->usable) return NULL;
  note_comm(c, comm);
  last_lookup.comm = comm;
  last_lookup.c = c;
  last_lookup.epoch = epoch;
  return c;
}

int mcoll__context_nbc_candidate(const struct mcoll_comm *c) {
  pthread_mutex_lock(&live_lock);
  int alone = c->nusers == 1;
  pthread_mutex_unlock(&live_lock);
  return alone && (!c->chan || c->chan->users == 1);
}

void mcoll__context_set_nbc(struct mcoll_comm *c, int yes) {
  c->nbc = yes ? MCOLL_NBC_YES : MCOLL_NBC_NO;
  if (yes && c->chan) c->chan->exclusive = 1;
}

int mcoll__context_p2p(struct mcoll_comm *c) {
  if (c->p2p != MPI_COMM_NULL) return MPI_SUCCESS;
  int err = mcoll__host_comm_dup(c->comm, &c->p2p); /* (in a task: MPI_Comm_idup) */
  /* Errors of mcoll's own point-to-point come back to the collective that caused them. */
  if (err == MPI_SUCCESS) PMPI_Comm_set_errhandler(c->p2p, MPI_ERRORS_RETURN);
  return err;
}

void mcoll__context_report(FILE *out) {
  fprintf(out, "mcoll: contexts built=%lu shared=%lu channels made=%lu reused=%lu\n",
          atomic_load(&contexts_built), atomic_load(&contexts_shared), mcoll__channels_made(),
          atomic_load(&channels_reused));
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
  mcoll__channel_free_all();
}
