/* test_lib_globals: a library with mutable globals. */
#ifndef LIB_GLOBALS_H
#define LIB_GLOBALS_H
void lib_globals_add(int who, long amount);
long lib_globals_total(void);
int lib_globals_entries(void);
const char *lib_globals_last(void);
extern int lib_globals_calls;
#endif
