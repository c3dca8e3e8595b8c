/* Unit test of the node transport layer (src/node/), without mpiexec: 2-4 forked
 * processes on one shared anonymous mapping laid out as a node segment drive
 *   - the slot/generation protocol: a writer that runs up to MCOLL_AREA_SLOTS - 1
 *     generations ahead of readers that stall now and then, in runs broken by
 *     whole-area generations, with the inline lines beside the slots;
 *   - publication and hold: every rank publishes a buffer, reads each peer's through
 *     the peer-memory interface and writes a signature into it, and the owner holds
 *     its buffer until every reader is done -- through CMA (private buffers) and
 *     through the memcpy backend (buffers in the shared mapping, at the same address
 *     in every process);
 *   - the ring: one writer streams chunks through the ring's slots, running up to
 *     the ring's length ahead (or half of it), to readers that take it a window at a
 *     time and stall now and then;
 *   - failure reporting of the peer-memory interface;
 *   - calls side by side: generations marked done out of order, some still read by
 *     calls in flight, and the rank's `done` that its peers wait on;
 * checking the data, the lags, and that every wait's test twin agrees with it.
 * Usage: mcoll-test-transport [ranks] [--break-slots | --break-hold | --break-ring]: the break
 * options leave out a wait, and the run must then fail (the test can fail).
 * Exit status 0 when every check passed. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "node/area.h"
#include "node/peer.h"
#include "node/publish.h"
#include "node/ring.h"
#include "node/slot.h"

/* The host-MPI hooks of the waits (core/host_progress.c): nothing to progress here. */
void mcoll__host_progress(void) {}
int mcoll__background_pending(void) { return 0; }

static int failures;
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      if (failures++ < 10) {                                                   \
        fprintf(stderr, "FAIL rank %d %s:%d: ", me, __FILE__, __LINE__);       \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
      }                                                                        \
    }                                                                          \
  } while (0)

enum { MAX_RANKS = 4, AREA_BYTES = MCOLL_AREA_SLOTS * 4096, HEAP_BYTES = 64 * 1024 };
enum { SLOT_GENS = 3000, WHOLE_EVERY = 500, HOLD_ROUNDS = 300 };
enum { RING_SLOTS = 8, RING_WINDOW = 2, RING_CHUNK = 4096, RING_GENS = 2000 };

static int me, nranks, break_slots, break_hold, break_ring;
static struct mcoll_channel ch;
static char *heap;  /* [MAX_RANKS][HEAP_BYTES] in the shared mapping */
static _Atomic int *cma_works; /* in the shared mapping: rank 0's probe */

static size_t line_round(size_t bytes) { return (bytes + MCOLL_LINE - 1) / MCOLL_LINE * MCOLL_LINE; }

/* A node segment for n ranks, as shm/segment.c lays one out (the parts used here). */
static void map_node(int n) {
  size_t hdr = line_round(sizeof(struct mcoll_shm_header));
  size_t sync = line_round(sizeof(struct mcoll_sync_line) * MAX_RANKS);
  size_t data = line_round(sizeof(struct mcoll_data_line) * MAX_RANKS);
  size_t lines = line_round(sizeof(struct mcoll_inline_line) * MAX_RANKS * MCOLL_INLINE_SLOTS);
  size_t ring = line_round(sizeof(struct mcoll_slot_ctl) * RING_SLOTS);
  size_t head = (hdr + sync + data + lines + ring + MCOLL_LINE + 4095) / 4096 * 4096;
  size_t bytes = head + (size_t)MAX_RANKS * AREA_BYTES + (size_t)MAX_RANKS * HEAP_BYTES +
                 (size_t)RING_SLOTS * RING_CHUNK;
  char *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  struct mcoll_shm *shm = &ch.shm;
  shm->base = base;
  shm->bytes = bytes;
  shm->hdr = (struct mcoll_shm_header *)base;
  shm->hdr->local_size = n;
  shm->sync = (struct mcoll_sync_line *)(base + hdr);
  shm->data = (struct mcoll_data_line *)(base + hdr + sync);
  shm->inline_line = (struct mcoll_inline_line *)(base + hdr + sync + data);
  shm->slot = (struct mcoll_slot_ctl *)(base + hdr + sync + data + lines);
  cma_works = (_Atomic int *)(base + hdr + sync + data + lines + ring);
  shm->area = base + head;
  shm->area_bytes = AREA_BYTES;
  heap = shm->area + (size_t)MAX_RANKS * AREA_BYTES;
  shm->slot_data = heap + (size_t)MAX_RANKS * HEAP_BYTES;
  shm->nslots = RING_SLOTS;
  shm->window = RING_WINDOW;
  shm->chunk = RING_CHUNK;
  shm->local_size = n;
  /* Few polls before yielding: the waits' yield and futex phases run too. */
  shm->spin = 8;
  shm->oversubscribed = 1;
}

/* All ranks meet (the counter barrier's words of the header). */
static void meet(void) {
  static uint32_t round;
  round++;
  mcoll__flag_add(&ch.shm, &ch.shm.hdr->barrier_arrived, 1);
  mcoll__flag_wait(&ch.shm, &ch.shm.hdr->barrier_arrived, round * (uint32_t)nranks);
}

static uint64_t word_of(int rank, uint32_t gen, size_t i) {
  return (uint64_t)gen << 32 ^ (uint64_t)rank << 24 ^ (uint64_t)i * 0x9e3779b1u;
}

static void fill(void *buf, size_t bytes, int rank, uint32_t gen) {
  uint64_t *w = buf;
  for (size_t i = 0; i < bytes / 8; i++) w[i] = word_of(rank, gen, i);
}

/* Words of buf that are not rank's of generation gen. */
static size_t wrong_words(const void *buf, size_t bytes, int rank, uint32_t gen) {
  const uint64_t *w = buf;
  size_t wrong = 0;
  for (size_t i = 0; i < bytes / 8; i++) wrong += w[i] != word_of(rank, gen, i);
  return wrong;
}

/* Now and then a rank stalls, so that the others run ahead of it. */
static void maybe_stall(uint32_t i, int every) {
  if ((int)(i % (uint32_t)every) == me) usleep(1000 + 500 * (useconds_t)me);
}

/* Every peer's `done` has reached need (what a slot wait guarantees). */
static int peers_done(uint32_t need) {
  for (int r = 0; r < nranks; r++)
    if (r != me && !mcoll__reached(atomic_load(&ch.shm.data[r].done), need)) return 0;
  return 1;
}

/* Rank 0 writes every generation, in one slot of its area (runs of slot
 * generations) or in its whole area (every WHOLE_EVERY-th); the others read it. */
static void test_slots(void) {
  const struct mcoll_shm *shm = &ch.shm;
  size_t slot_bytes = mcoll__slot_bytes(shm);
  uint32_t run_from = 0, root_waits = 0, stalls_seen = 0;
  for (uint32_t g = 1; g <= SLOT_GENS; g++) {
    int whole = g % WHOLE_EVERY == 0;
    if (whole) {
      run_from = g + 1;
      if (me == 0) {
        int free_now = mcoll__area_test_free(&ch, g);
        if (free_now) CHECK(peers_done(g - 1), "area test_free said free at %u", g);
        if (mcoll__area_poll_free(&ch, g))
          CHECK(peers_done(g - 1), "area poll_free said free at %u", g);
        mcoll__area_wait_free(&ch, g);
        CHECK(mcoll__area_test_free(&ch, g), "area test_free after its wait at %u", g);
        CHECK(mcoll__area_poll_free(&ch, g), "area poll_free after its wait at %u", g);
        fill(mcoll__rank_area(shm, 0), AREA_BYTES, 0, g);
        mcoll__area_post(&ch, g);
      } else {
        if (mcoll__area_test_posted(&ch, 0, g))
          CHECK(mcoll__reached(atomic_load(&shm->data[0].posted), g), "test_posted at %u", g);
        mcoll__area_wait_posted(&ch, 0, g);
        CHECK(mcoll__area_test_posted(&ch, 0, g), "test_posted after its wait at %u", g);
        CHECK(wrong_words(mcoll__rank_area(shm, 0), AREA_BYTES, 0, g) == 0,
              "whole area of generation %u overwritten", g);
      }
      mcoll__area_done(&ch, g);
      continue;
    }
    uint32_t lag = mcoll__slot_begin(&ch.area_slots, g);
    uint32_t want = g - run_from < MCOLL_AREA_SLOTS - 1 ? g - run_from : MCOLL_AREA_SLOTS - 1;
    CHECK(lag == want, "generation %u: lag %u, want %u", g, lag, want);
    uint32_t need = mcoll__slot_need(g, lag);
    CHECK(need == (g >= MCOLL_AREA_SLOTS + run_from - 1 ? g - MCOLL_AREA_SLOTS : run_from - 1),
          "generation %u: needs %u", g, need);
    struct mcoll_inline_line *line = mcoll__inline_line(shm, 0, g);
    if (me == 0) {
      int free_now = mcoll__slot_test_free(shm, &ch.area_slots, g, lag);
      if (free_now) CHECK(peers_done(need), "slot test_free said free at %u", g);
      else root_waits++;
      if (!break_slots) mcoll__slot_wait_free(shm, &ch.area_slots, g, lag);
      if (!break_slots) CHECK(peers_done(need), "slot wait_free returned early at %u", g);
      CHECK(break_slots || mcoll__slot_test_free(shm, &ch.area_slots, g, lag),
            "slot test_free after its wait at %u", g);
      fill(mcoll__slot_area(shm, 0, g), slot_bytes, 0, g);
      uint64_t note = word_of(0, g, 0);
      mcoll__inline_put(shm, line, g, &note, sizeof note);
      mcoll__area_post(&ch, g);
    } else {
      maybe_stall(g, 61);
      if (mcoll__inline_test(line, g)) stalls_seen++;
      uint64_t note = 0;
      mcoll__inline_get(shm, line, g, &note, sizeof note);
      CHECK(mcoll__inline_test(line, g), "inline test after its wait at %u", g);
      CHECK(note == word_of(0, g, 0), "inline line of generation %u overwritten", g);
      mcoll__area_wait_posted(&ch, 0, g);
      CHECK(wrong_words(mcoll__slot_area(shm, 0, g), slot_bytes, 0, g) == 0,
            "slot of generation %u overwritten", g);
    }
    mcoll__area_done(&ch, g);
  }
  if (me == 0) printf("slots: %d generations, the writer found its slot busy %u times\n",
                      SLOT_GENS, root_waits);
  else if (me == 1) printf("slots: reader 1 found its line ready without waiting %u times\n",
                           stalls_seen);
}

/* Rank 0 streams RING_GENS chunks through the ring, as far ahead as the whole ring
 * (or, every other stretch, half of it); the others read them a window at a time,
 * report each window consumed, and check every chunk and what the test twins say. */
static void test_ring(void) {
  const struct mcoll_shm *shm = &ch.shm;
  uint32_t writer_waits = 0;
  for (uint32_t first = 1; first <= RING_GENS; first += RING_WINDOW) {
    for (uint32_t g = first; g < first + RING_WINDOW; g++) {
      uint32_t behind = (g / 200) % 2 ? RING_SLOTS / 2 : RING_SLOTS;
      size_t len = RING_CHUNK - (g % 7) * 8;
      if (me == 0) {
        int free_now = mcoll__ring_test_free(shm, 0, g, behind);
        if (!free_now) writer_waits++;
        if (!break_ring) mcoll__ring_wait_free(shm, 0, g, behind);
        CHECK(break_ring || mcoll__ring_test_free(shm, 0, g, behind),
              "ring test_free after its wait at %u", g);
        fill(mcoll__ring_data(shm, g), len, 0, g);
        mcoll__ring_put(shm, g, len, RING_GENS);
      } else {
        maybe_stall(g, 83);
        /* I have not reported g consumed: the writer cannot have put g + ring length. */
        CHECK(!mcoll__ring_test(shm, g + RING_SLOTS), "ring ran past my window at %u", g);
        const struct mcoll_slot_ctl *ctl = mcoll__ring_wait(shm, g);
        CHECK(mcoll__ring_test(shm, g), "ring test after its wait at %u", g);
        CHECK(ctl->bytes == len && ctl->call_bytes == RING_GENS, "ring chunk %u: %u bytes", g,
              ctl->bytes);
        CHECK(wrong_words(mcoll__ring_data(shm, g), len, 0, g) == 0,
              "ring chunk of generation %u overwritten", g);
      }
    }
    if (me != 0) mcoll__ring_consumed(shm, me, first + RING_WINDOW - 1);
  }
  if (me == 0) printf("ring: %d chunks, the writer found its slot busy %u times\n", RING_GENS,
                      writer_waits);
}

/* Every rank publishes a buffer per round: its first half for readers, its second
 * for their signatures (one line per rank, written through the interface). */
static void test_publish_hold(enum mcoll_peer_mem mem, uint32_t first_gen) {
  const struct mcoll_shm *shm = &ch.shm;
  ch.peer_mem = mem;
  size_t bytes = HEAP_BYTES, half = bytes / 2;
  char *mine = mem == MCOLL_PEER_SHARED ? heap + (size_t)me * HEAP_BYTES : aligned_alloc(64, bytes);
  char *got = malloc(half);
  uint32_t holds_waited = 0;
  for (uint32_t k = 0; k < HOLD_ROUNDS; k++) {
    uint32_t gen = first_gen + k;
    if (k > 0) {
      /* Last round's readers first: they have read my buffer and signed it. */
      uint32_t last = gen - 1;
      int held = mcoll__hold_test(shm, MCOLL_MARK_AREA, -1, last);
      if (held) CHECK(peers_done(last), "hold_test said done at %u", last);
      else holds_waited++;
      if (!break_hold) {
        mcoll__hold_wait(shm, MCOLL_MARK_AREA, -1, last);
        CHECK(mcoll__hold_test(shm, MCOLL_MARK_AREA, -1, last), "hold_test after its wait");
        for (int r = 0; r < nranks; r++)
          if (r != me)
            CHECK(wrong_words(mine + half + (size_t)r * 64, 64, r, last) == 0,
                  "rank %d's signature of round %u missing", r, last);
      }
    }
    fill(mine, half, me, gen);
    mcoll__publish(mcoll__publish_line(shm, me), mine, bytes, gen);
    mcoll__area_post(&ch, gen);
    for (int s = 1; s < nranks; s++) {
      int r = (me + s) % nranks;
      mcoll__area_wait_posted(&ch, r, gen);
      const struct mcoll_peer_buf *pub = mcoll__publish_line(shm, r);
      CHECK(mcoll__published_is(pub, gen), "rank %d's record is not of round %u", r, gen);
      CHECK(mcoll__published_len(pub) == bytes, "rank %d's length", r);
      maybe_stall(k, 23);
      uint64_t addr = mcoll__published_addr(pub);
      mcoll__peer_read(&ch, r, got, addr, half);
      CHECK(wrong_words(got, half, r, gen) == 0, "rank %d's buffer changed under its readers (round %u)",
            r, gen);
      uint64_t sign[8];
      fill(sign, sizeof sign, me, gen);
      mcoll__peer_write(&ch, r, addr + half + (uint64_t)me * 64, sign, sizeof sign);
    }
    mcoll__read_done(shm, MCOLL_MARK_AREA, gen);
  }
  mcoll__hold_wait(shm, MCOLL_MARK_AREA, -1, first_gen + HOLD_ROUNDS - 1);
  if (me == 0)
    printf("publish/hold (%s): %d rounds, the owner waited for its readers %u times\n",
           mem == MCOLL_PEER_CMA ? "cma" : "memcpy", HOLD_ROUNDS, holds_waited);
  if (mem != MCOLL_PEER_SHARED) free(mine);
  free(got);
}

/* The interface reports a failed read or write, it does not pretend. */
static void test_failures(void) {
  char buf[64];
  ch.peer_mem = MCOLL_PEER_CMA;
  int peer = (me + 1) % nranks;
  volatile uint64_t unmapped = 64; /* (volatile: the compiler must not see the address) */
  memset(buf, 0, sizeof buf);
  CHECK(mcoll__peer_read_status(&ch, peer, buf, unmapped, sizeof buf) != 0, "read of address 64");
  CHECK(mcoll__peer_write_status(&ch, peer, unmapped, buf, sizeof buf) != 0, "write to address 64");
  CHECK(mcoll__peer_read_status(&ch, peer, buf, 0, 0) == 0, "an empty read");
}

/* Calls side by side (node/area.h): three calls of one generation each, g, g+1 and
 * g+2, in flight at once, the first two still reading theirs (the third reads
 * nothing), marked done in each of the 6 orders. This rank's `done` must never reach
 * a generation still read, and must say the latest mark once nothing is read. */
static void test_side_by_side(uint32_t g) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const mcoll_flag *done = &ch.shm.data[me].done;
  for (int k = 0; k < 6; k++, g += 3) {
    mcoll__area_done(&ch, g - 1);
    CHECK(mcoll__area_reading(&ch, g) && mcoll__area_reading(&ch, g + 1), "reading at %u", g);
    int marked[3] = {0, 0, 0};
    uint32_t latest = g - 1;
    for (int i = 0; i < 3; i++) {
      int call = orders[k][i];
      mcoll__area_done(&ch, g + (uint32_t)call);
      marked[call] = 1;
      if (mcoll__reached(g + (uint32_t)call, latest)) latest = g + (uint32_t)call;
      uint32_t expect = latest;
      for (int r = 1; r >= 0; r--)
        if (!marked[r] && mcoll__reached(expect, g + (uint32_t)r)) expect = g + (uint32_t)r - 1;
      CHECK(atomic_load(done) == expect, "order %d, mark %d: done %u, expected %u", k, i,
            atomic_load(done), expect);
    }
  }
  /* As many readers as calls side by side may be, then no more. */
  for (uint32_t i = 0; i < MCOLL_AREA_READERS; i++)
    CHECK(mcoll__area_reading(&ch, g + i), "reader %u of %d", i, MCOLL_AREA_READERS);
  CHECK(!mcoll__area_reading(&ch, g + MCOLL_AREA_READERS), "a reader beyond the window");
  for (uint32_t i = MCOLL_AREA_READERS; i-- > 0;) mcoll__area_done(&ch, g + i);
  g += MCOLL_AREA_READERS;
  CHECK(atomic_load(done) == g - 1 && ch.area_reads.n == 0, "done %u after the window", atomic_load(done));
  /* The peers did the same: their done reaches the last generation. */
  mcoll__area_wait_free(&ch, g);
}

static int run_rank(void) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  ch.shm.local_rank = me;
  ch.shm.data[me].pid = getpid();
  ch.shm.data[me].world_rank = me;
  meet();
  if (me == 0) {
    uint64_t word = 0;
    atomic_store(cma_works, mcoll__cma_read(ch.shm.data[1].pid, &word,
                                            (uint64_t)(uintptr_t)&ch.shm.local_size, sizeof word) == 0 ? 1 : -1);
  }
  meet();
  test_slots();
  meet();
  test_ring();
  meet();
  uint32_t gen = SLOT_GENS + 1;
  if (atomic_load(cma_works) > 0) {
    test_publish_hold(MCOLL_PEER_CMA, gen);
    test_failures();
  } else if (me == 0) {
    printf("cma: process_vm_readv is not permitted here; its part skipped\n");
  }
  meet();
  test_publish_hold(MCOLL_PEER_SHARED, gen + HOLD_ROUNDS);
  meet();
  test_side_by_side(gen + 2 * HOLD_ROUNDS + 1);
  meet();
  return failures;
}

int main(int argc, char **argv) {
  nranks = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--break-slots")) break_slots = 1;
    else if (!strcmp(argv[i], "--break-hold")) break_hold = 1;
    else if (!strcmp(argv[i], "--break-ring")) break_ring = 1;
    else nranks = atoi(argv[i]);
  }
  if (nranks < 2 || nranks > MAX_RANKS) {
    fprintf(stderr, "usage: %s [2-%d] [--break-slots | --break-hold | --break-ring]\n", argv[0],
            MAX_RANKS);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  mcoll__config_load();
  map_node(nranks);
  pid_t kids[MAX_RANKS];
  for (int r = 1; r < nranks; r++) {
    kids[r] = fork();
    if (kids[r] < 0) {
      perror("fork");
      return 2;
    }
    if (kids[r] == 0) {
      me = r;
      alarm(120); /* a hang is a failure */
      _exit(run_rank() ? 1 : 0);
    }
  }
  me = 0;
  alarm(120);
  int total = run_rank(), bad_kids = 0;
  for (int r = 1; r < nranks; r++) {
    int status = 0;
    waitpid(kids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad_kids++;
  }
  if (bad_kids) fprintf(stderr, "FAIL: %d of the other ranks failed\n", bad_kids);
  total += bad_kids;
  printf("ok: %d failures (%d ranks)\n", total, nranks);
  return total ? 1 : 0;
}
