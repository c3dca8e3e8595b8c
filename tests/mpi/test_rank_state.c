/* test_rank_state: the process state each rank of mcollrun --threads has of its own
 * (globals, constructors, argv and getopt, environ, stdio buffers, atexit, exit,
 * locale-dependent formatting) and what its ranks share with the others of their
 * process (pid, cwd, signal handlers). Prints one "state rank R: ..." line per rank
 * (buffered stdout, flushed at the rank's end) and "atexit rank R" from an atexit
 * handler; the last rank ends with exit() after MPI_Finalize.
 * usage: test_rank_state -t TAG [-v] */
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int counter;           /* a global: 1 in every rank if each has its own */
static int constructed;
static char buffer[64] = "untouched";
static int rank;

__attribute__((constructor)) static void construct(void)
{
  constructed++;
}

static void at_exit(void)
{
  printf("atexit rank %d counter %d\n", rank, counter);
}

static void on_usr1(int sig)
{
  (void)sig;
}

int main(int argc, char **argv)
{
  const char *tag = "none";
  int verbose = 0, opt;
  while ((opt = getopt(argc, argv, "t:v")) != -1) {
    if (opt == 't')
      tag = optarg;
    else if (opt == 'v')
      verbose = 1;
  }
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  atexit(at_exit);
  counter++;
  snprintf(buffer, sizeof buffer, "rank-%d", rank);

  /* environ: each rank sets the same variable to its own value. */
  char value[32];
  snprintf(value, sizeof value, "%d", rank);
  setenv("MCOLL_TEST_RANK_STATE", value, 1);
  MPI_Barrier(MPI_COMM_WORLD);
  const char *env = getenv("MCOLL_TEST_RANK_STATE");
  int own_env = env && strcmp(env, value) == 0;

  /* Shared with the other ranks of the process: the signal disposition and the cwd
   * set by the lowest rank of each process pair are seen by the next. */
  int pid = (int)getpid();
  int pids[2] = {pid, rank};
  int *all = malloc((size_t)size * sizeof pids);
  MPI_Allgather(pids, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
  int first_of_process = rank == 0 || all[2 * (rank - 1)] != pid;
  if (first_of_process) {
    signal(SIGUSR1, on_usr1);
    if (chdir("/") != 0)
      perror("chdir");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  struct sigaction seen;
  sigaction(SIGUSR1, NULL, &seen);
  char cwd[256] = "";
  if (!getcwd(cwd, sizeof cwd))
    strcpy(cwd, "?");
  int shared_signal = seen.sa_handler != SIG_DFL, shared_cwd = strcmp(cwd, "/") == 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (first_of_process)
    signal(SIGUSR1, SIG_DFL);

  printf("state rank %d: counter %d constructed %d buffer %s tag %s verbose %d env %d "
         "float %.3f pid %d signal-shared %d cwd-shared %d argc %d\n",
         rank, counter, constructed, buffer, tag, verbose, own_env, 2.5 * (rank + 1), pid,
         shared_signal, shared_cwd, argc);
  free(all);
  MPI_Finalize();
  if (rank == size - 1)
    exit(0);
  return 0;
}
