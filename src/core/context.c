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

static void context_destroy(struct mcoll_comm *c) {
  pthread_mutex_lock(&live_lock);
  if (c->prev) c->prev->next = c->next;
  else if (live_contexts == c) live_contexts = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&live_lock);
  mcoll__shm_detach(&c->shm);
  mcoll__topo_free(&c->topo);
  if (c->p2p != MPI_COMM_NULL) PMPI_Comm_free(&c->p2p);
  free(c->cma_ready);
  free(c);
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
  (void)comm, (void)keyval, (void)extra;
  atomic_fetch_add_explicit(&context_epoch, 1, memory_order_release);
  context_destroy(attr);
  return MPI_SUCCESS;
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
    c = calloc(1, sizeof *c);
    if (!c) {
      *why = MCOLL_WHY_NO_CONTEXT;
      return NULL;
    }
    c->comm = comm;
    c->p2p = MPI_COMM_NULL;
    c->topo.node_comm = MPI_COMM_NULL;
    PMPI_Comm_rank(comm, &c->rank);
    PMPI_Comm_size(comm, &c->size);
    PMPI_Comm_test_inter(comm, &c->inter);
    if (!c->inter) context_setup(c);
    pthread_mutex_lock(&live_lock);
    c->next = live_contexts;
    if (live_contexts) live_contexts->prev = c;
    live_contexts = c;
    pthread_mutex_unlock(&live_lock);
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

void mcoll__comm_free_all(void) {
  while (live_contexts) {
    struct mcoll_comm *c = live_contexts;
    /* Deleting the attribute runs context_delete, which unlinks c. */
    if (PMPI_Comm_delete_attr(c->comm, context_keyval) != MPI_SUCCESS) context_destroy(c);
  }
  int keyval = atomic_exchange(&context_keyval, MPI_KEYVAL_INVALID);
  if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&keyval);
}
