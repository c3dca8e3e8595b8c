/* Per-communicator context: built on first use, cached on an attribute whose
 * delete callback frees it (MPI_Comm_free, MPI_Finalize). */
#ifndef MCOLL_CONTEXT_H
#define MCOLL_CONTEXT_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "core/fallback.h"
#include "shm/channel.h"
#include "topo/topo.h"

enum { MCOLL_CHOICE_SLOTS = 24 };

/* One context may serve several communicators: a communicator whose group is
 * identical (same processes, same order) to that of a live context shares it, when
 * only one thread per process makes MPI calls (see context.c). Contexts whose nodes
 * hold the same processes in the same order share a channel likewise. */
struct mcoll_comm {
  MPI_Comm comm;        /* the communicator of the latest call (set by mcoll__comm_get) */
  int rank, size;
  int inter;            /* intercommunicator: every call falls back */
  int usable;           /* 0: set-up failed on some rank, every call falls back */
  int private_ctx;      /* built for one communicator, sharing nothing (wish_own) */
  MPI_Comm p2p;         /* private duplicate for mcoll's own point-to-point: made at set-up
                         * when there are several nodes, else by mcoll__context_p2p */
  struct mcoll_topo topo;
  struct mcoll_channel *chan; /* the node's segment and protocol counters (shm/channel.h) */
  /* Sharing (context.c): the group, an id every rank of the group agrees on, and the
   * communicators whose attribute points here. */
  MPI_Group group;
  unsigned id;
  MPI_Comm *users;
  int nusers, users_cap;
  struct mcoll_comm *prev, *next;
  /* Non-blocking calls (pmpi/wrap.h): agreed by the ranks at the first one whether
   * this context serves this communicator alone, on channels of its own; then no
   * other communicator may share it or them, and its calls run as tasks. */
  enum { MCOLL_NBC_UNKNOWN, MCOLL_NBC_YES, MCOLL_NBC_NO } nbc;
  unsigned tasks_entered; /* its calls that ran as tasks: each one's number (task/task.h) */
  unsigned first_arrival_calls; /* bcasts by first_arrival (their parity: bcast_inter.c) */
  /* Choices that depend only on the communicator and the parameters, made at a
   * collective's first call and kept (coll/ numbers the slots): a slot is valid while
   * its epoch is the parameters' (mcoll__cfg.epoch). */
  struct mcoll_choice {
    unsigned epoch;
    size_t value;
  } choice[MCOLL_CHOICE_SLOTS];
  /* The adaptive choice's size classes per collective (coll/adapt.h), NULL until its
   * first blocking call. */
  struct mcoll_adapt_coll *adapt[MCOLL_CHOICE_SLOTS];
  /* A small call's choice per collective once made (coll/settled.h): what a call of
   * the same key (its size) runs and counts while the parameters' epoch holds. */
  struct mcoll_settled {
    unsigned epoch, forced_epoch; /* (coll/registry.h: mcoll__forced_epoch) */
    size_t key;
    int alg, counted; /* the choice passed down, and the algorithm counted */
    size_t value;     /* a threshold of the choice */
    size_t facet;     /* another fact the choice depends on, as part of the key */
  } settled[MCOLL_CHOICE_SLOTS];
};

/* The context to run mcoll on, or NULL with *why set: then the caller falls back. */
struct mcoll_comm *mcoll__comm_get(MPI_Comm comm, enum mcoll_fallback_reason *why);

/* The context of comm if it has a usable one already (never builds one: inside a
 * task, where building would block), else NULL; *exists: comm has one, usable or not. */
struct mcoll_comm *mcoll__comm_find(MPI_Comm comm, int *exists);
/* The context this thread looked up last, if it was comm's and is still valid (no
 * call of the host MPI), else NULL. */
struct mcoll_comm *mcoll__comm_peek(MPI_Comm comm);

/* Whether c could run non-blocking calls as tasks, as this rank sees it: it serves
 * comm alone, and so does its channel. The ranks agree on it before
 * mcoll__context_set_nbc. */
int mcoll__context_nbc_candidate(const struct mcoll_comm *c);
void mcoll__context_set_nbc(struct mcoll_comm *c, int yes);

/* comm's ranks agreed (at a non-blocking call) that it should have a context and
 * channels of its own: its next mcoll__comm_get builds them. Forget: comm is freed. */
void mcoll__context_wish_own(MPI_Comm comm);
void mcoll__context_forget(MPI_Comm comm);
/* Whether comm wished so and has not had its new context yet. */
int mcoll__context_wished(MPI_Comm comm);

/* Makes c->p2p if it does not exist yet: collective over the calling communicator,
 * for algorithms in which every rank takes part (all ranks of a call run the same
 * algorithm). */
int mcoll__context_p2p(struct mcoll_comm *c);

/* Prints how many contexts were built and how many communicators shared one. */
void mcoll__context_report(FILE *out);

/* Frees every context still alive (MPI_Finalize). */
void mcoll__comm_free_all(void);

static inline int mcoll__node_has_peers(const struct mcoll_comm *c) {
  return c->topo.local_size > 1;
}

#endif
