/* The process of T thread ranks (libmcoll-threads.so, entered from mcoll-threads):
 * each rank runs the program's main on its own thread, in its own link namespace
 * (own globals, libc, stdio, malloc), with the stand-in MPI library there.
 *   mcoll-threads T program [args]     run
 *   mcoll-threads --check program      say whether program can run as thread ranks */
#include <dlfcn.h>
#include <sched.h>
#include <time.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf.h"
#include "runtime.h"

/* glibc has 16 link namespaces; the base one holds the runtime. */
enum { MAX_THREADS = 15 };

extern char **environ;

static void standin_dir(char *out, size_t size)
{
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  char *slash = strrchr(exe, '/');
  if (slash)
    *slash = 0;
  if (snprintf(out, size, "%s/../lib/threads", exe) >= (int)size)
    out[0] = 0;
}

/* The namespaces need these from the process's start: glibc reads GLIBC_TUNABLES
 * (16 namespaces, else static TLS runs out after a few) and LD_LIBRARY_PATH (where
 * the stand-in is found) only then. Sets them and starts over when missing. */
static void ensure_start_environment(char **argv)
{
  char dir[PATH_MAX];
  standin_dir(dir, sizeof dir);
  const char *tunables = getenv("GLIBC_TUNABLES"), *path = getenv("LD_LIBRARY_PATH");
  int need_tunables = !tunables || !strstr(tunables, "glibc.rtld.nns=");
  int need_path = !path || !strstr(path, dir);
  if (!need_tunables && !need_path)
    return;
  if (getenv("MCOLL_THREADS_RESTARTED")) {
    fprintf(stderr, "mcoll threads: GLIBC_TUNABLES or LD_LIBRARY_PATH did not take effect\n");
    exit(2);
  }
  char value[8192];
  if (need_tunables) {
    snprintf(value, sizeof value, "%s%sglibc.rtld.nns=16", tunables ? tunables : "",
             tunables && *tunables ? ":" : "");
    setenv("GLIBC_TUNABLES", value, 1);
  }
  if (need_path) {
    snprintf(value, sizeof value, "%s%s%s", dir, path && *path ? ":" : "", path ? path : "");
    setenv("LD_LIBRARY_PATH", value, 1);
  }
  setenv("MCOLL_THREADS_RESTARTED", "1", 1);
  execv("/proc/self/exe", argv);
  perror("mcoll threads: execv /proc/self/exe");
  exit(2);
}

static char **copy_strings(char **strings, int n)
{
  char **copy = calloc((size_t)n + 1, sizeof *copy);
  for (int i = 0; i < n; i++)
    copy[i] = strdup(strings[i]);
  return copy;
}

static int count_strings(char **strings)
{
  int n = 0;
  while (strings[n])
    n++;
  return n;
}

/* Does the program's copy relocations (see struct thr_copy_reloc): the value comes
 * from the first other object of the namespace that defines the symbol. */
static void copy_relocations(struct thr_rank *r, const struct thr_program *program,
                             struct link_map *map, Lmid_t ns)
{
  for (int i = 0; i < program->ncopies; i++) {
    const struct thr_copy_reloc *c = &program->copies[i];
    void *from = NULL;
    for (struct link_map *lm = map->l_next; lm && !from; lm = lm->l_next) {
      void *h = dlmopen(ns, lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
      if (!h)
        continue;
      from = dlsym(h, c->name);
      dlclose(h);
    }
    if (!from)
      thr_fatal("rank %d: no definition of %s for the program's copy", r->world, c->name);
    memcpy((char *)map->l_addr + c->offset, from, c->size);
  }
}

static void load_rank(struct thr_rank *r, const struct thr_program *program, int argc,
                      char **argv)
{
  void *handle = dlmopen(LM_ID_NEWLM, program->path, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    thr_fatal("rank %d: cannot load the program: %s", r->world, dlerror());
  struct link_map *map;
  dlinfo(handle, RTLD_DI_LINKMAP, &map);
  r->main = (int (*)(int, char **, char **))(map->l_addr + program->main_offset);
  Lmid_t ns;
  dlinfo(handle, RTLD_DI_LMID, &ns);
  copy_relocations(r, program, map, ns);
  thr_standin_bind_fn *bind = (thr_standin_bind_fn *)dlsym(handle, "mcoll_threads_standin_bind");
  if (!bind)
    thr_fatal("rank %d: the program's namespace has the real MPI library, not the stand-in",
              r->world);
  bind(r, &thr_runtime_api);
  r->ctype_init = (void (*)(void))dlsym(handle, "__ctype_init");
  r->cxa_finalize = (void (*)(void *))dlsym(handle, "__cxa_finalize");
  r->fflush = (int (*)(void *))dlsym(handle, "fflush");
  char ***ns_environ = dlsym(handle, "environ"), ***ns_libc_environ = dlsym(handle, "__environ");
  if (!r->ctype_init || !r->cxa_finalize || !r->fflush || !ns_environ || !ns_libc_environ)
    thr_fatal("rank %d: the namespace's libc lacks __ctype_init, __cxa_finalize, fflush or "
              "environ", r->world);
  r->argc = argc;
  r->argv = copy_strings(argv, argc);
  r->envp = copy_strings(environ, count_strings(environ));
  *ns_environ = *ns_libc_environ = r->envp;
}

static void *rank_thread(void *arg)
{
  struct thr_rank *r = arg;
  thr_self = r;
  r->ctype_init(); /* the namespace's locale tables are per thread */
  if (setjmp(r->exit_jump) == 0) {
    r->exit_status = r->main(r->argc, r->argv, r->envp);
    r->cxa_finalize(NULL);
    r->fflush(NULL);
  }
  if (r->exit_status != 0 && !r->finalized) {
    fprintf(stderr, "mcoll threads: rank %d exited with status %d before MPI_Finalize\n",
            r->world, r->exit_status);
    fflush(stderr);
    PMPI_Abort(MPI_COMM_WORLD, r->exit_status);
  }
  return NULL;
}

/* Resident memory of this process in KiB. */
/* Each thread rank on a CPU of its own, as the host MPI binds process ranks, when the
 * node's thread ranks are no more than this process's CPUs (MCOLL_THREADS_BIND=0: not
 * bound). Left to the kernel, a new thread starts on its creator's CPU and may share
 * it with the rank it waits for until the load balancer moves it (ms). */
static void bind_rank_thread(pthread_attr_t *attr, int threads, int t)
{
  const char *bind = getenv("MCOLL_THREADS_BIND");
  cpu_set_t allowed;
  if ((bind && atoi(bind) == 0) || sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      threads * thr_proc.node_processes > thr_proc.cpus)
    return;
  int nth = thr_proc.node_index * threads + t;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &allowed) && nth-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_attr_setaffinity_np(attr, sizeof one, &one);
      return;
    }
}

static long resident_kib(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
      break;
  if (f)
    fclose(f);
  return kib;
}

static double seconds_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void)
{
  fprintf(stderr, "usage: mcoll-threads T program [args] | mcoll-threads --check program\n");
  return 2;
}

__attribute__((visibility("default"))) int mcoll_threads_main(int argc, char **argv)
{
  char why[4096 + 512];
  struct thr_program program = {0};
  if (argc == 3 && strcmp(argv[1], "--check") == 0) {
    if (thr_program_prepare(argv[2], MCOLL_THREADS_MPI_SONAMES, &program, why, sizeof why) != 0) {
      fprintf(stderr, "mcoll threads: cannot run as thread ranks: %s\n", why);
      return 2;
    }
    thr_program_remove(&program);
    return 0;
  }
  if (argc < 3)
    return usage();
  char *end;
  long threads = strtol(argv[1], &end, 10);
  if (*end || threads < 1 || threads > MAX_THREADS) {
    fprintf(stderr, "mcoll threads: %s thread ranks per process: from 1 to %d (glibc has 16 "
            "link namespaces, one is the runtime's)\n", argv[1], MAX_THREADS);
    return 2;
  }
  ensure_start_environment(argv);
  if (thr_program_prepare(argv[2], MCOLL_THREADS_MPI_SONAMES, &program, why, sizeof why) != 0) {
    fprintf(stderr, "mcoll threads: cannot run as thread ranks: %s\n", why);
    return 2;
  }
  int provided;
  PMPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    thr_program_remove(&program);
    thr_fatal("the host MPI gives thread level %d, thread ranks need MPI_THREAD_MULTIPLE",
              provided);
  }
  thr_runtime_init((int)threads, &thr_coll_nbc_calls);
  /* MCOLL_THREADS_REPORT=1: what loading the ranks costs (first process). */
  int report = getenv("MCOLL_THREADS_REPORT") && atoi(getenv("MCOLL_THREADS_REPORT")) > 0;
  long rss_before = resident_kib();
  double load_start = seconds_now();
  for (int t = 0; t < threads; t++)
    load_rank(&thr_proc.ranks[t], &program, argc - 2, argv + 2);
  if (report && thr_proc.process == 0)
    fprintf(stderr, "mcoll threads: %ld ranks loaded in %.1f ms, resident memory +%ld KiB\n",
            threads, 1e3 * (seconds_now() - load_start), resident_kib() - rss_before);
  thr_program_remove(&program); /* (mapped: the descriptor is no longer needed) */

  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  for (int t = 0; t < threads; t++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    bind_rank_thread(&attr, (int)threads, t);
    if (pthread_create(&ids[t], &attr, rank_thread, &thr_proc.ranks[t]) != 0)
      thr_fatal("cannot start thread rank %d", thr_proc.ranks[t].world);
    pthread_attr_destroy(&attr);
  }
  int status = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(ids[t], NULL);
    if (thr_proc.ranks[t].exit_status > status)
      status = thr_proc.ranks[t].exit_status;
  }
  thr_runtime_finalize();
  PMPI_Finalize();
  return status;
}
