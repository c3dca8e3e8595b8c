#include "node/area.h"

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

void mcoll__area_post(struct mcoll_channel *ch, uint32_t gen) {
  mcoll__flag_set(&ch->shm, &ch->shm.data[ch->shm.local_rank].posted, gen);
}

void mcoll__area_wait_posted(struct mcoll_channel *ch, int r, uint32_t gen) {
  mcoll__flag_wait(&ch->shm, &ch->shm.data[r].posted, gen);
}

void mcoll__area_done(struct mcoll_channel *ch, uint32_t gen) {
  mcoll__flag_set(&ch->shm, &ch->shm.data[ch->shm.local_rank].done, gen);
}
