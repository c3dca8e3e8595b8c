/* The pause inside a polling loop, shared by libmcoll's flag waits (shm/wait.c) and the
 * thread ranks' waits (threads/runtime.c): it tells the core that this is a spin (a
 * sibling hyperthread gets the pipeline, and the loop leaves the memory order machine
 * alone), at a fraction of a yield's cost. */
#ifndef MCOLL_CORE_RELAX_H
#define MCOLL_CORE_RELAX_H

static inline void mcoll__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
