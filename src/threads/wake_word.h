/* The word a process's sleeping thread ranks wait on (waits.c), and how an event wakes
 * them. A process of a node whose messages all take the node's rings keeps its word in
 * the node's segment (node_copy.c), so that another process's message, freed slot or
 * released send wakes it; otherwise the word is the process's own. */
#ifndef MCOLL_THREADS_WAKE_WORD_H
#define MCOLL_THREADS_WAKE_WORD_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* seq moves only when somebody sleeps; every event reads sleepers (a line shared while
 * nobody sleeps). woken: a wake-up went out since the last sleeper armed, so the events
 * until one runs again need no system call (sharing cores, a woken sleeper may wait a
 * time slice for one, while the others' events go on). exact (set once by the word's
 * process): its waits may sleep at once, so an event must order its store before its
 * look at sleepers. shared: the word is in memory other processes map (a futex on it is
 * not private). */
struct thr_wake_word {
  _Alignas(64) atomic_uint seq;
  _Alignas(64) atomic_int sleepers;
  atomic_int woken;
  int exact;
  int shared;
};

/* Without exact, the fence (which waits for the event's store to leave the core: a
 * cache-line round trip on every event of the small collectives) is left out: a sleeper
 * has yielded for a while already, and a wake-up lost to the race costs it at most one
 * sleep. With it, Dekker with the sleeper's increment then look: either it sees the
 * event, or this sees it and moves seq, which its futex compares. */
static inline void thr_wake_word_wake(struct thr_wake_word *w)
{
  if (w->exact)
    atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&w->sleepers, memory_order_relaxed) == 0 ||
      atomic_load_explicit(&w->woken, memory_order_relaxed) ||
      atomic_exchange(&w->woken, 1))
    return;
  atomic_fetch_add(&w->seq, 1);
  syscall(SYS_futex, &w->seq, w->shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#endif
