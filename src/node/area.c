#include "node/area.h"
#include "node/slot.h"

/* Every rank that noticed counts the call as one generation (what a one-slot call,
 * whose ranks may finish without reading anyone and so never notice, uses), done
 * with it, and makes the next slot call start a new run. Readers cope with peers
 * that believe otherwise about runs (every writer posts and stamps; stamps are
 * waited for exactly), so the node goes on with mcoll. */
void mcoll__area_resync(struct mcoll_channel *ch, uint32_t start_gen, int beside,
                        struct mcoll_slot_run *run) {
  struct mcoll_data_line *me = &ch->shm.data[ch->shm.local_rank];
  uint32_t gen = start_gen + 1;
  /* A slot call that let later calls start (coll/beside.h) took one generation and
   * posted it: the counter and posted are right already, and the generations after
   * it are those calls'. */
  if (!beside) {
    ch->area_gen = gen;
    if (mcoll__reached(atomic_load(&me->posted), gen + 1)) atomic_store(&me->posted, gen);
  }
  mcoll__slot_run_end(run, gen);
  if (!mcoll__reached(atomic_load(&me->done), gen)) mcoll__area_done(ch, gen);
}

void mcoll__area_wait_free(struct mcoll_channel *ch, uint32_t gen) {
  const struct mcoll_shm *shm = &ch->shm;
  for (int r = 0; r < shm->local_size; r++)
    if (r != shm->local_rank) mcoll__flag_wait(shm, &shm->data[r].done, gen - 1);
}

int mcoll__area_test_free(const struct mcoll_channel *ch, uint32_t gen) {
  const struct mcoll_shm *shm = &ch->shm;
  for (int r = 0; r < shm->local_size; r++)
    if (r != shm->local_rank && !mcoll__flag_test(&shm->data[r].done, gen - 1)) return 0;
  return 1;
}

int mcoll__area_poll_free(const struct mcoll_channel *ch, uint32_t gen) {
  const struct mcoll_shm *shm = &ch->shm;
  for (int r = 0; r < shm->local_size; r++)
    if (r != shm->local_rank && !mcoll__flag_poll(shm, &shm->data[r].done, gen - 1)) return 0;
  return 1;
}

void mcoll__area_post(struct mcoll_channel *ch, uint32_t gen) {
  mcoll__flag_set(&ch->shm, &ch->shm.data[ch->shm.local_rank].posted, gen);
}

void mcoll__area_wait_posted(struct mcoll_channel *ch, int r, uint32_t gen) {
  mcoll__flag_wait(&ch->shm, &ch->shm.data[r].posted, gen);
}

void mcoll__area_done(struct mcoll_channel *ch, uint32_t gen) {
  mcoll_flag *done = &ch->shm.data[ch->shm.local_rank].done;
  struct mcoll_area_reads *reads = &ch->area_reads;
  if (!reads->n) {
    mcoll__flag_set(&ch->shm, done, gen);
    return;
  }
  for (int i = 0; i < reads->n; i++)
    if (reads->gen[i] == gen) {
      reads->gen[i] = reads->gen[--reads->n];
      break;
    }
  if (mcoll__reached(gen, reads->marked)) reads->marked = gen;
  uint32_t upto = reads->marked;
  for (int i = 0; i < reads->n; i++)
    if (!mcoll__reached(reads->gen[i] - 1, upto)) upto = reads->gen[i] - 1;
  if (!mcoll__flag_test(done, upto)) mcoll__flag_set(&ch->shm, done, upto);
}

int mcoll__area_reading(struct mcoll_channel *ch, uint32_t gen) {
  struct mcoll_area_reads *reads = &ch->area_reads;
  if (reads->n == MCOLL_AREA_READERS) return 0;
  /* Generations before gen are marked, or read by the calls listed: a later call's
   * gen is above all of them. */
  if (!reads->n)
    reads->marked = atomic_load_explicit(&ch->shm.data[ch->shm.local_rank].done,
                                         memory_order_relaxed);
  reads->gen[reads->n++] = gen;
  return 1;
}
