/* The hierarchy of a communicator: nodes, and inside a node a list of levels
 * (shared cache, NUMA domain, socket), finest first. Levels are data: the
 * algorithms walk them and need no code per level. */
#ifndef MCOLL_TOPO_H
#define MCOLL_TOPO_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

#define MCOLL_MAX_LEVELS 4

struct mcoll_level {
  char name[16];  /* "L3", "numa", "socket"; "fake-" prefixed when overridden */
  int ngroups;
  int *group_of;  /* [local_size] group of each node-local rank */
  int *leader_of; /* [ngroups] node-local rank leading each group (its lowest) */
  int numa;       /* groups are real NUMA domains: memory can be bound to them */
};

struct mcoll_topo {
  int nnodes, node;      /* node count, this rank's node index */
  int *node_of;          /* [comm size] node index of each rank */
  int *node_leader;      /* [nnodes] lowest comm rank of each node */
  int *node_size;        /* [nnodes] */
  int local_rank, local_size;
  int *local_ranks;      /* [local_size] comm rank of each node-local rank, ascending */
  int real_node_size;    /* ranks of the communicator on this machine (for oversubscription) */
  int kernel_size;       /* ranks of the communicator on this kernel, whatever their node */
  int nlevels;
  struct mcoll_level level[MCOLL_MAX_LEVELS];
  int barrier_parent;    /* node-local rank this rank reports to; -1 at the node leader */
  int nchildren;
  int *children;         /* node-local ranks reporting to this rank, finest level first */
};

/* Collective over MPI_COMM_WORLD (MPI_Init): gathers every world rank's place. */
void mcoll__topo_world_init(void);
void mcoll__topo_world_free(void);
/* After mcoll__topo_world_init: whether the world's ranks on this kernel (test hosts
 * included, which share its cores) outnumber its cores; 0 when not known. */
int mcoll__topo_world_cores_shared(void);
/* After mcoll__topo_world_init, the same answer on every rank: whether the world's
 * ranks on some kernel outnumber that machine's cores (*ranks, *cores: the kernel
 * that exceeds them most); 0 when not known. */
int mcoll__topo_world_any_cores_shared(int *ranks, int *cores);

/* The hierarchy of comm. Collective over comm, but it communicates only when some
 * rank of comm is not a world process (*communicated says which; alike on every rank). */
mcoll_status mcoll__topo_build(MPI_Comm comm, struct mcoll_topo *topo, int *communicated);
void mcoll__topo_free(struct mcoll_topo *topo);
/* Whether ranks of other nodes run on this rank's kernel, with more ranks on it than
 * cores (test hosts, MCOLL_TOPO's fake nodes): a step between nodes then waits for a
 * core as well as for the wire. */
int mcoll__topo_nodes_share_cores(const struct mcoll_topo *topo);
void mcoll__topo_print(const struct mcoll_topo *topo, FILE *out);

/* Bytes of the last-level cache (0 if unknown); *sharing: CPUs that share it. */
size_t mcoll__llc_bytes(int *sharing);

/* Number of real NUMA domains of the machine (1 if unknown). */
int mcoll__numa_count(void);
/* Binds [addr, addr+len) to NUMA domain `index` (mod the count); best effort. */
void mcoll__numa_bind(void *addr, size_t len, int index);

#endif
