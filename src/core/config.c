#include "core/config.h"

#include <mpi.h>

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mcoll.h"

struct mcoll_config mcoll__cfg;
/* Set (release) once mcoll__cfg is complete: the hot path only loads it (acquire,
 * a plain load on x86); the first load runs once under pthread_once. */
static atomic_int config_loaded;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static const struct param_info {
  const char *name, *kind, *def, *help;
} param_table[] = {
#define MCOLL_INFO(name, kind, def, help) {#name, #kind, def, help},
    MCOLL_PARAMS(MCOLL_INFO)
#undef MCOLL_INFO
};

long mcoll__parse_size(const char *text) {
  char *end;
  long value = strtol(text, &end, 10);
  if (end == text || value < 0) return -1;
  switch (toupper((unsigned char)*end)) {
  case 'K': value <<= 10; end++; break;
  case 'M': value <<= 20; end++; break;
  case 'G': value <<= 30; end++; break;
  default: break;
  }
  return *end == '\0' ? value : -1;
}

static const char *env_or_default(const char *name, const char *def) {
  char var[64];
  snprintf(var, sizeof var, "MCOLL_%s", name);
  const char *value = getenv(var);
  return value && *value ? value : def;
}

static long num_param(const char *name, const char *def) {
  long value = mcoll__parse_size(env_or_default(name, def));
  if (value < 0) {
    fprintf(stderr, "mcoll: ignoring invalid MCOLL_%s, using %s\n", name, def);
    value = mcoll__parse_size(def);
  }
  return value;
}

/* A segment-geometry parameter out of [min, max] or not a whole number of pages:
 * said clearly, then the default (every rank of a node must compute the same
 * layout, and a default is what a rank without the variable would use). */
static long bounded_param(const char *name, long value, long min, long max, const char *def) {
  if (value >= min && value <= max && value % 4096 == 0) return value;
  fprintf(stderr,
          "mcoll: MCOLL_%s=%ld is out of bounds (a multiple of 4K from %ldK to %ldM); "
          "using the default %s\n",
          name, value, min >> 10, max >> 20, def);
  return mcoll__parse_size(def);
}

#define MCOLL_READ_NUM(name, def) num_param(#name, def)
#define MCOLL_READ_STR(name, def) env_or_default(#name, def)

static int env_set(const char *name) {
  char var[64];
  snprintf(var, sizeof var, "MCOLL_%s", name);
  const char *value = getenv(var);
  return value && *value;
}

static void config_read(void) {
#define MCOLL_READ(name, kind, def, help)              \
  mcoll__cfg.name = MCOLL_READ_##kind(name, def); \
  mcoll__cfg.user_set[MCOLL_PARAM_##name] = (unsigned char)env_set(#name);
  MCOLL_PARAMS(MCOLL_READ)
#undef MCOLL_READ
  const char *policy = mcoll__cfg.FALLBACK;
  if (!strcmp(policy, "error")) mcoll__cfg.fallback_policy = MCOLL_FALLBACK_ERROR;
  else if (!strcmp(policy, "warn")) mcoll__cfg.fallback_policy = MCOLL_FALLBACK_WARN;
  else mcoll__cfg.fallback_policy = MCOLL_FALLBACK_SILENT;
  /* An area holds MCOLL_AREA_SLOTS slots of at least a page each; a chunk is at least
   * a page; neither so large that a node segment could not be reserved. */
  mcoll__cfg.SHM_CHUNK = bounded_param("SHM_CHUNK", mcoll__cfg.SHM_CHUNK, 4096, 16L << 20, "64K");
  mcoll__cfg.SHM_AREA = bounded_param("SHM_AREA", mcoll__cfg.SHM_AREA, 128 * 4096, 256L << 20, "4M");
  if (mcoll__cfg.CMA_CHUNK < 4096) mcoll__cfg.CMA_CHUNK = 4096;
  if (mcoll__cfg.INTER_PIECE < mcoll__cfg.SHM_CHUNK) mcoll__cfg.INTER_PIECE = mcoll__cfg.SHM_CHUNK;
  /* Pieces end on slot boundaries so a piece is published in whole slots. */
  mcoll__cfg.INTER_PIECE -= mcoll__cfg.INTER_PIECE % mcoll__cfg.SHM_CHUNK;
  if (mcoll__cfg.BCAST_K < 1) mcoll__cfg.BCAST_K = 1;
  if (mcoll__cfg.LIVENESS_MS < 10) mcoll__cfg.LIVENESS_MS = 10;
  mcoll__cfg.epoch = 1;
  atomic_store_explicit(&config_loaded, 1, memory_order_release);
}

void mcoll__config_load(void) {
  if (atomic_load_explicit(&config_loaded, memory_order_acquire)) return;
  pthread_once(&config_once, config_read);
}

MCOLL_EXPORT int mcoll_set_param(const char *name, const char *value) {
  mcoll__config_load();
  long number = value ? mcoll__parse_size(value) : -1;
  if (number < 0 || !strncmp(name, "SHM_", 4) || !strcmp(name, "DISABLE")) return -1;
#define MCOLL_SET_NUM(field) \
  (mcoll__cfg.field = number, mcoll__cfg.user_set[MCOLL_PARAM_##field] = 1, mcoll__cfg.epoch++, 0)
#define MCOLL_SET_STR(field) -1
#define MCOLL_SET(field, kind, def, help) \
  if (!strcmp(name, #field)) return MCOLL_SET_##kind(field);
  MCOLL_PARAMS(MCOLL_SET)
#undef MCOLL_SET
#undef MCOLL_SET_STR
#undef MCOLL_SET_NUM
  return -1;
}

int mcoll__param_index(const char *name) {
  for (int i = 0; i < MCOLL_NPARAMS; i++)
    if (!strcmp(param_table[i].name, name)) return i;
  return -1;
}

const char *mcoll__param_name(int param) { return param_table[param].name; }

long mcoll__cfg_param(enum mcoll_param param) {
  switch (param) {
#define MCOLL_GET_NUM(field) return mcoll__cfg.field;
#define MCOLL_GET_STR(field) return 0;
#define MCOLL_GET(field, kind, def, help) \
  case MCOLL_PARAM_##field: MCOLL_GET_##kind(field)
    MCOLL_PARAMS(MCOLL_GET)
#undef MCOLL_GET
#undef MCOLL_GET_STR
#undef MCOLL_GET_NUM
  default: return 0;
  }
}

int mcoll__params_user_set(const enum mcoll_param *params, int n) {
  mcoll__config_load();
  for (int i = 0; i < n; i++)
    if (mcoll__cfg.user_set[params[i]]) return 1;
  return 0;
}

MCOLL_EXPORT void mcoll_print_params(FILE *out) {
  mcoll__config_load();
  fprintf(out, "%-22s %-10s %-8s %s\n", "parameter", "value", "default", "meaning");
  for (size_t i = 0; i < sizeof param_table / sizeof param_table[0]; i++) {
    const struct param_info *p = &param_table[i];
    char var[64];
    snprintf(var, sizeof var, "MCOLL_%s", p->name);
    fprintf(out, "%-22s %-10s %-8s %s\n", var, env_or_default(p->name, p->def),
            *p->def ? p->def : "\"\"", p->help);
  }
  fprintf(out, "%-22s %-10s %-8s %s\n", "MCOLL_ALG_<COLL>", "", "\"\"",
          "force an algorithm for any collective (see the list below)");
}

int mcoll__app_thread_level = -1;

int mcoll__thread_level(void) {
  if (mcoll__app_thread_level >= 0) return mcoll__app_thread_level;
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  return provided;
}
