/* Reading and patching the program's ELF image (64-bit, little-endian x86-64). */
#include "elf.h"

#include <elf.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int refuse(char *why, size_t size, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return -1;
}

static unsigned char *read_file(const char *path, size_t *size)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = n > 0 ? malloc((size_t)n) : NULL;
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = data ? (size_t)n : 0;
  return data;
}

/* File offset of a virtual address (through the PT_LOAD segments), or 0. */
static size_t offset_of(const Elf64_Phdr *ph, int n, Elf64_Addr addr)
{
  for (int i = 0; i < n; i++)
    if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr && addr < ph[i].p_vaddr + ph[i].p_filesz)
      return (size_t)(addr - ph[i].p_vaddr + ph[i].p_offset);
  return 0;
}

static int find_main(const unsigned char *data, size_t size, size_t *main_offset)
{
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)data;
  if (eh->e_shoff == 0 || eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size)
    return -1;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(data + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
      continue;
    const Elf64_Sym *sym = (const Elf64_Sym *)(data + sh[i].sh_offset);
    const char *names = (const char *)data + sh[sh[i].sh_link].sh_offset;
    size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < count; k++)
      if (ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC && sym[k].st_shndx != SHN_UNDEF &&
          strcmp(names + sym[k].st_name, "main") == 0) {
        *main_offset = sym[k].st_value;
        return 0;
      }
  }
  return -1;
}

static void find_copy_relocs(const unsigned char *data, const Elf64_Phdr *ph, int nph,
                             const Elf64_Dyn *dyn, size_t ndyn, struct thr_program *out)
{
  size_t rela = 0, relasz = 0, symtab = 0, strtab = 0;
  for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
    if (dyn[i].d_tag == DT_RELA)
      rela = offset_of(ph, nph, dyn[i].d_un.d_ptr);
    else if (dyn[i].d_tag == DT_RELASZ)
      relasz = dyn[i].d_un.d_val;
    else if (dyn[i].d_tag == DT_SYMTAB)
      symtab = offset_of(ph, nph, dyn[i].d_un.d_ptr);
    else if (dyn[i].d_tag == DT_STRTAB)
      strtab = offset_of(ph, nph, dyn[i].d_un.d_ptr);
  }
  if (!rela || !symtab || !strtab)
    return;
  const Elf64_Rela *r = (const Elf64_Rela *)(data + rela);
  size_t n = relasz / sizeof *r;
  for (size_t i = 0; i < n; i++) {
    if (ELF64_R_TYPE(r[i].r_info) != R_X86_64_COPY)
      continue;
    const Elf64_Sym *sym = (const Elf64_Sym *)(data + symtab) + ELF64_R_SYM(r[i].r_info);
    out->copies = realloc(out->copies, (size_t)(out->ncopies + 1) * sizeof *out->copies);
    struct thr_copy_reloc *c = &out->copies[out->ncopies++];
    c->offset = r[i].r_offset;
    c->size = sym->st_size;
    snprintf(c->name, sizeof c->name, "%s", (const char *)data + strtab + sym->st_name);
  }
}

/* Is name one of the space-separated words of list? */
static int one_of(const char *name, const char *list)
{
  size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)); p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
      return 1;
  return 0;
}

int thr_program_prepare(const char *program, const char *mpi_sonames, struct thr_program *out,
                        char *why, size_t why_size)
{
  size_t size;
  unsigned char *data = read_file(program, &size);
  if (!data)
    return refuse(why, why_size, "cannot read %s", program);
  int rc = -1;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)data;
  if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64) {
    refuse(why, why_size, "%s is not a 64-bit ELF program", program);
    goto done;
  }
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(data + eh->e_phoff);
  const Elf64_Phdr *dynamic = NULL;
  int interp = 0;
  for (int i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_type == PT_DYNAMIC)
      dynamic = &ph[i];
    if (ph[i].p_type == PT_INTERP)
      interp = 1;
  }
  if (!dynamic || !interp) {
    refuse(why, why_size, "%s is statically linked: thread ranks need a dynamically linked "
           "program", program);
    goto done;
  }
  if (eh->e_type != ET_DYN) {
    refuse(why, why_size, "%s is not position-independent (build it with -fPIE -pie, the "
           "default of Debian's compilers)", program);
    goto done;
  }
  Elf64_Dyn *dyn = (Elf64_Dyn *)(data + dynamic->p_offset);
  size_t ndyn = dynamic->p_filesz / sizeof *dyn;
  size_t strtab = 0;
  for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++)
    if (dyn[i].d_tag == DT_STRTAB)
      strtab = offset_of(ph, eh->e_phnum, dyn[i].d_un.d_ptr);
  int links_mpi = 0;
  for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
    if (dyn[i].d_tag == DT_FLAGS_1)
      dyn[i].d_un.d_val &= ~(Elf64_Xword)DF_1_PIE;
    if (dyn[i].d_tag == DT_NEEDED && strtab &&
        one_of((const char *)data + strtab + dyn[i].d_un.d_val, mpi_sonames))
      links_mpi = 1;
  }
  if (!links_mpi) {
    refuse(why, why_size, "%s links none of %s (the host MPI of this launcher)", program,
           mpi_sonames);
    goto done;
  }
  find_copy_relocs(data, ph, eh->e_phnum, dyn, ndyn, out);
  if (find_main(data, size, &out->main_offset) != 0) {
    refuse(why, why_size, "%s has no symbol table with main (stripped?)", program);
    goto done;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(out->dir, sizeof out->dir, "%s/mcoll-threads-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(out->dir)) {
    refuse(why, why_size, "cannot create a folder in %s", tmp && *tmp ? tmp : "/tmp");
    goto done;
  }
  const char *base = strrchr(program, '/');
  if (snprintf(out->path, sizeof out->path, "%s/%s", out->dir, base ? base + 1 : program) >=
      (int)sizeof out->path) {
    rmdir(out->dir);
    refuse(why, why_size, "the path of %s is too long", program);
    goto done;
  }
  int fd = open(out->path, O_WRONLY | O_CREAT | O_TRUNC, 0700);
  if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
    if (fd >= 0)
      close(fd);
    thr_program_remove(out);
    refuse(why, why_size, "cannot write %s", out->path);
    goto done;
  }
  /* Removed at once and loaded through the open descriptor: nothing is left behind
   * however the process ends. */
  unlink(out->path);
  rmdir(out->dir);
  out->dir[0] = 0;
  out->fd = fd;
  snprintf(out->path, sizeof out->path, "/proc/self/fd/%d", fd);
  rc = 0;
done:
  free(data);
  return rc;
}

void thr_program_remove(struct thr_program *p)
{
  if (p->fd > 0)
    close(p->fd);
  else if (p->path[0])
    unlink(p->path);
  p->fd = 0;
  if (p->dir[0])
    rmdir(p->dir);
  p->path[0] = p->dir[0] = 0;
  free(p->copies);
  p->copies = NULL;
  p->ncopies = 0;
}
