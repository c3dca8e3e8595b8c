/* Why a call goes to the host MPI although mcoll has an algorithm for it: known
 * below the collectives (a communicator without a context is one reason), counted
 * and reported by them (coll/stats.c). */
#ifndef MCOLL_FALLBACK_H
#define MCOLL_FALLBACK_H

/* Why a call went to the host MPI although mcoll has an algorithm for it. */
#define MCOLL_FALLBACK_REASONS(X)                                  \
  X(INTERCOMM, "intercommunicator")                                \
  X(NO_CONTEXT, "no shared-memory context for this communicator")  \
  X(DATATYPE, "datatype not supported")                            \
  X(OP, "reduction op not supported")                              \
  X(NBC, "non-blocking call on a communicator without a task-ready context") \
  X(FORCED, "forced algorithm cannot run here, the normal choice ran")

enum mcoll_fallback_reason {
#define MCOLL_REASON_ENUM(name, text) MCOLL_WHY_##name,
  MCOLL_FALLBACK_REASONS(MCOLL_REASON_ENUM)
#undef MCOLL_REASON_ENUM
  MCOLL_NREASONS
};

#endif
