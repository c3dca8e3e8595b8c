/* Per-thread state of the hot paths. The library is preloaded or linked at start-up,
 * never dlopen'ed, so its thread-locals can live in the static TLS block and be read
 * without a __tls_get_addr call each time. */
#ifndef MCOLL_TLS_H
#define MCOLL_TLS_H

#define MCOLL_TLS _Thread_local __attribute__((tls_model("initial-exec")))

#endif
