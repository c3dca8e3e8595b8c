/* mcoll-threads: loads the host MPI library by its path, then the thread-rank runtime
 * (libmcoll-threads.so, which needs it) and runs it. It links no MPI itself: the rank
 * namespaces find the stand-in under the host library's soname through
 * LD_LIBRARY_PATH, which must not give this process the stand-in. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  if (!dlopen(MCOLL_THREADS_MPI_LIBRARY, RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "mcoll threads: %s\n", dlerror());
    return 2;
  }
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  path[n > 0 ? n : 0] = 0;
  char *slash = strrchr(path, '/');
  if (slash)
    *slash = 0;
  char runtime[PATH_MAX + 64];
  snprintf(runtime, sizeof runtime, "%s/../lib/libmcoll-threads.so", path);
  void *handle = dlopen(runtime, RTLD_NOW);
  int (*run)(int, char **) = handle ? (int (*)(int, char **))dlsym(handle, "mcoll_threads_main") : NULL;
  if (!run) {
    fprintf(stderr, "mcoll threads: %s\n", dlerror());
    return 2;
  }
  return run(argc, argv);
}
