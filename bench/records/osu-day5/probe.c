// Core-to-core probe (bench/records/osu-day5): a cache-line ping-pong and a 1 MiB dirty handoff
// between two threads on CPUs 0 and 1. Build: gcc -O2 -pthread -o probe probe.c
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
enum { ROUNDS = 20000, HAND = 200, BYTES = 1 << 20 };
static _Alignas(64) atomic_int ping;
static _Alignas(64) atomic_int turn;
static char *buf;
static volatile long sink;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
static void *other(void *arg) {
  (void)arg; pin(1);
  for (int i = 0; i < ROUNDS; i++) { while (atomic_load(&ping) != 2 * i + 1) ; atomic_store(&ping, 2 * i + 2); }
  for (int i = 0; i < HAND; i++) {
    while (atomic_load(&turn) != 2 * i + 1) ;
    long s = 0; for (size_t k = 0; k < BYTES; k += 64) s += buf[k]; sink = s;
    memset(buf, i, BYTES);
    atomic_store(&turn, 2 * i + 2);
  }
  return NULL;
}
int main(void) {
  buf = aligned_alloc(4096, BYTES); memset(buf, 1, BYTES);
  pthread_t t; pin(0); pthread_create(&t, NULL, other, NULL);
  double t0 = now();
  for (int i = 0; i < ROUNDS; i++) { atomic_store(&ping, 2 * i + 1); while (atomic_load(&ping) != 2 * i + 2) ; }
  double t1 = now();
  for (int i = 0; i < HAND; i++) {
    memset(buf, i, BYTES);
    atomic_store(&turn, 2 * i + 1);
    while (atomic_load(&turn) != 2 * i + 2) ;
    long s = 0; for (size_t k = 0; k < BYTES; k += 64) s += buf[k]; sink = s;
  }
  double t2 = now();
  pthread_join(t, NULL);
  printf("probe: line round trip %.0f ns; 1 MiB dirty handoff (write, other core reads + writes, back) %.1f us\n",
         (t1 - t0) / ROUNDS, (t2 - t1) / HAND / 1e3);
  return 0;
}
