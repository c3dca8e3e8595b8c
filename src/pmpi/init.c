/* Start-up and shutdown; communicator contexts are freed by their attribute's
 * delete callback (MPI_Comm_free only completes the calls in flight: pmpi/nbc.c). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/adapt.h"
#include "coll/alltoall/alltoall.h"
#include "core/xmalloc.h"
#include "core/host_progress.h"
#include "shm/call.h"
#include "shm/shm.h"
#include "task/progress_thread.h"
#include "topo/topo.h"
#include "pmpi/wrap.h"

/* Writes text one line per write(2): stderr is unbuffered, and a line made of several
 * writes could be split by another process's output on the launcher's stream. */
static void write_lines(const char *text, size_t length) {
  for (size_t at = 0; at < length;) {
    const char *end = memchr(text + at, '\n', length - at);
    size_t line = end ? (size_t)(end - (text + at)) + 1 : length - at;
    for (size_t done = 0; done < line;) {
      ssize_t n = write(STDERR_FILENO, text + at + done, line - done);
      if (n <= 0) break;
      done += (size_t)n;
    }
    at += line;
  }
}

static void report(void) {
  int rank, size;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  int every_rank = mcoll__cfg.VERBOSE >= 2; /* each rank's adaptive choice too */
  if (rank != 0 && !every_rank) return;
  char *text = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  if (!out) return;
  if (rank == 0) {
    fprintf(out, "mcoll: report of rank 0 of %d (%s)\n", size, MCOLL_FLAVOUR);
    mcoll__stats_report(out);
    mcoll__context_report(out);
    mcoll__wait_report(out);
    mcoll__task_report(out);
    mcoll__progress_thread_report(out);
    mcoll__tnbc_report(out);
    mcoll__tnbc_adapt_report(out);
  }
  mcoll__adapt_report(out, rank);
  fclose(out);
  if (!every_rank || size == 1) {
    write_lines(text, length);
    free(text);
    return;
  }
  /* Rank 0 writes every rank's lines: the launcher forwards each process's output in
   * chunks of its own size, so lines written by several processes at once can be cut
   * and mixed (a test then missed one rank's line). MPI_Finalize is collective. */
  int mine = length > INT32_MAX ? INT32_MAX : (int)length;
  int *lengths = rank == 0 ? mcoll__xmalloc((size_t)size * sizeof *lengths) : NULL;
  int *offsets = rank == 0 ? mcoll__xmalloc((size_t)size * sizeof *offsets) : NULL;
  PMPI_Gather(&mine, 1, MPI_INT, lengths, 1, MPI_INT, 0, MPI_COMM_WORLD);
  char *all = NULL;
  size_t total = 0;
  if (rank == 0) {
    for (int r = 0; r < size; r++) {
      offsets[r] = (int)total;
      total += (size_t)lengths[r];
    }
    all = mcoll__xmalloc(total ? total : 1);
  }
  PMPI_Gatherv(text, mine, MPI_CHAR, all, lengths, offsets, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) write_lines(all, total);
  free(all);
  free(offsets);
  free(lengths);
  free(text);
}

/* The MPI this library was built for: flavour and major version. */
#if defined(OPEN_MPI)
#define BUILT_FOR "Open MPI", OMPI_MAJOR_VERSION
#elif defined(MPICH_VERSION)
#define BUILT_FOR "MPICH", MPICH_NUMVERSION / 10000000
#endif

/* Whether the MPI the program runs (the library its own MPI_* calls reach: the first
 * in the process's symbol order, asked before MPI_Init) is the one mcoll was built
 * for. Another flavour has other handles and another ABI: mcoll would crash in it. */
static int host_mpi_matches(char *running, size_t size) {
  /* Sized for any MPI: the one running may have a larger MPI_MAX_LIBRARY_VERSION_STRING
   * than the one compiled against (MPICH 8192, Open MPI 256). */
  static char version[65536];
  int len = 0;
  PMPI_Get_library_version(version, &len);
  const char *flavour;
  int major;
  struct { const char *name; int major; } built = {BUILT_FOR};
  const char *mpich = strstr(version, "MPICH Version:");
  if (strstr(version, "Open MPI")) {
    flavour = "Open MPI";
    const char *v = strstr(version, " v");
    major = v ? atoi(v + 2) : -1;
  } else if (mpich) {
    flavour = "MPICH";
    major = atoi(mpich + strlen("MPICH Version:") + strspn(mpich + strlen("MPICH Version:"),
                                                           " \t"));
  } else if (strstr(version, "Intel(R) MPI")) {
    flavour = "Intel MPI"; /* MPICH's ABI */
    major = -1;
  } else {
    flavour = "an unknown MPI";
    major = -1;
  }
  snprintf(running, size, "%s %d", flavour, major);
  /* Intel MPI keeps MPICH's ABI (libmpi.so.12): the MPICH build runs in it. */
  if (!strcmp(built.name, "MPICH") && !strcmp(flavour, "Intel MPI")) return 1;
  return !strcmp(flavour, built.name) && major == built.major;
}

/* Before the host's init: a program of another MPI gets its MPI alone, and one line
 * (from the first rank, where the launcher says which). */
static void check_host_mpi(void) {
  mcoll__config_load();
  char running[64];
  if (mcoll__cfg.DISABLE || host_mpi_matches(running, sizeof running)) return;
  mcoll__cfg.DISABLE = 1;
  /* Disabled, every call goes to the host as it came; that needs handles at least as
   * wide as the running MPI's: Open MPI's (pointers) carry MPICH's (int), not the
   * other way round. */
#ifdef OPEN_MPI
  int passes_through = 1;
#else
  int passes_through = !strncmp(running, "MPICH", 5) || !strncmp(running, "Intel", 5);
#endif
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = getenv("PMI_RANK");
  if (!rank || !strcmp(rank, "0") || !passes_through) {
    struct { const char *name; int major; } built = {BUILT_FOR};
    fprintf(stderr, "mcoll: built for %s %d, but this program runs %s: %s (use the mcoll build for "
            "that MPI)\n", built.name, built.major, running,
            passes_through ? "mcoll disables itself" : "its handles do not fit mcoll's calls, stopping");
  }
  if (!passes_through) exit(1);
}

/* Collective over MPI_COMM_WORLD, once the host MPI runs; once (the Fortran entry
 * points of fortran.c may reach MPI_Init too). */
static atomic_int started_once, finished_once;
void mcoll__before_init(void) {
  check_host_mpi();
  if (!mcoll__cfg.DISABLE) mcoll__flag_fence_register(); /* (while the process has one thread) */
}

/* MCOLL_PROGRESS_THREAD: 0 (none), 1 or auto (the default). */
static int progress_thread_wanted(void) {
  mcoll__config_load();
  return !mcoll__cfg.DISABLE && strcmp(mcoll__cfg.PROGRESS_THREAD, "0") != 0 &&
         mcoll__cfg.PROGRESS_THREAD[0] != '\0';
}

void mcoll__started(void) {
  if (mcoll__cfg.DISABLE || atomic_exchange(&started_once, 1)) return;
  mcoll__wait_set_poll(mcoll__call_poll);
  mcoll__host_progress_init();
  mcoll__topo_world_init();
  mcoll__cores_shared = mcoll__topo_world_cores_shared();
  mcoll__a2a_machine_init();
  if (progress_thread_wanted()) {
    int provided = MPI_THREAD_SINGLE, rank = 0;
    PMPI_Query_thread(&provided);
    /* 1 (and T-NBC, which needs it from the first call): now; auto: when a
     * non-blocking collective is first left pending. */
    int now = strcmp(mcoll__cfg.PROGRESS_THREAD, "auto") != 0 || mcoll__cfg.TNBC;
    if (provided == MPI_THREAD_MULTIPLE && now) mcoll__progress_thread_start();
    else if (provided == MPI_THREAD_MULTIPLE) mcoll__progress_thread_on_demand();
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!mcoll__progress_thread_running() && strcmp(mcoll__cfg.PROGRESS_THREAD,
                                                    "1") == 0 && rank == 0)
      fprintf(stderr, "mcoll: MCOLL_PROGRESS_THREAD=1 but the host MPI did not grant "
                      "MPI_THREAD_MULTIPLE: no progress thread\n");
  }
  int world_rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  /* (needs the progress thread) */
  mcoll__tnbc_start(world_rank, &(struct mcoll_tnbc_collectives){MPI_Allreduce, MPI_Bcast});
}

void mcoll__finishing(void) {
  mcoll__smpi_finish(); /* (SMPI works with mcoll disabled too) */
  if (mcoll__cfg.DISABLE || atomic_exchange(&finished_once, 1)) return;
  mcoll__tnbc_stop(); /* (a program may exit right after its last collective) */
  mcoll__progress_thread_stop();
  if (mcoll__cfg.VERBOSE) report();
  mcoll__comm_free_all();
  mcoll__topo_world_free();
  mcoll__types_release();
  mcoll__host_progress_finalize();
}

/* With a progress thread wanted, mcoll asks the host for MPI_THREAD_MULTIPLE (its
 * thread calls the host MPI, also while an application of MPI_THREAD_SINGLE or
 * FUNNELED is inside the host) and tells the application what it asked for, at most
 * what the host granted; MPI_Query_thread says the same. */
static int init_thread(int *argc, char ***argv, int required, int *provided) {
  mcoll__before_init();
  int rc, granted = MPI_THREAD_SINGLE;
  if (progress_thread_wanted()) {
    rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &granted);
    if (rc == MPI_SUCCESS) mcoll__app_thread_level = required < granted ? required : granted;
    if (provided) *provided = mcoll__app_thread_level;
  } else {
    rc = provided ? PMPI_Init_thread(argc, argv, required, provided) : PMPI_Init(argc, argv);
  }
  if (rc == MPI_SUCCESS) mcoll__started();
  return rc;
}

MCOLL_EXPORT int MPI_Init(int *argc, char ***argv) {
  return init_thread(argc, argv, MPI_THREAD_SINGLE, NULL);
}

MCOLL_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  return init_thread(argc, argv, required, provided);
}

MCOLL_EXPORT int MPI_Query_thread(int *provided) {
  if (mcoll__app_thread_level >= 0 && provided) {
    *provided = mcoll__app_thread_level;
    return MPI_SUCCESS;
  }
  return PMPI_Query_thread(provided);
}

MCOLL_EXPORT int MPI_Finalize(void) {
  mcoll__finishing();
  return PMPI_Finalize();
}

