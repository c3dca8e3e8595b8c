/* The program as a loadable object: a private copy with DF_1_PIE cleared (glibc
 * refuses to dlopen an executable). */
#ifndef MCOLL_THREADS_ELF_H
#define MCOLL_THREADS_ELF_H

#include <stddef.h>

/* A copy relocation of the program (R_X86_64_COPY): glibc treats a dlopened program
 * as a library and resolves it to the program's own zeroed copy, so the loader
 * copies the library's initial value itself. */
struct thr_copy_reloc {
  size_t offset; /* relative to the load base */
  size_t size;
  char name[128];
};

struct thr_program {
  char path[4096];      /* the patched copy (/proc/self/fd/<fd> once written) */
  char dir[4096];       /* its private folder, while it is written */
  int fd;               /* the copy, open (its file is already removed) */
  size_t main_offset;   /* main's address relative to the load base */
  struct thr_copy_reloc *copies;
  int ncopies;
};

/* Checks program and writes the patched copy into a new private folder; on refusal
 * returns -1 with the reason in why. mpi_sonames: the host MPI's libraries a program
 * links (C, Fortran), separated by spaces. */
int thr_program_prepare(const char *program, const char *mpi_sonames, struct thr_program *out,
                        char *why, size_t why_size);
/* Closes (or removes) the copy. */
void thr_program_remove(struct thr_program *p);

#endif
