/* Mapping a node segment's pages ahead of the first calls on a communicator. */
#ifndef MCOLL_PREFAULT_H
#define MCOLL_PREFAULT_H

#include "shm/shm.h"

/* Maps into this rank's page tables (allocating them in the segment if no rank has
 * yet) the pages that the first calls on a communicator touch: the control and
 * inline lines, the first MCOLL_SHM_PREFAULT bytes of every slot of the pipeline
 * ring and of every small-call slot of every rank's area, and each area slot's last
 * page (by default all of the ring and of the areas); then loads into this rank's
 * cache the lines small calls touch first (control and inline lines, each ring
 * slot's first line, the first lines of each area slot: shm/prefault.c, warm_lines).
 * Without it each of the first 128 calls takes the page faults of its fresh slot,
 * several times a warm call's time (docs/performance.md, MCOLL_SHM_PREFAULT). Call on
 * every rank of the node once the segment is mapped and each rank has touched its
 * own area (after mcoll__shm_attach); it changes no byte of the segment, so it may
 * run while peers already use it. Does nothing with MCOLL_SHM_PREFAULT=0.
 * Cost: CPU time in proportion to the pages mapped, mostly page allocation, once per
 * segment at set-up. */
void mcoll__shm_prefault(const struct mcoll_shm *shm);

#endif
