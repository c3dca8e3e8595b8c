/* T-NBC trace and order files (tnbc_internal.h).
 *
 * MCOLL_TNBC_TRACE=<file>: each traced call site keeps the first-touch order of its
 * received blocks (and the order they completed in), from the first call there whose
 * buffer was read at all; at
 * MPI_Finalize or exit each rank writes <file>.<world rank>, one line per site:
 *
 *   site=<object>+0x<offset> coll=alltoall size=4 rank=1 count=4194304 blocks=4 calls=2
 *     touched=3,1,2,0 done=0,1,2,3        (one line in the file)
 *
 * The site is the return address of the blocking call as an offset into the object
 * it lies in (dladdr), so it is the same in every run despite ASLR. MCOLL_TNBC_ORDER
 * reads such a file (<file>.<world rank> if it exists, else <file>) and gives a call
 * at a matching site (key, collective, communicator size; count too unless a v
 * collective, whose counts follow the data) its touched order. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "tnbc/tnbc_internal.h"

int mcoll__tnbc_tracing, mcoll__tnbc_ordering;

/* A site as traced, or as read from an order file. */
struct site_rec {
  struct mcoll_tnbc_site site;
  int calls;
  int ntouched, ndone;
  int *touched, *done;
  struct site_rec *next;
};

static struct site_rec *traced, *ordered;
static int world_rank;
static int written;

void mcoll__tnbc_site_key(const void *ret, char *key, size_t n) {
  Dl_info info;
  if (ret && dladdr(ret, &info) && info.dli_fname) {
    const char *name = strrchr(info.dli_fname, '/');
    name = name ? name + 1 : info.dli_fname;
    snprintf(key, n, "%s+0x%lx", *name ? name : "?",
             (unsigned long)((const char *)ret - (const char *)info.dli_fbase));
  } else {
    snprintf(key, n, "?+0x%lx", (unsigned long)(uintptr_t)ret);
  }
}

static int same_site(const struct mcoll_tnbc_site *a, const struct mcoll_tnbc_site *b) {
  size_t len = strlen(a->coll);
  int vcoll = len && a->coll[len - 1] == 'v'; /* (counts follow the data) */
  return !strcmp(a->key, b->key) && !strcmp(a->coll, b->coll) && a->size == b->size &&
         (vcoll || a->count == b->count);
}

static struct site_rec *find(struct site_rec *list, const struct mcoll_tnbc_site *site) {
  for (; list; list = list->next)
    if (same_site(&list->site, site)) return list;
  return NULL;
}

static int *copy_ints(const int *v, int n) {
  int *c = malloc(sizeof *c * (size_t)(n ? n : 1));
  if (c && n) memcpy(c, v, sizeof *c * (size_t)n);
  return c;
}

void mcoll__tnbc_trace_add(const struct mcoll_tnbc_site *site, const int *touched, int ntouched,
                           const int *done, int ndone) {
  struct site_rec *r = find(traced, site);
  if (r) {
    r->calls++;
    if (r->ntouched || !ntouched) return;
    /* (the first call that was read at all: a call whose buffer is overwritten unread
     * says nothing of the order) */
    free(r->touched);
    free(r->done);
  } else {
    r = calloc(1, sizeof *r);
    if (!r) return;
    r->site = *site;
    r->calls = 1;
    r->next = traced;
    traced = r;
  }
  r->touched = copy_ints(touched, ntouched);
  r->done = copy_ints(done, ndone);
  r->ntouched = r->touched ? ntouched : 0;
  r->ndone = r->done ? ndone : 0;
}

static void put_ints(FILE *f, const char *name, const int *v, int n) {
  fprintf(f, " %s=", name);
  for (int i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", v[i]);
}

void mcoll__tnbc_trace_stop(void) {
  if (!mcoll__tnbc_tracing || written) return;
  written = 1;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", mcoll__cfg.TNBC_TRACE, world_rank);
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "mcoll: T-NBC trace: cannot write %s\n", path);
    return;
  }
  fprintf(f, "# mcoll T-NBC trace, world rank %d: first-touch order of received blocks per call site\n",
          world_rank);
  for (struct site_rec *r = traced; r; r = r->next) {
    fprintf(f, "site=%s coll=%s size=%d rank=%d count=%zu blocks=%d calls=%d", r->site.key,
            r->site.coll, r->site.size, r->site.rank, r->site.count, r->site.nblocks, r->calls);
    put_ints(f, "touched", r->touched, r->ntouched);
    put_ints(f, "done", r->done, r->ndone);
    fputc('\n', f);
  }
  fclose(f);
}

static void at_exit(void) { mcoll__tnbc_trace_stop(); }

/* "a,b,c" into at most max ints; returns how many. */
static int parse_ints(const char *text, int *v, int max) {
  int n = 0;
  while (text && *text && *text != ' ' && *text != '\n' && n < max) {
    char *end;
    long x = strtol(text, &end, 10);
    if (end == text) break;
    v[n++] = (int)x;
    text = *end == ',' ? end + 1 : end;
  }
  return n;
}

static const char *field(const char *line, const char *name) {
  size_t len = strlen(name);
  for (const char *p = line; (p = strstr(p, name)); p += len)
    if ((p == line || p[-1] == ' ') && p[len] == '=') return p + len + 1;
  return NULL;
}

static void order_load(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", mcoll__cfg.TNBC_ORDER, world_rank);
  FILE *f = fopen(path, "r");
  if (!f) f = fopen(mcoll__cfg.TNBC_ORDER, "r");
  if (!f) {
    fprintf(stderr, "mcoll: T-NBC order: cannot read %s or %s\n", path, mcoll__cfg.TNBC_ORDER);
    return;
  }
  static char line[65536];
  enum { MAX_BLOCKS = 8192 };
  static int v[MAX_BLOCKS];
  while (fgets(line, sizeof line, f)) {
    const char *key = field(line, "site"), *coll = field(line, "coll"), *size = field(line, "size"),
               *count = field(line, "count"), *touched = field(line, "touched");
    if (line[0] == '#' || !key || !coll || !size || !touched) continue;
    struct site_rec *r = calloc(1, sizeof *r);
    if (!r) break;
    sscanf(key, "%159s", r->site.key);
    sscanf(coll, "%15s", r->site.coll);
    r->site.size = atoi(size);
    r->site.count = count ? strtoull(count, NULL, 10) : 0;
    r->ntouched = parse_ints(touched, v, MAX_BLOCKS);
    r->touched = copy_ints(v, r->ntouched);
    r->next = ordered;
    ordered = r;
  }
  fclose(f);
}

void mcoll__tnbc_trace_start(int rank) {
  world_rank = rank;
  mcoll__tnbc_tracing = mcoll__cfg.TNBC_TRACE[0] != '\0';
  mcoll__tnbc_ordering = mcoll__cfg.TNBC_ORDER[0] != '\0';
  static int registered;
  if (mcoll__tnbc_tracing && !registered) atexit(at_exit);
  registered |= mcoll__tnbc_tracing;
  if (mcoll__tnbc_ordering) order_load();
}

int mcoll__tnbc_order_find(const struct mcoll_tnbc_site *site, int *order, int n) {
  const struct site_rec *r = find(ordered, site);
  if (!r) return 0;
  /* the touched blocks first, in their order, then the rest in index order */
  char *seen = calloc((size_t)n, 1);
  if (!seen) return 0;
  int k = 0;
  for (int i = 0; i < r->ntouched; i++)
    if (r->touched[i] >= 0 && r->touched[i] < n && !seen[r->touched[i]]) {
      seen[r->touched[i]] = 1;
      order[k++] = r->touched[i];
    }
  for (int i = 0; i < n; i++)
    if (!seen[i]) order[k++] = i;
  free(seen);
  return 1;
}
