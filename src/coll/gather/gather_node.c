/* Intra-node gather through the per-rank areas (node/area.h) or by single copy.
 *
 * The call takes T area generations, T = the most chunks any area-moved block needs
 * (at least 1). In generation base+t every rank with a chunk t writes it into its
 * own area (a single-copy rank publishes its buffer's address in the first) and
 * posts; the sink copies the chunks out, then marks the generation done. The sink
 * also writes T at the head of its area in the first generation, for ranks that do
 * not know every length (gatherv); those mark themselves done with all T at once,
 * since they read nothing else. Most calls need only one generation (see
 * one_generation below), and back-to-back ones overlap. */
#include <stdint.h>
#include <string.h>

#include "coll/beside.h"
#include "coll/gather/gather.h"
#include "core/config.h"
#include "node/area.h"
#include "node/publish.h"

static uint32_t call_rounds(const struct mcoll_comm *c, const struct mcoll_gather_node *g,
                            const struct mcoll_blocks *lens) {
  const struct mcoll_topo *t = &c->topo;
  uint32_t rounds = 1;
  for (int j = 0; j < t->local_size; j++) {
    size_t len = mcoll__block_len(lens, t->local_ranks[j]);
    uint32_t chunks = mcoll__area_chunks(len, c->chan->shm.area_bytes);
    if (mcoll__move_of(c, len, g->forced, g->cma_min) == MCOLL_MOVE_AREA &&
        chunks > rounds)
      rounds = chunks;
  }
  return rounds;
}

/* One generation per call: every block either fits in one slot of its owner's area
 * (node/slot.h) or goes by single copy, its address in that slot. All ranks must
 * decide alike: with single copy on, every block qualifies once blocks of a slot's
 * size go by single copy (a rule everyone can check); otherwise only calls whose
 * lengths everyone knows, all of them fitting a slot. Back-to-back calls overlap:
 * a member leaves as soon as its block is in its slot. */
static int one_generation(const struct mcoll_comm *c, const struct mcoll_gather_node *g,
                          const struct mcoll_blocks *lens) {
  const struct mcoll_topo *t = &c->topo;
  size_t cma_min = g->cma_min;
  size_t slot = mcoll__slot_bytes(&c->chan->shm);
  if (c->chan->cma_ok && g->forced != MCOLL_MOVE_AREA &&
      (g->forced == MCOLL_MOVE_CMA || (cma_min > 0 && cma_min <= slot)))
    return 1;
  if (!g->lens_everywhere) return 0;
  for (int j = 0; j < t->local_size; j++) {
    size_t len = mcoll__block_len(lens, t->local_ranks[j]);
    if (len > slot || mcoll__move_of(c, len, g->forced, cma_min) != MCOLL_MOVE_AREA) return 0;
  }
  return 1;
}

static void one_generation_sink(struct mcoll_comm *c, const struct mcoll_gather_node *g) {
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank, n = shm->local_size;
  /* (Not beside later calls: a sink only reads, and the next call's sink would too;
   * side by side only slowed bursts of calls down: bench/records/burst/node.md.) */
  uint32_t gen = mcoll__slot_take(c->chan, NULL);
  char *own = mcoll__block_ptr(g->dst, c->rank);
  if (g->mine && g->mine != own && g->my_len) memcpy(own, g->mine, g->my_len);
  for (int s = 1; s < n; s++) {
    int j = (me + s) % n, r = c->topo.local_ranks[j];
    size_t len = mcoll__block_len(g->dst, r);
    if (!len) continue;
    char *slot = mcoll__slot_area(shm, j, gen);
    int cma = mcoll__move_of(c, len, g->forced, g->cma_min) ==
              MCOLL_MOVE_CMA;
    if (!cma && len <= MCOLL_INLINE_MAX) {
      struct mcoll_inline_line *line = mcoll__inline_line(shm, j, gen);
      mcoll__inline_get(shm, line, gen, mcoll__block_ptr(g->dst, r), len);
      if (line->len != len) mcoll__move_disagree();
      continue;
    }
    mcoll__area_wait_posted(c->chan, j, gen);
    mcoll__call_check(j, 0);
    if (cma)
      mcoll__peer_read(c->chan, j, mcoll__block_ptr(g->dst, r),
                       mcoll__published_addr((const struct mcoll_peer_buf *)slot), len);
    else
      memcpy(mcoll__block_ptr(g->dst, r), slot, len);
  }
  mcoll__area_done(c->chan, gen);
}

static void one_generation_member(struct mcoll_comm *c, const struct mcoll_gather_node *g) {
  const struct mcoll_shm *shm = &c->chan->shm;
  uint32_t lag, gen = mcoll__slot_take(c->chan, &lag);
  int cma = mcoll__move_of(c, g->my_len, g->forced, g->cma_min) ==
            MCOLL_MOVE_CMA;
  /* My descriptor goes out before I mark the generation done: a sink that left the
   * call settles once I am done, then reads my length from my line. */
  mcoll__move_publish();
  mcoll__area_done(c->chan, gen); /* I read nothing */
  mcoll__slot_wait_free(&c->chan->shm, &c->chan->area_slots, gen, lag);
  char *slot = mcoll__slot_area(shm, shm->local_rank, gen);
  if (!cma && g->my_len <= MCOLL_INLINE_MAX) { /* the sink polls the line itself */
    mcoll__inline_put(shm, mcoll__inline_line(shm, shm->local_rank, gen), gen, g->mine,
                      g->my_len);
    mcoll__node_call_beside(c, 0, gen);
    return;
  }
  if (cma) mcoll__publish((struct mcoll_peer_buf *)slot, g->mine, g->my_len, gen);
  else if (g->my_len) mcoll__area_write(slot, g->mine, g->my_len);
  mcoll__area_post(c->chan, gen);
  mcoll__node_call_beside(c, 0, gen);
  /* The sink reads my buffer itself: keep it until the sink is done. */
  if (cma) mcoll__hold_wait(shm, MCOLL_MARK_AREA, g->sink, gen);
}

static void sink_side(struct mcoll_comm *c, const struct mcoll_gather_node *g) {
  const struct mcoll_shm *shm = &c->chan->shm;
  const struct mcoll_topo *t = &c->topo;
  const size_t area = shm->area_bytes;
  int me = shm->local_rank, n = shm->local_size;
  uint32_t rounds = call_rounds(c, g, g->dst), base = mcoll__area_take(c->chan, rounds);

  mcoll__area_wait_free(c->chan, base + 1);
  memcpy(mcoll__rank_area(shm, me), &rounds, sizeof rounds);
  mcoll__move_publish();
  mcoll__area_post(c->chan, base + 1);
  char *own = mcoll__block_ptr(g->dst, c->rank);
  if (g->mine && g->mine != own && g->my_len) memcpy(own, g->mine, g->my_len);

  for (uint32_t r = 1; r <= rounds; r++) {
    size_t at = (size_t)(r - 1) * area;
    for (int s = 1; s < n; s++) {
      int j = (me + s) % n;
      size_t len = mcoll__block_len(g->dst, t->local_ranks[j]);
      char *to = mcoll__block_ptr(g->dst, t->local_ranks[j]);
      if (mcoll__move_of(c, len, g->forced, g->cma_min) ==
          MCOLL_MOVE_CMA) {
        if (r > 1) continue;
        mcoll__area_wait_posted(c->chan, j, base + 1);
        mcoll__call_check(j, 0);
        mcoll__peer_read(c->chan, j, to, mcoll__published_addr(mcoll__publish_line(shm, j)), len);
      } else if (at < len) {
        mcoll__area_wait_posted(c->chan, j, base + r);
        mcoll__call_check(j, 0);
        memcpy(to + at, mcoll__rank_area(shm, j), len - at < area ? len - at : area);
      }
    }
    mcoll__area_done(c->chan, base + r);
  }
}

static void member_side(struct mcoll_comm *c, const struct mcoll_gather_node *g) {
  const struct mcoll_shm *shm = &c->chan->shm;
  const size_t area = shm->area_bytes;
  int me = shm->local_rank;
  uint32_t base = mcoll__area_last(c->chan), rounds;
  char *my_area = mcoll__rank_area(shm, me);
  enum mcoll_move move =
      mcoll__move_of(c, g->my_len, g->forced, g->cma_min);
  uint32_t chunks = move == MCOLL_MOVE_AREA ? mcoll__area_chunks(g->my_len, area) : 0;

  mcoll__area_wait_free(c->chan, base + 1);
  if (move == MCOLL_MOVE_CMA)
    mcoll__publish(mcoll__publish_line(shm, me), g->mine, g->my_len, base + 1);
  else if (g->my_len)
    mcoll__area_write(my_area, g->mine, g->my_len < area ? g->my_len : area);
  mcoll__move_publish();
  mcoll__area_post(c->chan, base + 1);
  if (g->lens) {
    rounds = call_rounds(c, g, g->lens);
  } else {
    mcoll__area_wait_posted(c->chan, g->sink, base + 1);
    memcpy(&rounds, mcoll__rank_area(shm, g->sink), sizeof rounds);
  }
  mcoll__area_take(c->chan, rounds); /* known now: mine from the lengths, else the sink's */
  mcoll__area_done(c->chan, base + rounds);

  for (uint32_t r = 2; r <= chunks; r++) {
    size_t at = (size_t)(r - 1) * area;
    mcoll__area_wait_free(c->chan, base + r);
    mcoll__area_write(my_area, g->mine + at, g->my_len - at < area ? g->my_len - at : area);
    mcoll__area_post(c->chan, base + r);
  }
  /* The sink reads my buffer itself: keep it until the sink is past generation 1. */
  if (move == MCOLL_MOVE_CMA) mcoll__hold_wait(shm, MCOLL_MARK_AREA, g->sink, base + 1);
}

struct gather_run {
  const struct mcoll_gather_node *g;
  const int *local_ranks; /* the communicator's rank of each node-local rank */
  int one_gen, sink;
};

static void run(struct mcoll_comm *c, const void *arg) {
  const struct gather_run *run = arg;
  const struct mcoll_gather_node *g = run->g;
  if (run->one_gen) {
    if (run->sink) one_generation_sink(c, g);
    else one_generation_member(c, g);
  } else if (run->sink) {
    sink_side(c, g);
  } else {
    member_side(c, g);
  }
}

/* The sink knows every member's length; a member reads nothing of the others. */
static size_t expects(const void *arg, int x) {
  const struct gather_run *run = arg;
  return run->sink ? mcoll__block_len(run->g->dst, run->local_ranks[x]) : SIZE_MAX;
}

int mcoll__gather_node(struct mcoll_comm *c, const struct mcoll_gather_node *g) {
  if (!mcoll__node_has_peers(c)) {
    char *own = mcoll__block_ptr(g->dst, c->rank);
    if (g->mine && g->mine != own && g->my_len) memcpy(own, g->mine, g->my_len);
    return MPI_SUCCESS;
  }
  int sink = c->chan->shm.local_rank == g->sink;
  struct gather_run arg = {g, c->topo.local_ranks, one_generation(c, g, sink ? g->dst : g->lens),
                           sink};
  struct mcoll_move_guard guard = {.my_len = g->my_len, .reads = sink, .arg = &arg, .body = run};
  /* Blocks of one length (gather), which I know: every peer's is mine (no lookup). */
  const struct mcoll_blocks *lens = sink ? g->dst : g->lens;
  if (!lens || lens->counts) guard.expects = expects;
  return mcoll__move_guarded(c, &guard);
}

int mcoll__gather_node_ready(struct mcoll_comm *c, const struct mcoll_gather_node *g, int known) {
  const struct mcoll_shm *shm = &c->chan->shm;
  int me = shm->local_rank, n = shm->local_size, sink = me == g->sink;
  if (!one_generation(c, g, sink ? g->dst : g->lens)) return -2;
  uint32_t gen = c->chan->area_gen + 1;
  if (!sink) { /* (a block by single copy: its owner waits for the sink's read) */
    if (mcoll__move_of(c, g->my_len, g->forced, g->cma_min) == MCOLL_MOVE_CMA) return known ? -2 : -1;
    struct mcoll_slot_run run = c->chan->area_slots; /* (a copy: the call begins the real one) */
    uint32_t lag = mcoll__slot_begin(&run, gen);
    return mcoll__slot_poll_free(shm, &run, gen, lag) ? 1 : -1;
  }
  for (int s = 1; s < n && known; s++) {
    size_t len = mcoll__block_len(g->dst, c->topo.local_ranks[(me + s) % n]);
    if (mcoll__move_of(c, len, g->forced, g->cma_min) == MCOLL_MOVE_CMA) return -2;
  }
  /* The sink: every member's block (or its address) in, as one_generation_sink reads it. */
  for (int s = 1; s < n; s++) {
    int j = (me + s) % n;
    size_t len = mcoll__block_len(g->dst, c->topo.local_ranks[j]);
    if (!len) continue;
    int cma = mcoll__move_of(c, len, g->forced, g->cma_min) == MCOLL_MOVE_CMA;
    mcoll_flag *flag = !cma && len <= MCOLL_INLINE_MAX ? &mcoll__inline_line(shm, j, gen)->stamp
                                                       : &shm->data[j].posted;
    if (!mcoll__flag_poll(shm, flag, gen)) return -1;
  }
  return 1;
}
