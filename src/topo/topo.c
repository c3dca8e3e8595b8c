/* Hierarchy discovery: the node from the machine each rank runs on (kernel,
 * hostname and /dev/shm), levels inside it from hwloc (where each rank is bound), or
 * a fake hierarchy from MCOLL_TOPO. Every world rank's place is gathered once
 * (MPI_Init); a communicator's hierarchy is then derived from its group without
 * communicating. */
#include "topo/topo.h"

#include <hwloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"

enum { LEVEL_L3, LEVEL_NUMA, LEVEL_SOCKET, NLEVEL_KINDS };
static const char *const level_names[NLEVEL_KINDS] = {"L3", "numa", "socket"};

/* Where this process sits; computed once per process. -1: unknown. */
struct placement {
  int kernel;             /* a hash of the running kernel's boot id, 0 if unknown */
  unsigned machine[2];    /* a hash of the boot id, hostname and /dev/shm's device */
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

/* Network namespaces (test hosts) and containers are separate nodes to the host MPI
 * but run on one kernel, and so share its cores: the boot id tells. */
static size_t read_boot_id(char id[64]) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return 0;
  size_t n = fread(id, 1, 63, f);
  fclose(f);
  return n;
}

static int kernel_id(void) {
  char id[64] = {0};
  size_t n = read_boot_id(id);
  unsigned h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)id[i]) * 16777619u;
  return n ? (int)(h & 0x7fffffff) | 1 : 0;
}

static void fnv64(unsigned long long *h, const void *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) *h = (*h ^ ((const unsigned char *)bytes)[i]) * 1099511628211ull;
}

/* Ranks share memory when they run on one kernel and see one /dev/shm (a tmpfs
 * mount has a device number of its own); the hostname keeps apart what the host
 * MPI takes for separate nodes (a container or test host with its own UTS name).
 * This asks no collective of the host (MPI_COMM_TYPE_SHARED: a split, slow at
 * start-up on an oversubscribed MPICH). */
static void machine_key(unsigned key[2]) {
  unsigned long long h = 14695981039346656037ull;
  char id[64] = {0}, host[256] = {0};
  fnv64(&h, id, read_boot_id(id));
  if (gethostname(host, sizeof host - 1) == 0) fnv64(&h, host, strlen(host));
  struct stat shm;
  if (stat("/dev/shm", &shm) == 0) fnv64(&h, &shm.st_dev, sizeof shm.st_dev);
  key[0] = (unsigned)h;
  key[1] = (unsigned)(h >> 32);
}

static void discover_placement(void) {
  struct placement *p = &self_placement;
  for (int k = 0; k < NLEVEL_KINDS; k++) p->id[k] = -1;
  p->fake_node = -1;
  p->kernel = kernel_id();
  machine_key(p->machine);

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
  int *parent = calloc((size_t)n + 1, sizeof(int));
  int *level_of = calloc((size_t)n + 1, sizeof(int));
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

/* What the hierarchy needs to know of one rank. */
struct rank_place {
  int machine;      /* the lowest rank (of the communicator it was found in) on its machine */
  unsigned key[2];  /* struct placement's machine */
  int kernel;       /* struct placement's */
  int cores;        /* the cores this rank counts on its machine (MCOLL_CORES or online) */
  int fake_node;    /* -1 without MCOLL_TOPO nodes= */
  int id[NLEVEL_KINDS];
};

/* Every world rank's place, gathered once at MPI_Init, so that a communicator of
 * world processes finds its hierarchy without communicating. NULL: not known. */
static struct rank_place *world_places;
static int world_size_known;

/* (qsort passes no argument to its comparison) */
static _Thread_local const struct rank_place *by_key_places;

/* Ranks ordered by machine, then by rank. */
static int by_key(const void *a, const void *b) {
  const struct rank_place *x = &by_key_places[*(const int *)a], *y = &by_key_places[*(const int *)b];
  for (int i = 0; i < 2; i++)
    if (x->key[i] != y->key[i]) return x->key[i] < y->key[i] ? -1 : 1;
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static long own_cores(void) {
  return mcoll__cfg.CORES > 0 ? mcoll__cfg.CORES : sysconf(_SC_NPROCESSORS_ONLN);
}

/* Collective over comm: the place of every rank of comm. */
static mcoll_status gather_places(MPI_Comm comm, struct rank_place *places) {
  mcoll_status status = MCOLL_OK;
  int rank, size;
  pthread_once(&placement_once, discover_placement);
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  struct rank_place mine = {.machine = rank, .kernel = self_placement.kernel,
                            .cores = (int)own_cores(), .fake_node = self_placement.fake_node};
  memcpy(mine.key, self_placement.machine, sizeof mine.key);
  memcpy(mine.id, self_placement.id, sizeof mine.id);
  int *order = malloc(sizeof *order * (size_t)size);
  MCOLL_CHECK_MPI(PMPI_Allgather(&mine, sizeof mine / sizeof(int), MPI_INT, places,
                                 sizeof mine / sizeof(int), MPI_INT, comm));
  /* (every rank computes the same table; one that cannot fails the whole set-up) */
  if (!order) MCOLL_CHECK(MCOLL_ERR_NOMEM);
  for (int r = 0; r < size; r++) order[r] = r;
  by_key_places = places;
  qsort(order, (size_t)size, sizeof *order, by_key);
  for (int i = 0, first = 0; i < size; i++) {
    if (i == 0 || memcmp(places[order[i]].key, places[order[i - 1]].key, sizeof places->key))
      first = order[i];
    places[order[i]].machine = first; /* (the lowest rank of its machine) */
  }
cleanup:
  free(order);
  return status;
}

void mcoll__topo_world_init(void) {
  int size = 0, ok = 0, all_ok = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  struct rank_place *places = malloc(sizeof *places * (size_t)size);
  if (places) ok = gather_places(MPI_COMM_WORLD, places) == MCOLL_OK;
  /* All or none: a rank without the table would communicate where others do not. */
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    free(places);
    return;
  }
  world_places = places;
  world_size_known = size;
}

int mcoll__topo_world_cores_shared(void) {
  if (!world_places) return 0;
  int me = 0, on_kernel = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me < 0 || me >= world_size_known) return 0;
  for (int r = 0; r < world_size_known; r++)
    if (world_places[r].machine == world_places[me].machine ||
        (world_places[r].kernel && world_places[r].kernel == world_places[me].kernel))
      on_kernel++;
  return on_kernel > own_cores();
}

/* (qsort passes no argument to its comparison) */
static int by_key64(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return (x > y) - (x < y);
}

int mcoll__topo_world_any_cores_shared(int *ranks, int *cores) {
  *ranks = *cores = 0;
  int n = world_size_known, found = 0;
  if (!world_places || n <= 0) return 0;
  /* One key per kernel (the machine's lowest rank where the boot id is unknown),
   * the rank in the low bits: sorted, a kernel's ranks are one run. */
  unsigned long long *keys = malloc(sizeof *keys * (size_t)n);
  if (!keys) return 0;
  for (int r = 0; r < n; r++) {
    unsigned long long group = world_places[r].kernel
                                   ? (unsigned long long)world_places[r].kernel
                                   : (1ULL << 31) + (unsigned long long)world_places[r].machine;
    keys[r] = group << 32 | (unsigned long long)r;
  }
  qsort(keys, (size_t)n, sizeof *keys, by_key64);
  for (int i = 0; i < n;) {
    int j = i, least = INT_MAX;
    while (j < n && keys[j] >> 32 == keys[i] >> 32) {
      int c = world_places[keys[j] & 0xffffffffULL].cores;
      if (c > 0 && c < least) least = c;
      j++;
    }
    if (least != INT_MAX && j - i > least && (!found || j - i - least > *ranks - *cores)) {
      found = 1;
      *ranks = j - i;
      *cores = least;
    }
    i = j;
  }
  free(keys);
  return found;
}

void mcoll__topo_world_free(void) {
  free(world_places);
  world_places = NULL;
  world_size_known = 0;
}

/* The places of comm's ranks from the world table, or 0 when some rank of comm is
 * not a world process (or no table was made): the same answer on every rank. */
static int places_from_world(MPI_Comm comm, int size, struct rank_place *places) {
  if (!world_places) return 0;
  int ok = 0;
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  int *ranks = malloc(sizeof *ranks * (size_t)size), *in_world = malloc(sizeof *in_world * (size_t)size);
  if (ranks && in_world && PMPI_Comm_group(comm, &group) == MPI_SUCCESS &&
      PMPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
    for (int r = 0; r < size; r++) ranks[r] = r;
    if (PMPI_Group_translate_ranks(group, size, ranks, world, in_world) == MPI_SUCCESS) {
      ok = 1;
      for (int r = 0; r < size && ok; r++) {
        int w = in_world[r];
        if (w == MPI_UNDEFINED || w < 0 || w >= world_size_known) {
          ok = 0;
        } else {
          places[r] = world_places[w];
        }
      }
    }
  }
  if (group != MPI_GROUP_NULL) PMPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) PMPI_Group_free(&world);
  free(ranks);
  free(in_world);
  return ok;
}

static int same_node(const struct rank_place *a, const struct rank_place *b) {
  return a->machine == b->machine && a->fake_node == b->fake_node;
}

/* The hierarchy of rank `rank` from every rank's place: nodes are numbered by their
 * lowest rank, node-local ranks ascend with the rank. */
static mcoll_status topo_from_places(struct mcoll_topo *t, int rank, int size,
                                     const struct rank_place *places) {
  mcoll_status status = MCOLL_OK;
  int *ids = NULL;
  t->node_of = malloc(sizeof(int) * size);
  t->node_leader = malloc(sizeof(int) * size);
  t->node_size = calloc((size_t)size, sizeof(int));
  if (!t->node_of || !t->node_leader || !t->node_size) MCOLL_CHECK(MCOLL_ERR_NOMEM);
  for (int r = 0; r < size; r++) {
    int node = 0;
    while (node < t->nnodes && !same_node(&places[t->node_leader[node]], &places[r])) node++;
    if (node == t->nnodes) t->node_leader[t->nnodes++] = r;
    t->node_of[r] = node;
    t->node_size[node]++;
  }
  t->node = t->node_of[rank];
  t->local_size = t->node_size[t->node];
  t->local_ranks = malloc(sizeof(int) * t->local_size);
  ids = malloc(sizeof(int) * (size_t)t->local_size);
  if (!t->local_ranks || !ids) MCOLL_CHECK(MCOLL_ERR_NOMEM);
  t->real_node_size = t->kernel_size = 0;
  for (int r = 0, i = 0; r < size; r++) {
    if (places[r].machine == places[rank].machine) t->real_node_size++;
    if (places[r].machine == places[rank].machine ||
        (places[r].kernel && places[r].kernel == places[rank].kernel))
      t->kernel_size++;
    if (t->node_of[r] != t->node) continue;
    if (r == rank) t->local_rank = i;
    t->local_ranks[i++] = r;
  }

  /* Levels inside the node, finest first. */
  for (int kind = 0; kind < NLEVEL_KINDS && t->nlevels < MCOLL_MAX_LEVELS; kind++) {
    for (int i = 0; i < t->local_size; i++) ids[i] = places[t->local_ranks[i]].id[kind];
    struct mcoll_level *level = &t->level[t->nlevels];
    if (build_level(t, ids, kind, self_placement.fake, level)) {
      t->nlevels++;
    } else {
      free(level->group_of);
      free(level->leader_of);
      memset(level, 0, sizeof *level);
    }
  }
  MCOLL_CHECK(build_tree(t));
cleanup:
  free(ids);
  return status;
}

int mcoll__topo_nodes_share_cores(const struct mcoll_topo *t) {
  long cpus = mcoll__cfg.CORES > 0 ? mcoll__cfg.CORES : sysconf(_SC_NPROCESSORS_ONLN);
  return t->nnodes > 1 && t->kernel_size > t->local_size && t->kernel_size > cpus;
}

mcoll_status mcoll__topo_build(MPI_Comm comm, struct mcoll_topo *t, int *communicated) {
  mcoll_status status = MCOLL_OK;
  int rank, size;
  memset(t, 0, sizeof *t);
  pthread_once(&placement_once, discover_placement);
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  struct rank_place *places = malloc(sizeof *places * (size_t)size);
  if (!places) return MCOLL_ERR_NOMEM; /* (every rank allocates alike: small) */
  *communicated = !places_from_world(comm, size, places);
  if (*communicated) MCOLL_CHECK(gather_places(comm, places));
  MCOLL_CHECK(topo_from_places(t, rank, size, places));
cleanup:
  free(places);
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
  memset(t, 0, sizeof *t);
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
