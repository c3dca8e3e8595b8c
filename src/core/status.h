/* One status type for the library's internal calls; strings from one list. */
#ifndef MCOLL_STATUS_H
#define MCOLL_STATUS_H

#define MCOLL_STATUSES(X)                                   \
  X(OK, "success")                                          \
  X(ERR_NOMEM, "out of memory")                             \
  X(ERR_SHM, "shared memory segment could not be set up")   \
  X(ERR_MPI, "a host MPI call failed")                      \
  X(ERR_TOPO, "hierarchy discovery failed")

typedef enum {
#define MCOLL_STATUS_ENUM(name, text) MCOLL_##name,
  MCOLL_STATUSES(MCOLL_STATUS_ENUM)
#undef MCOLL_STATUS_ENUM
} mcoll_status;

const char *mcoll__status_str(mcoll_status status);

/* Jump to the function's single cleanup label on failure. */
#define MCOLL_CHECK(expr)                 \
  do {                                    \
    status = (expr);                      \
    if (status != MCOLL_OK) goto cleanup; \
  } while (0)

#define MCOLL_CHECK_MPI(expr)                            \
  do {                                                   \
    if ((expr) != MPI_SUCCESS) {                         \
      status = MCOLL_ERR_MPI;                            \
      goto cleanup;                                      \
    }                                                    \
  } while (0)

#endif
