/* Hierarchy discovery: the node from MPI_COMM_TYPE_SHARED, levels inside it from
 * hwloc (where each rank is bound), or a fake hierarchy from MCOLL_TOPO. */
#include "topo/topo.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

enum { LEVEL_L3, LEVEL_NUMA, LEVEL_SOCKET, NLEVEL_KINDS };
static const char *const level_names[NLEVEL_KINDS] = {"L3", "numa", "socket"};

/* Where this process sits; computed once per process. -1: unknown. */
struct placement {
  int fake_node;          /* -1 without MCOLL_TOPO nodes= */
  int fake;               /* level ids come from MCOLL_TOPO */
  int id[NLEVEL_KINDS];
};

static hwloc_topology_t machine;
static int machine_numa_count = 1;
static struct placement self_placement;
static pthread_once_t placement_once = PTHREAD_ONCE_INIT;

static int topo_option(const char *spec, const char *key) {
  const char *hit = spec ? strstr(spec, key) : NULL;
  if (!hit) return 0;
  int value = atoi(hit + strlen(key));
  return value > 0 ? value : 0;
}

/* Blocks of consecutive world ranks: item i of n items in `parts` parts. */
static int block_of(int i, int n, int parts) { return (int)((long)i * parts / n); }
static int block_first(int part, int n, int parts) {
  return (int)(((long)part * n + parts - 1) / parts);
}

static int hwloc_id(hwloc_obj_t covering, hwloc_obj_type_t type) {
  hwloc_obj_t obj = covering;
  while (obj && obj->type != type) obj = obj->parent;
  return obj ? (int)obj->logical_index : -1;
}

static void discover_placement(void) {
  struct placement *p = &self_placement;
  for (int k = 0; k < NLEVEL_KINDS; k++) p->id[k] = -1;
  p->fake_node = -1;

  if (hwloc_topology_init(&machine) == 0 && hwloc_topology_load(machine) == 0) {
    machine_numa_count = hwloc_get_nbobjs_by_type(machine, HWLOC_OBJ_NUMANODE);
    if (machine_numa_count < 1) machine_numa_count = 1;
    hwloc_cpuset_t set = hwloc_bitmap_alloc();
    if (set && hwloc_get_cpubind(machine, set, HWLOC_CPUBIND_PROCESS) == 0) {
      hwloc_obj_t covering = hwloc_get_obj_covering_cpuset(machine, set);
      if (covering) {
        p->id[LEVEL_L3] = hwloc_id(covering, HWLOC_OBJ_L3CACHE);
        p->id[LEVEL_SOCKET] = hwloc_id(covering, HWLOC_OBJ_PACKAGE);
        if (covering->nodeset && hwloc_bitmap_weight(covering->nodeset) == 1)
          p->id[LEVEL_NUMA] = hwloc_bitmap_first(covering->nodeset);
      }
    }
    hwloc_bitmap_free(set);
  } else {
    machine = NULL;
  }

  const char *spec = mcoll__cfg.TOPO;
  int nodes = topo_option(spec, "nodes="), sockets = topo_option(spec, "sockets=");
  int numas = topo_option(spec, "numa=");
  if (!nodes && !sockets && !numas) return;

  int world_rank, world_size;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (nodes > world_size) nodes = world_size;
  if (nodes < 1) nodes = 1;
  p->fake_node = block_of(world_rank, world_size, nodes);
  int first = block_first(p->fake_node, world_size, nodes);
  int node_size = block_first(p->fake_node + 1, world_size, nodes) - first;
  int index = world_rank - first;
  if (sockets < 1) sockets = 1;
  if (numas < 1) numas = 1;
  int socket = block_of(index, node_size, sockets);
  int socket_first = block_first(socket, node_size, sockets);
  int socket_size = block_first(socket + 1, node_size, sockets) - socket_first;
  p->fake = 1;
  p->id[LEVEL_SOCKET] = socket;
  p->id[LEVEL_NUMA] =
      numas > 1 ? socket * numas + block_of(index - socket_first, socket_size, numas) : -1;
  p->id[LEVEL_L3] = -1; /* a fake hierarchy has no cache level */
}

int mcoll__numa_count(void) {
  pthread_once(&placement_once, discover_placement);
  return machine_numa_count;
}

size_t mcoll__llc_bytes(int *sharing) {
  pthread_once(&placement_once, discover_placement);
  if (!machine) return 0;
  /* From the root down, the first cache met is the outermost one. */
  for (int depth = 0; depth < hwloc_topology_get_depth(machine); depth++) {
    hwloc_obj_t obj = hwloc_get_obj_by_depth(machine, depth, 0);
    if (!obj || !hwloc_obj_type_is_cache(obj->type)) continue;
    *sharing = hwloc_bitmap_weight(obj->cpuset);
    return (size_t)obj->attr->cache.size;
  }
  return 0;
}

void mcoll__numa_bind(void *addr, size_t len, int index) {
  if (!machine || machine_numa_count < 2) return;
  hwloc_obj_t numa = hwloc_get_obj_by_type(machine, HWLOC_OBJ_NUMANODE,
                                           (unsigned)(index % machine_numa_count));
  if (numa)
    hwloc_set_area_membind(machine, addr, len, numa->nodeset, HWLOC_MEMBIND_BIND,
                           HWLOC_MEMBIND_BYNODESET);
}

/* Groups node-local ranks by id; returns 0 if the level says nothing new. */
static int build_level(struct mcoll_topo *t, const int *ids, int kind, int fake,
                       struct mcoll_level *level) {
  int n = t->local_size;
  for (int r = 0; r < n; r++)
    if (ids[r] < 0) return 0;
  level->group_of = malloc(sizeof(int) * n);
  level->leader_of = malloc(sizeof(int) * n);
  if (!level->group_of || !level->leader_of) return 0;
  level->ngroups = 0;
  for (int r = 0; r < n; r++) {
    int g = 0;
    while (g < level->ngroups && ids[level->leader_of[g]] != ids[r]) g++;
    if (g == level->ngroups) level->leader_of[level->ngroups++] = r;
    level->group_of[r] = g;
  }
  snprintf(level->name, sizeof level->name, "%s%s", fake ? "fake-" : "", level_names[kind]);
  level->numa = (kind == LEVEL_NUMA && !fake);
  if (level->ngroups == 1 || level->ngroups == n) return 0; /* same as the node, or no sharing */
  if (t->nlevels > 0) {
    const struct mcoll_level *finer = &t->level[t->nlevels - 1];
    if (finer->ngroups == level->ngroups &&
        !memcmp(finer->group_of, level->group_of, sizeof(int) * n))
      return 0; /* same members as the level below */
  }
  return 1;
}

/* The barrier tree: a rank reports to the leader of its group at the finest level
 * where it does not lead, else to the node leader. Leaders are the lowest ranks, so
 * a parent always has a lower local rank and this is a tree rooted at local rank 0. */
static mcoll_status build_tree(struct mcoll_topo *t) {
  int n = t->local_size;
  int *parent = malloc(sizeof(int) * n);
  int *level_of = malloc(sizeof(int) * n);
  t->children = malloc(sizeof(int) * (n > 0 ? n : 1));
  if (!parent || !level_of || !t->children) {
    free(parent);
    free(level_of);
    return MCOLL_ERR_NOMEM;
  }
  for (int r = 0; r < n; r++) {
    parent[r] = r == 0 ? -1 : 0;
    level_of[r] = t->nlevels;
    for (int l = 0; l < t->nlevels && r != 0; l++) {
      int lead = t->level[l].leader_of[t->level[l].group_of[r]];
      if (lead != r) {
        parent[r] = lead;
        level_of[r] = l;
        break;
      }
    }
  }
  t->barrier_parent = parent[t->local_rank];
  t->nchildren = 0;
  for (int l = 0; l <= t->nlevels; l++)
    for (int r = 0; r < n; r++)
      if (parent[r] == t->local_rank && level_of[r] == l) t->children[t->nchildren++] = r;
  free(parent);
  free(level_of);
  return MCOLL_OK;
}

mcoll_status mcoll__topo_build(MPI_Comm comm, struct mcoll_topo *t) {
  mcoll_status status = MCOLL_OK;
  int rank, size;
  MPI_Comm real_node = MPI_COMM_NULL;
  int *ids = NULL, *leaders = NULL;
  memset(t, 0, sizeof *t);
  t->node_comm = MPI_COMM_NULL;
  pthread_once(&placement_once, discover_placement);
  const struct placement *self = &self_placement;

  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  MCOLL_CHECK_MPI(PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &real_node));
  PMPI_Comm_size(real_node, &t->real_node_size);
  if (self->fake_node >= 0) {
    MCOLL_CHECK_MPI(PMPI_Comm_split(real_node, self->fake_node, rank, &t->node_comm));
  } else {
    /* The real node is the node: no second communicator (each costs a context id). */
    t->node_comm = real_node;
    real_node = MPI_COMM_NULL;
  }
  PMPI_Comm_rank(t->node_comm, &t->local_rank);
  PMPI_Comm_size(t->node_comm, &t->local_size);

  t->local_ranks = malloc(sizeof(int) * t->local_size);
  t->node_of = malloc(sizeof(int) * size);
  leaders = malloc(sizeof(int) * size);
  ids = malloc(sizeof(int) * NLEVEL_KINDS * t->local_size);
  if (!t->local_ranks || !t->node_of || !leaders || !ids) MCOLL_CHECK(MCOLL_ERR_NOMEM);
  MCOLL_CHECK_MPI(PMPI_Allgather(&rank, 1, MPI_INT, t->local_ranks, 1, MPI_INT, t->node_comm));
  MCOLL_CHECK_MPI(PMPI_Allgather(&t->local_ranks[0], 1, MPI_INT, leaders, 1, MPI_INT, comm));

  /* Nodes are numbered by their lowest rank. */
  t->node_leader = malloc(sizeof(int) * size);
  t->node_size = calloc((size_t)size, sizeof(int));
  if (!t->node_leader || !t->node_size) MCOLL_CHECK(MCOLL_ERR_NOMEM);
  for (int r = 0; r < size; r++) {
    if (leaders[r] == r) t->node_leader[t->nnodes++] = r;
    int node = 0;
    while (t->node_leader[node] != leaders[r]) node++;
    t->node_of[r] = node;
    t->node_size[node]++;
  }
  t->node = t->node_of[rank];

  /* Levels inside the node, finest first. */
  int mine[NLEVEL_KINDS];
  memcpy(mine, self->id, sizeof mine);
  MCOLL_CHECK_MPI(PMPI_Allgather(mine, NLEVEL_KINDS, MPI_INT, ids, NLEVEL_KINDS, MPI_INT,
                                 t->node_comm));
  for (int kind = 0; kind < NLEVEL_KINDS && t->nlevels < MCOLL_MAX_LEVELS; kind++) {
    int *column = leaders; /* reuse: local_size <= size */
    for (int r = 0; r < t->local_size; r++) column[r] = ids[r * NLEVEL_KINDS + kind];
    struct mcoll_level *level = &t->level[t->nlevels];
    if (build_level(t, column, kind, self->fake, level)) {
      t->nlevels++;
    } else {
      free(level->group_of);
      free(level->leader_of);
      memset(level, 0, sizeof *level);
    }
  }
  MCOLL_CHECK(build_tree(t));

cleanup:
  if (real_node != MPI_COMM_NULL) PMPI_Comm_free(&real_node);
  free(ids);
  free(leaders);
  if (status != MCOLL_OK) mcoll__topo_free(t);
  return status;
}

void mcoll__topo_free(struct mcoll_topo *t) {
  for (int l = 0; l < MCOLL_MAX_LEVELS; l++) {
    free(t->level[l].group_of);
    free(t->level[l].leader_of);
  }
  free(t->node_of);
  free(t->node_leader);
  free(t->node_size);
  free(t->local_ranks);
  free(t->children);
  if (t->node_comm != MPI_COMM_NULL) PMPI_Comm_free(&t->node_comm);
  memset(t, 0, sizeof *t);
  t->node_comm = MPI_COMM_NULL;
}

void mcoll__topo_print(const struct mcoll_topo *t, FILE *out) {
  if (t->node == 0) {
    fprintf(out, "hierarchy: %d node(s)", t->nnodes);
    for (int n = 0; n < t->nnodes; n++)
      fprintf(out, "%s%d rank(s) from rank %d", n ? ", " : " [", t->node_size[n],
              t->node_leader[n]);
    fprintf(out, "]; machine NUMA domains: %d\n", machine_numa_count);
  }
  fprintf(out, "  node of rank %d: %d rank(s)", t->local_ranks[0], t->local_size);
  if (t->nlevels == 0) fprintf(out, ", no level inside it (all share one cache/NUMA/socket, or unbound)");
  fprintf(out, "\n");
  for (int l = 0; l < t->nlevels; l++) {
    const struct mcoll_level *level = &t->level[l];
    fprintf(out, "  level %d %-12s %d group(s):", l, level->name, level->ngroups);
    for (int g = 0; g < level->ngroups; g++) {
      fprintf(out, " {");
      for (int r = 0, first = 1; r < t->local_size; r++)
        if (level->group_of[r] == g) {
          fprintf(out, first ? "%d" : " %d", t->local_ranks[r]);
          first = 0;
        }
      fprintf(out, "}");
    }
    fprintf(out, "\n");
  }
}
