/* Groups of thread ranks: local objects, an ordered list of world ranks, in a table of
 * the rank's own (like its communicators); the communicators made from them, and
 * those made by dup and split.
 * MPI_Comm_create agrees on a context over the whole parent; MPI_Comm_create_group only
 * among the group's members, which alone call it. */
#include <stdlib.h>
#include <string.h>

#include "handles.h"
#include "runtime.h"

struct thr_group {
  int size;
  int world[]; /* group rank -> world rank */
};

static const struct thr_group empty_group = {0};

static struct thr_group *group_of(struct thr_rank *r, MPI_Group handle)
{
  if (handle == MPI_GROUP_EMPTY)
    return (struct thr_group *)&empty_group;
  int index = thr_group_index(handle);
  if (index < 0 || index >= r->ngroups || !r->groups[index])
    thr_fatal("rank %d: invalid group " THR_HANDLE_FMT, r->world, THR_HANDLE_ARG(handle));
  return r->groups[index];
}

/* A new group of the n world ranks; MPI_GROUP_EMPTY when there are none. */
static MPI_Group new_group(struct thr_rank *r, int n, const int *world)
{
  if (n == 0)
    return MPI_GROUP_EMPTY;
  struct thr_group *g = thr_malloc(sizeof *g + (size_t)n * sizeof g->world[0]);
  g->size = n;
  memcpy(g->world, world, (size_t)n * sizeof *world);
  int index = -1;
  for (int i = 0; i < r->ngroups && index < 0; i++)
    if (!r->groups[i])
      index = i;
  if (index < 0) {
    int grown = r->ngroups ? 2 * r->ngroups : 16;
    r->groups = thr_realloc(r->groups, (size_t)grown * sizeof *r->groups);
    memset(r->groups + r->ngroups, 0, (size_t)(grown - r->ngroups) * sizeof *r->groups);
    index = r->ngroups;
    r->ngroups = grown;
  }
  r->groups[index] = g;
  return thr_group_handle(index);
}

/* The group rank of world rank w, or MPI_UNDEFINED. */
static int rank_in(const struct thr_group *g, int w)
{
  for (int i = 0; i < g->size; i++)
    if (g->world[i] == w)
      return i;
  return MPI_UNDEFINED;
}

static void check_rank(struct thr_rank *r, const struct thr_group *g, int rank)
{
  if (rank < 0 || rank >= g->size)
    thr_fatal("rank %d: rank %d is not in a group of %d", r->world, rank, g->size);
}

int thr_Comm_group(struct thr_rank *r, MPI_Comm comm, MPI_Group *group)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  *group = new_group(r, c->size, c->world);
  return MPI_SUCCESS;
}

int thr_Group_size(struct thr_rank *r, MPI_Group group, int *size)
{
  *size = group_of(r, group)->size;
  return MPI_SUCCESS;
}

int thr_Group_rank(struct thr_rank *r, MPI_Group group, int *rank)
{
  *rank = rank_in(group_of(r, group), r->world);
  return MPI_SUCCESS;
}

int thr_Group_incl(struct thr_rank *r, MPI_Group group, int n, const int ranks[], MPI_Group *out)
{
  struct thr_group *g = group_of(r, group);
  int *world = thr_malloc((size_t)(n > 0 ? n : 1) * sizeof *world);
  for (int i = 0; i < n; i++) {
    check_rank(r, g, ranks[i]);
    world[i] = g->world[ranks[i]];
  }
  *out = new_group(r, n, world);
  free(world);
  return MPI_SUCCESS;
}

/* The members whose flag is clear, in group order. */
static MPI_Group keep_unflagged(struct thr_rank *r, const struct thr_group *g, const char *flag)
{
  int *world = thr_malloc((size_t)(g->size > 0 ? g->size : 1) * sizeof *world), n = 0;
  for (int i = 0; i < g->size; i++)
    if (!flag[i])
      world[n++] = g->world[i];
  MPI_Group out = new_group(r, n, world);
  free(world);
  return out;
}

int thr_Group_excl(struct thr_rank *r, MPI_Group group, int n, const int ranks[], MPI_Group *out)
{
  struct thr_group *g = group_of(r, group);
  char *excluded = thr_calloc((size_t)g->size + 1, 1);
  for (int i = 0; i < n; i++) {
    check_rank(r, g, ranks[i]);
    excluded[ranks[i]] = 1;
  }
  *out = keep_unflagged(r, g, excluded);
  free(excluded);
  return MPI_SUCCESS;
}

/* The ranks of triplets (first, last, stride), in order; their number in *n. */
static int *expand_ranges(struct thr_rank *r, const struct thr_group *g, int nranges,
                          int ranges[][3], int *n)
{
  int total = 0;
  for (int i = 0; i < nranges; i++) {
    if (ranges[i][2] == 0)
      thr_fatal("rank %d: a group range of stride 0", r->world);
    int span = (ranges[i][1] - ranges[i][0]) / ranges[i][2];
    total += span >= 0 ? span + 1 : 0;
  }
  int *ranks = thr_malloc((size_t)(total > 0 ? total : 1) * sizeof *ranks);
  *n = 0;
  for (int i = 0; i < nranges; i++) {
    int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    for (int k = first; stride > 0 ? k <= last : k >= last; k += stride) {
      check_rank(r, g, k);
      ranks[(*n)++] = k;
    }
  }
  return ranks;
}

int thr_Group_range_incl(struct thr_rank *r, MPI_Group group, int n, int ranges[][3],
                         MPI_Group *out)
{
  int count, *ranks = expand_ranges(r, group_of(r, group), n, ranges, &count);
  thr_Group_incl(r, group, count, ranks, out);
  free(ranks);
  return MPI_SUCCESS;
}

int thr_Group_range_excl(struct thr_rank *r, MPI_Group group, int n, int ranges[][3],
                         MPI_Group *out)
{
  int count, *ranks = expand_ranges(r, group_of(r, group), n, ranges, &count);
  thr_Group_excl(r, group, count, ranks, out);
  free(ranks);
  return MPI_SUCCESS;
}

int thr_Group_translate_ranks(struct thr_rank *r, MPI_Group a, int n, const int ranks_a[],
                              MPI_Group b, int ranks_b[])
{
  struct thr_group *ga = group_of(r, a), *gb = group_of(r, b);
  for (int i = 0; i < n; i++) {
    if (ranks_a[i] == MPI_PROC_NULL) {
      ranks_b[i] = MPI_PROC_NULL;
      continue;
    }
    check_rank(r, ga, ranks_a[i]);
    ranks_b[i] = rank_in(gb, ga->world[ranks_a[i]]);
  }
  return MPI_SUCCESS;
}

int thr_Group_compare(struct thr_rank *r, MPI_Group a, MPI_Group b, int *result)
{
  struct thr_group *ga = group_of(r, a), *gb = group_of(r, b);
  int same_order = ga->size == gb->size, same_members = ga->size == gb->size;
  for (int i = 0; i < ga->size && same_members; i++) {
    same_order = same_order && ga->world[i] == gb->world[i];
    same_members = rank_in(gb, ga->world[i]) != MPI_UNDEFINED;
  }
  *result = same_order ? MPI_IDENT : same_members ? MPI_SIMILAR : MPI_UNEQUAL;
  return MPI_SUCCESS;
}

/* a's members, then b's that a lacks. */
int thr_Group_union(struct thr_rank *r, MPI_Group a, MPI_Group b, MPI_Group *out)
{
  struct thr_group *ga = group_of(r, a), *gb = group_of(r, b);
  int *world = thr_malloc((size_t)(ga->size + gb->size + 1) * sizeof *world), n = 0;
  for (int i = 0; i < ga->size; i++)
    world[n++] = ga->world[i];
  for (int i = 0; i < gb->size; i++)
    if (rank_in(ga, gb->world[i]) == MPI_UNDEFINED)
      world[n++] = gb->world[i];
  *out = new_group(r, n, world);
  free(world);
  return MPI_SUCCESS;
}

/* a's members that b has (keep = 1) or lacks (keep = 0), in a's order. */
static MPI_Group filter(struct thr_rank *r, MPI_Group a, MPI_Group b, int keep)
{
  struct thr_group *ga = group_of(r, a), *gb = group_of(r, b);
  char *drop = thr_calloc((size_t)ga->size + 1, 1);
  for (int i = 0; i < ga->size; i++)
    drop[i] = (rank_in(gb, ga->world[i]) != MPI_UNDEFINED) != keep;
  MPI_Group out = keep_unflagged(r, ga, drop);
  free(drop);
  return out;
}

int thr_Group_intersection(struct thr_rank *r, MPI_Group a, MPI_Group b, MPI_Group *out)
{
  *out = filter(r, a, b, 1);
  return MPI_SUCCESS;
}

int thr_Group_difference(struct thr_rank *r, MPI_Group a, MPI_Group b, MPI_Group *out)
{
  *out = filter(r, a, b, 0);
  return MPI_SUCCESS;
}

int thr_Group_free(struct thr_rank *r, MPI_Group *group)
{
  if (*group != MPI_GROUP_EMPTY) {
    group_of(r, *group);
    int index = thr_group_index(*group);
    free(r->groups[index]);
    r->groups[index] = NULL;
  }
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

/* Collective over comm; ranks outside their group get MPI_COMM_NULL (disjoint groups
 * share the context, as the halves of a split do). */
/* ---- communicators made collectively over a parent ---- */

/* A context free at every rank of comm (collective over comm). */
static int agree_ctx(struct thr_rank *r, MPI_Comm comm)
{
  int ctx;
  thr_Allreduce(r, &r->next_ctx, &ctx, 1, MPI_INT, MPI_MAX, comm);
  r->next_ctx = ctx + 2;
  return ctx;
}


int thr_Comm_dup(struct thr_rank *r, MPI_Comm comm, MPI_Comm *out)
{
  struct thr_comm *parent = thr_comm_of(r, comm);
  int ctx = agree_ctx(r, comm);
  *out = thr_add_comm(r, ctx, parent->size, parent->rank, parent->world);
  thr_comm_of(r, *out)->errhandler = parent->errhandler;
  return MPI_SUCCESS;
}

int thr_Comm_split(struct thr_rank *r, MPI_Comm comm, int color, int key, MPI_Comm *out)
{
  struct thr_comm *parent = thr_comm_of(r, comm);
  int ctx = agree_ctx(r, comm);
  int mine[2] = {color, key};
  int *all = thr_malloc((size_t)parent->size * 2 * sizeof(int));
  thr_Allgather(r, mine, 2, MPI_INT, all, 2, MPI_INT, comm);
  *out = MPI_COMM_NULL;
  if (color != MPI_UNDEFINED) {
    int size = 0, rank = 0;
    int *members = thr_malloc((size_t)parent->size * sizeof(int));
    for (int i = 0; i < parent->size; i++)
      if (all[2 * i] == color)
        members[size++] = i;
    /* By key, then by rank in the parent (insertion sort: stable). */
    for (int i = 1; i < size; i++)
      for (int j = i; j > 0 && all[2 * members[j - 1] + 1] > all[2 * members[j] + 1]; j--) {
        int t = members[j];
        members[j] = members[j - 1];
        members[j - 1] = t;
      }
    for (int i = 0; i < size; i++) {
      if (members[i] == parent->rank)
        rank = i;
      members[i] = parent->world[members[i]];
    }
    *out = thr_add_comm(r, ctx, size, rank, members);
    free(members);
  }
  free(all);
  return MPI_SUCCESS;
}

/* Ranks share a node when their processes do (the host MPI's view). */
int thr_Comm_split_type(struct thr_rank *r, MPI_Comm comm, int type, int key, MPI_Info info,
                        MPI_Comm *out)
{
  (void)info;
  return thr_Comm_split(r, comm, type == MPI_UNDEFINED ? MPI_UNDEFINED : thr_proc.node, key, out);
}

int thr_Comm_free(struct thr_rank *r, MPI_Comm *comm)
{
  struct thr_comm *c = thr_comm_of(r, *comm);
  if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF)
    thr_fatal("rank %d: MPI_Comm_free of a predefined communicator", r->world);
  r->comms[thr_comm_index(*comm)] = NULL;
  thr_local_group_release(c);
  thr_hier_release(c);
  free(c->world);
  free(c);
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int thr_Comm_create(struct thr_rank *r, MPI_Comm comm, MPI_Group group, MPI_Comm *out)
{
  struct thr_group *g = group_of(r, group);
  int ctx = agree_ctx(r, comm);
  int me = rank_in(g, r->world);
  *out = me == MPI_UNDEFINED ? MPI_COMM_NULL : thr_add_comm(r, ctx, g->size, me, g->world);
  return MPI_SUCCESS;
}

/* Only the group's members call it: its first member gathers their next free contexts
 * and sends back the largest, over comm's collective context with a tag from the call's
 * (negative: no collective uses those). */
int thr_Comm_create_group(struct thr_rank *r, MPI_Comm comm, MPI_Group group, int tag,
                          MPI_Comm *out)
{
  struct thr_comm *c = thr_comm_of(r, comm);
  struct thr_group *g = group_of(r, group);
  int me = rank_in(g, r->world);
  if (me == MPI_UNDEFINED)
    thr_fatal("rank %d: MPI_Comm_create_group by a rank outside the group", r->world);
  int *in_comm = thr_malloc((size_t)g->size * sizeof *in_comm); /* group rank -> comm rank */
  for (int i = 0; i < g->size; i++) {
    in_comm[i] = MPI_UNDEFINED;
    for (int k = 0; k < c->size; k++)
      if (c->world[k] == g->world[i])
        in_comm[i] = k;
    if (in_comm[i] == MPI_UNDEFINED)
      thr_fatal("rank %d: MPI_Comm_create_group: the group is not within the communicator",
                r->world);
  }
  int ctx = r->next_ctx, ctag = -16 - (tag & 0x0fffffff);
  if (me == 0) {
    for (int i = 1; i < g->size; i++) {
      int theirs;
      thr_wait(r, thr_irecv(r, c, c->ctx + 1, &theirs, 1, MPI_INT, in_comm[i], ctag),
               MPI_STATUS_IGNORE);
      if (theirs > ctx)
        ctx = theirs;
    }
    for (int i = 1; i < g->size; i++)
      thr_wait(r, thr_isend(r, c, c->ctx + 1, &ctx, 1, MPI_INT, in_comm[i], ctag),
               MPI_STATUS_IGNORE);
  } else {
    thr_wait(r, thr_isend(r, c, c->ctx + 1, &ctx, 1, MPI_INT, in_comm[0], ctag),
             MPI_STATUS_IGNORE);
    thr_wait(r, thr_irecv(r, c, c->ctx + 1, &ctx, 1, MPI_INT, in_comm[0], ctag),
             MPI_STATUS_IGNORE);
  }
  r->next_ctx = ctx + 2;
  *out = thr_add_comm(r, ctx, g->size, me, g->world);
  free(in_comm);
  return MPI_SUCCESS;
}
