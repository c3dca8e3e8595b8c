/* The rules loader: a small JSON subset parser (objects, arrays, strings, numbers,
 * true/false/null; no new dependency), the entries indexed per collective and level,
 * and the one lookup, mcoll__rules_pick. Format (docs/model.md, "Rules"):
 *   {"rules": [{"coll": "bcast", "level": "node", "bytes": [0, 8192],
 *               "ranks_per_node": [2, 2], "nodes": [1, null], "ranks": [1, null],
 *               "levels": [0, 0], "oversubscribed": false,
 *               "alg": "shm_slot", "params": {"BCAST_K": 2}}, ...]}
 * bytes is [lo, hi); the counts are inclusive; null or an absent range: no limit. */
#include "coll/rules.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tls.h"
#include "mcoll.h"

/* ---- JSON subset: a value tree in one array ---- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
  enum jtype type;
  double num;
  char *text;      /* J_STR */
  char *key;       /* a member of an object: its key */
  int child, next; /* first element/member, next sibling; -1 = none */
};

struct jparser {
  const char *p, *why;
  int line;
  struct jval *v;
  int n, cap;
};

static int jnew(struct jparser *j, enum jtype type) {
  if (j->n == j->cap) {
    int cap = j->cap ? 2 * j->cap : 256;
    struct jval *v = realloc(j->v, (size_t)cap * sizeof *v);
    if (!v) return j->why = "out of memory", -1;
    j->v = v, j->cap = cap;
  }
  j->v[j->n] = (struct jval){type, 0, NULL, NULL, -1, -1};
  return j->n++;
}

static void jspace(struct jparser *j) {
  while (isspace((unsigned char)*j->p)) j->line += *j->p++ == '\n';
}

static char *jstring(struct jparser *j) {
  if (*j->p != '"') return j->why = "expected a string", NULL;
  const char *s = ++j->p;
  size_t len = 0;
  while (*j->p && *j->p != '"') {
    if (*j->p == '\\' && j->p[1]) j->p++;
    if (*j->p == '\n') return j->why = "newline in a string", NULL;
    j->p++, len++;
  }
  if (*j->p != '"') return j->why = "unterminated string", NULL;
  char *out = malloc(len + 1), *o = out;
  if (!out) return j->why = "out of memory", NULL;
  for (; s < j->p; s++) {
    if (*s == '\\') {
      s++;
      *o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s; /* \" \\ \/ and the rest as is */
    } else {
      *o++ = *s;
    }
  }
  *o = '\0';
  j->p++;
  return out;
}

static int jvalue(struct jparser *j, int depth);

/* Elements (or members, keyed) of an array (object) after its opening bracket. */
static int jitems(struct jparser *j, int self, int depth, char close, int keyed) {
  int last = -1;
  jspace(j);
  if (*j->p == close) return j->p++, self;
  for (;;) {
    char *key = NULL;
    jspace(j);
    if (keyed) {
      if (!(key = jstring(j))) return -1;
      jspace(j);
      if (*j->p++ != ':') return free(key), j->why = "expected ':'", -1;
    }
    int item = jvalue(j, depth + 1);
    if (item < 0) return free(key), -1;
    j->v[item].key = key;
    if (last < 0) j->v[self].child = item;
    else j->v[last].next = item;
    last = item;
    jspace(j);
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p == close) return j->p++, self;
    return j->why = keyed ? "expected ',' or '}'" : "expected ',' or ']'", -1;
  }
}

static int jvalue(struct jparser *j, int depth) {
  if (depth > 16) return j->why = "nested too deeply", -1;
  jspace(j);
  char ch = *j->p;
  if (ch == '{' || ch == '[') {
    j->p++;
    int self = jnew(j, ch == '{' ? J_OBJ : J_ARR);
    return self < 0 ? -1 : jitems(j, self, depth, ch == '{' ? '}' : ']', ch == '{');
  }
  if (ch == '"') {
    char *s = jstring(j);
    if (!s) return -1;
    int self = jnew(j, J_STR);
    if (self < 0) return free(s), -1;
    j->v[self].text = s;
    return self;
  }
  if (ch == '-' || isdigit((unsigned char)ch)) {
    char *end;
    double d = strtod(j->p, &end);
    int self = jnew(j, J_NUM);
    if (self < 0) return -1;
    j->v[self].num = d;
    j->p = end;
    return self;
  }
  static const struct {
    const char *word;
    enum jtype type;
    double num;
  } words[] = {{"true", J_BOOL, 1}, {"false", J_BOOL, 0}, {"null", J_NULL, 0}};
  for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
    if (!strncmp(j->p, words[w].word, strlen(words[w].word))) {
      j->p += strlen(words[w].word);
      int self = jnew(j, words[w].type);
      if (self >= 0) j->v[self].num = words[w].num;
      return self;
    }
  return j->why = "expected a value", -1;
}

static void jfree(struct jparser *j) {
  for (int i = 0; i < j->n; i++) free(j->v[i].text), free(j->v[i].key);
  free(j->v);
}

static const char *jtext(const struct jparser *j, int v) {
  return v >= 0 && j->v[v].type == J_STR ? j->v[v].text : NULL;
}

static int jmember(const struct jparser *j, int obj, const char *key) {
  for (int m = j->v[obj].child; m >= 0; m = j->v[m].next)
    if (j->v[m].key && !strcmp(j->v[m].key, key)) return m;
  return -1;
}

/* ---- entries ---- */

static int coll_of(const char *name) {
  for (int c = 0; c < MCOLL_NCOLLS; c++)
    if (!strcmp(mcoll__coll_name(c), name)) return c;
  return -1;
}

static int level_of(const char *name) {
  for (int l = 0; l < MCOLL_NLEVELS; l++)
    if (!strcmp(mcoll__level_name(l), name)) return l;
  return -1;
}

static int alg_of(int level, int coll, const char *name) {
  const struct mcoll_coll_algs *t = mcoll__level_algs(level, coll);
  for (int a = 0; a < t->nalgs; a++)
    if (!strcmp(t->algs[a].name, name)) return a;
  return -1;
}

/* A [lo, hi] range member into *lo, *hi (hi: null = none); absent: unchanged. */
static const char *range_of(const struct jparser *j, int entry, const char *key, double *lo,
                            double *hi) {
  int m = jmember(j, entry, key);
  if (m < 0) return NULL;
  int a = j->v[m].child, b = a >= 0 ? j->v[a].next : -1;
  if (j->v[m].type != J_ARR || a < 0 || b < 0 || j->v[b].next >= 0 || j->v[a].type != J_NUM ||
      (j->v[b].type != J_NUM && j->v[b].type != J_NULL))
    return "a range is [lo, hi] with numbers (hi may be null)";
  *lo = j->v[a].num;
  if (j->v[b].type == J_NUM) *hi = j->v[b].num;
  if (*lo < 0 || *hi < *lo) return "a range's numbers must be 0 <= lo <= hi";
  return NULL;
}

static int count_bound(double x) { return x >= INT_MAX ? INT_MAX : (int)x; }

static const char *entry_of(const struct jparser *j, int e, struct mcoll_rule *r) {
  if (j->v[e].type != J_OBJ) return "an entry is an object";
  const char *coll = jtext(j, jmember(j, e, "coll")), *alg = jtext(j, jmember(j, e, "alg"));
  const char *level = jtext(j, jmember(j, e, "level"));
  if (!coll || !alg) return "an entry needs \"coll\" and \"alg\" (strings)";
  r->coll = coll_of(coll);
  if (r->coll < 0) return "unknown collective";
  r->level = level ? level_of(level) : MCOLL_LEVEL_NODE;
  if (r->level < 0) return "level is \"node\" or \"inter\"";
  r->alg = alg_of(r->level, r->coll, alg);
  if (r->alg < 0) return "no such algorithm of this collective at this level";
  double lo = 0, hi = (double)SIZE_MAX;
  const char *bad = range_of(j, e, "bytes", &lo, &hi);
  if (bad) return bad;
  r->bytes_lo = (size_t)lo;
  r->bytes_hi = hi >= (double)SIZE_MAX ? SIZE_MAX : (size_t)hi;
  static const char *const counts[] = {
      "ranks", "ranks_per_node", "nodes", "levels"};
  int *bounds[][2] = {{&r->ranks_lo, &r->ranks_hi}, {&r->rpn_lo, &r->rpn_hi},
                      {&r->nodes_lo, &r->nodes_hi}, {&r->levels_lo, &r->levels_hi}};
  for (int k = 0; k < 4; k++) {
    lo = 0, hi = INT_MAX;
    if ((bad = range_of(j, e, counts[k], &lo, &hi))) return bad;
    *bounds[k][0] = count_bound(lo), *bounds[k][1] = count_bound(hi);
  }
  int over = jmember(j, e, "oversubscribed");
  if (over >= 0 && j->v[over].type != J_BOOL && j->v[over].type != J_NULL)
    return "oversubscribed is true, false or null";
  r->oversubscribed = over >= 0 && j->v[over].type == J_BOOL ? (int)j->v[over].num : -1;
  r->nparams = 0;
  int params = jmember(j, e, "params");
  if (params >= 0 && j->v[params].type != J_OBJ) return "params is an object";
  for (int p = params >= 0 ? j->v[params].child : -1; p >= 0; p = j->v[p].next) {
    int index = mcoll__param_index(j->v[p].key);
    if (index < 0) return "params: no such parameter (names as in the parameter table, "
                          "without MCOLL_)";
    if (j->v[p].type != J_NUM || j->v[p].num < 0) return "params: values are numbers >= 0";
    if (r->nparams == MCOLL_RULE_MAX_PARAMS) return "params: at most 4 per entry";
    r->params[r->nparams].param = index;
    r->params[r->nparams++].value = (long)j->v[p].num;
  }
  for (int m = j->v[e].child; m >= 0; m = j->v[m].next) {
    static const char *const known[] = {
        "coll", "level", "alg", "bytes", "ranks",
                                        "ranks_per_node", "nodes", "levels", "oversubscribed",
                                        "params", "why"};
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(known[k], j->v[m].key)) k++;
    if (k == sizeof known / sizeof known[0]) return "unknown key in an entry";
  }
  return NULL;
}

int mcoll__rules_parse(const char *text, struct mcoll_rule **out, const char **why, int *line) {
  struct jparser j = {.p = text, .line = 1};
  struct mcoll_rule *rules = NULL;
  int n = -1, root = jvalue(&j, 0);
  if (root >= 0) {
    jspace(&j);
    if (*j.p) j.why = "text after the top-level value", root = -1;
  }
  int list = root >= 0 && j.v[root].type == J_OBJ ? jmember(&j, root, "rules") : -1;
  if (root >= 0 && (list < 0 || j.v[list].type != J_ARR)) j.why = "expected {\"rules\": [...]}";
  if (root >= 0 && list >= 0 && j.v[list].type == J_ARR) {
    int count = 0;
    for (int e = j.v[list].child; e >= 0; e = j.v[e].next) count++;
    rules = calloc((size_t)count + 1, sizeof *rules);
    n = 0;
    for (int e = j.v[list].child; e >= 0 && rules; e = j.v[e].next, n++) {
      const char *bad = entry_of(&j, e, &rules[n]);
      if (bad) {
        j.why = bad;
        *line = n + 1; /* the entry's number */
        free(rules);
        rules = NULL;
        n = -1;
        jfree(&j);
        *why = j.why;
        return -1;
      }
    }
    if (!rules) j.why = "out of memory", n = -1;
  }
  jfree(&j);
  if (n < 0) {
    free(rules);
    *why = j.why;
    *line = -j.line; /* negative: a line of the text */
    return -1;
  }
  *out = rules;
  return n;
}

/* ---- the rules in force ---- */

/* Collectives that share another's table take its rules when they have none
 * (index + 1; 0: none). */
static const int alias_of[MCOLL_NCOLLS] = {
    [MCOLL_COLL_ALLGATHERV] = MCOLL_COLL_ALLGATHER + 1, [MCOLL_COLL_GATHERV] = MCOLL_COLL_GATHER + 1,
    [MCOLL_COLL_SCATTERV] = MCOLL_COLL_SCATTER + 1,     [MCOLL_COLL_ALLTOALLV] = MCOLL_COLL_ALLTOALL + 1,
    [MCOLL_COLL_ALLTOALLW] = MCOLL_COLL_ALLTOALL + 1,
    [MCOLL_COLL_REDUCE_SCATTER_BLOCK] = MCOLL_COLL_REDUCE_SCATTER + 1,
};

static struct {
  struct mcoll_rule *all;
  int n;
  /* per level and collective: indices into all, in file order (first match wins) */
  int *index[MCOLL_NLEVELS][MCOLL_NCOLLS];
  int count[MCOLL_NLEVELS][MCOLL_NCOLLS];
  char source[512];
} rules_in_force;
static atomic_int rules_loaded;
static pthread_once_t rules_once = PTHREAD_ONCE_INIT;

static void index_rules(void) {
  for (int l = 0; l < MCOLL_NLEVELS; l++)
    for (int c = 0; c < MCOLL_NCOLLS; c++) {
      int *list = malloc(((size_t)rules_in_force.n + 1) * sizeof *list), k = 0;
      for (int i = 0; list && i < rules_in_force.n; i++)
        if (rules_in_force.all[i].level == l && rules_in_force.all[i].coll == c) list[k++] = i;
      rules_in_force.index[l][c] = list;
      rules_in_force.count[l][c] = list ? k : 0;
    }
  for (int l = 0; l < MCOLL_NLEVELS; l++)
    for (int c = 0; c < MCOLL_NCOLLS; c++)
      if (alias_of[c] && rules_in_force.count[l][c] == 0) {
        int base = alias_of[c] - 1;
        free(rules_in_force.index[l][c]);
        rules_in_force.index[l][c] = rules_in_force.index[l][base];
        rules_in_force.count[l][c] = rules_in_force.count[l][base];
      }
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 14, len = 0;
  char *text = malloc(cap);
  while (text) {
    len += fread(text + len, 1, cap - 1 - len, f);
    if (len < cap - 1) break;
    char *more = realloc(text, cap *= 2);
    if (!more) free(text);
    text = more;
  }
  fclose(f);
  if (text) text[len] = '\0';
  return text;
}

static void rules_read(void) {
  mcoll__config_load();
  const char *path = mcoll__cfg.RULES;
  if (path && *path) {
    char *text = read_file(path);
    const char *why = "cannot read the file";
    int where = 0, n = text ? mcoll__rules_parse(text, &rules_in_force.all, &why, &where) : -1;
    free(text);
    if (n >= 0) {
      rules_in_force.n = n;
      snprintf(rules_in_force.source, sizeof rules_in_force.source, "%s", path);
    } else {
      fprintf(stderr, "mcoll: MCOLL_RULES=%s: %s%s%d; using the built-in rules\n", path, why,
              where < 0 ? " at line " : where > 0 ? " in entry " : "", where < 0 ? -where : where);
    }
  }
  if (!rules_in_force.source[0]) {
    const char *why = NULL;
    int where = 0, n = mcoll__rules_parse(mcoll__rules_builtin_json, &rules_in_force.all, &why, &where);
    if (n < 0) { /* a defect of the generated file: the tests parse it */
      fprintf(stderr, "mcoll: the built-in rules do not parse (%s); thresholds decide\n", why);
      n = 0;
    }
    rules_in_force.n = n;
    snprintf(rules_in_force.source, sizeof rules_in_force.source, "built-in");
  }
  index_rules();
  atomic_store_explicit(&rules_loaded, 1, memory_order_release);
}

static void rules_load(void) {
  if (!atomic_load_explicit(&rules_loaded, memory_order_acquire)) pthread_once(&rules_once, rules_read);
}

const char *mcoll__rules_source(void) {
  rules_load();
  return rules_in_force.source;
}

static int covers(const struct mcoll_rule *r, const struct mcoll_facts *f) {
  return f->ranks >= r->ranks_lo && f->ranks <= r->ranks_hi && f->local_size >= r->rpn_lo &&
         f->local_size <= r->rpn_hi && f->nnodes >= r->nodes_lo && f->nnodes <= r->nodes_hi &&
         f->nlevels >= r->levels_lo && f->nlevels <= r->levels_hi &&
         (r->oversubscribed < 0 || r->oversubscribed == !!f->oversubscribed);
}

static int rules_search(enum mcoll_coll coll, enum mcoll_alg_level level, const struct mcoll_facts *facts,
                        const struct mcoll_rule **rule) {
  const int *list = rules_in_force.index[level][coll];
  for (int i = 0; i < rules_in_force.count[level][coll]; i++) {
    const struct mcoll_rule *r = &rules_in_force.all[list[i]];
    if (facts->bytes < r->bytes_lo || facts->bytes >= r->bytes_hi || !covers(r, facts)) continue;
    /* An algorithm whose restrictions fail here is no pick: the thresholds decide. */
    if (mcoll__level_algs(level, coll)->algs[r->alg].needs & ~facts->holds) return -1;
    *rule = r;
    return r->alg;
  }
  *rule = NULL;
  return -1;
}

/* The last answers per thread: a program repeats its calls, and a hit costs about a
 * third of the search. The rules never change once loaded, so an answer holds for
 * the same question. */
struct rules_memo {
  int valid, coll, level, alg;
  struct mcoll_facts facts;
  const struct mcoll_rule *rule;
};
enum { RULES_MEMO = 32 };
static MCOLL_TLS struct rules_memo rules_memo[RULES_MEMO];

static int same_facts(const struct mcoll_facts *a, const struct mcoll_facts *b) {
  return a->bytes == b->bytes && a->holds == b->holds && a->local_size == b->local_size &&
         a->nnodes == b->nnodes && a->count == b->count && a->ranks == b->ranks &&
         a->oversubscribed == b->oversubscribed && a->nlevels == b->nlevels;
}

int mcoll__rules_pick(enum mcoll_coll coll, enum mcoll_alg_level level,
                      const struct mcoll_facts *facts, const struct mcoll_rule **rule) {
  rules_load();
  unsigned slot = ((unsigned)coll * 3u + (unsigned)level + (unsigned)(facts->bytes >> 3) * 7u) % RULES_MEMO;
  struct rules_memo *m = &rules_memo[slot];
  if (!m->valid || m->coll != (int)coll || m->level != (int)level || !same_facts(&m->facts, facts)) {
    m->alg = rules_search(coll, level, facts, &m->rule);
    m->coll = (int)coll;
    m->level = (int)level;
    m->facts = *facts;
    m->valid = 1;
  }
  if (rule && m->alg >= 0) *rule = m->rule;
  return m->alg;
}

long mcoll__rule_param(const struct mcoll_rule *rule, enum mcoll_param param, long fallback) {
  if (!rule || mcoll__cfg.user_set[param]) return fallback;
  for (int i = 0; i < rule->nparams; i++)
    if (rule->params[i].param == (int)param) return rule->params[i].value;
  return fallback;
}

size_t mcoll__rules_threshold(enum mcoll_coll coll, const struct mcoll_facts *facts, int cma_alg,
                              int *covered) {
  rules_load();
  const int *list = rules_in_force.index[MCOLL_LEVEL_NODE][coll];
  /* The covering entries' sizes in order: the threshold is where the last run of
   * cma_alg up to no limit starts. */
  size_t from = SIZE_MAX, end = 0;
  *covered = 0;
  for (int pass = 0; pass < rules_in_force.count[MCOLL_LEVEL_NODE][coll]; pass++) {
    const struct mcoll_rule *next = NULL;
    for (int i = 0; i < rules_in_force.count[MCOLL_LEVEL_NODE][coll]; i++) {
      const struct mcoll_rule *r = &rules_in_force.all[list[i]];
      if (covers(r, facts) && r->bytes_lo >= end && r->bytes_hi > r->bytes_lo &&
          (!next || r->bytes_lo < next->bytes_lo))
        next = r;
    }
    if (!next) break;
    *covered = 1;
    if (next->alg != cma_alg) from = SIZE_MAX;
    else if (from == SIZE_MAX || next->bytes_lo != end) from = next->bytes_lo;
    end = next->bytes_hi;
    if (end == SIZE_MAX) break;
  }
  return end == SIZE_MAX ? from : SIZE_MAX;
}

MCOLL_EXPORT void mcoll_print_rules(FILE *out) {
  rules_load();
  fprintf(out, "\nrules in force (MCOLL_RULES=<file> loads others; MCOLL_ALG_<COLL> and parameters "
               "set by the user win): %s, %d entries\n",
          rules_in_force.source, rules_in_force.n);
  fprintf(out, "  %-22s %-6s %-22s %-9s %-9s %-9s %-6s %-7s %-18s %s\n", "collective", "level",
          "bytes", "ranks", "per node", "nodes", "levels", "oversub", "algorithm", "parameters");
  for (int i = 0; i < rules_in_force.n; i++) {
    const struct mcoll_rule *r = &rules_in_force.all[i];
    char bytes[48], counts[4][24];
    if (r->bytes_hi == SIZE_MAX) snprintf(bytes, sizeof bytes, "[%zu, -)", r->bytes_lo);
    else snprintf(bytes, sizeof bytes, "[%zu, %zu)", r->bytes_lo, r->bytes_hi);
    int lo[4] = {r->ranks_lo, r->rpn_lo, r->nodes_lo, r->levels_lo},
        hi[4] = {r->ranks_hi, r->rpn_hi, r->nodes_hi, r->levels_hi};
    for (int k = 0; k < 4; k++) {
      if (hi[k] == INT_MAX && lo[k] == 0) snprintf(counts[k], sizeof counts[k], "any");
      else if (hi[k] == INT_MAX) snprintf(counts[k], sizeof counts[k], "%d-", lo[k]);
      else if (hi[k] == lo[k]) snprintf(counts[k], sizeof counts[k], "%d", lo[k]);
      else snprintf(counts[k], sizeof counts[k], "%d-%d", lo[k], hi[k]);
    }
    fprintf(out, "  %-22s %-6s %-22s %-9s %-9s %-9s %-6s %-7s %-18s", mcoll__coll_name(r->coll),
            mcoll__level_name(r->level), bytes, counts[0], counts[1], counts[2], counts[3],
            r->oversubscribed < 0 ? "any" : r->oversubscribed ? "yes" : "no",
            mcoll__level_algs(r->level, r->coll)->algs[r->alg].name);
    for (int p = 0; p < r->nparams; p++)
      fprintf(out, "%s%s=%ld", p ? "," : "", mcoll__param_name(r->params[p].param), r->params[p].value);
    fprintf(out, "%s\n", r->nparams ? "" : "-");
  }
}
