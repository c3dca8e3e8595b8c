#ifndef MCOLL_BARRIER_H
#define MCOLL_BARRIER_H

#include "comm/context.h"

enum mcoll_barrier_alg { MCOLL_BARRIER_HIER, MCOLL_BARRIER_COUNTER, MCOLL_BARRIER_NALGS };

int mcoll__barrier(struct mcoll_comm *c);

#endif
