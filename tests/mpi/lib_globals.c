/* A library with many mutable globals (test_lib_globals): a running total, a table,
 * a string and a counter of calls; each rank of mcollrun --threads has its own. */
#include <stdio.h>
#include <string.h>

#include "lib_globals.h"

static long total;
static int table[256];
static char last_name[32] = "none";
int lib_globals_calls;

void lib_globals_add(int who, long amount)
{
  total += amount;
  table[(unsigned)who % 256] += 1;
  snprintf(last_name, sizeof last_name, "rank-%d", who);
  lib_globals_calls++;
}

long lib_globals_total(void)
{
  return total;
}

int lib_globals_entries(void)
{
  int n = 0;
  for (int i = 0; i < 256; i++)
    n += table[i];
  return n;
}

const char *lib_globals_last(void)
{
  return last_name;
}
