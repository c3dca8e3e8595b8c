# Writes OUT: one weak stub per function name of LIST (not the # lines) that stops the
# job naming the call; the stand-in's own definitions override them at link time.
file(STRINGS ${LIST} names REGEX "^(P?MPIX?|MPII)_")
set(text "/* Generated from ${LIST}: do not edit. */\nvoid mcoll_threads_standin_missing(const char *name);\n")
foreach(name ${names})
  string(APPEND text "__attribute__((weak, visibility(\"default\"))) int ${name}(void);\n"
                     "int ${name}(void) { mcoll_threads_standin_missing(\"${name}\"); return 0; }\n")
endforeach()
file(WRITE ${OUT}.tmp "${text}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
