/* The program as a loadable object: a private copy with DF_1_PIE cleared (glibc
 * refuses to dlopen an executable) and the host MPI's library renamed, so that the
 * rank namespaces load the stand-in of that soname instead of the real library. */
#ifndef MCOLL_THREADS_ELF_H
#define MCOLL_THREADS_ELF_H

#include <stddef.h>

struct thr_program {
  char path[4096];      /* the patched copy */
  char dir[4096];       /* its private folder */
  size_t main_offset;   /* main's address relative to the load base */
};

/* Checks program and writes the patched copy into a new private folder; on refusal
 * returns -1 with the reason in why. mpi_soname is the host library's soname,
 * standin_name the same-length name the copy needs instead. */
int thr_program_prepare(const char *program, const char *mpi_soname, const char *standin_name,
                        struct thr_program *out, char *why, size_t why_size);
/* Removes the copy and its folder. */
void thr_program_remove(struct thr_program *p);

#endif
