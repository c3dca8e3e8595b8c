#include "shm/area.h"

void mcoll__area_wait_free(struct mcoll_comm *c, uint32_t gen) {
  const struct mcoll_shm *shm = &c->chan->shm;
  for (int r = 0; r < shm->local_size; r++)
    if (r != shm->local_rank) mcoll__flag_wait(shm, &shm->data[r].done, gen - 1);
}

void mcoll__area_post(struct mcoll_comm *c, uint32_t gen) {
  mcoll__flag_set(&c->chan->shm, &c->chan->shm.data[c->chan->shm.local_rank].posted, gen);
}

void mcoll__area_wait_posted(struct mcoll_comm *c, int r, uint32_t gen) {
  mcoll__flag_wait(&c->chan->shm, &c->chan->shm.data[r].posted, gen);
}

void mcoll__area_done(struct mcoll_comm *c, uint32_t gen) {
  mcoll__flag_set(&c->chan->shm, &c->chan->shm.data[c->chan->shm.local_rank].done, gen);
}
