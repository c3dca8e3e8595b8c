# From LIST (lines "name size", not the # lines) writes
#   STANDIN: the stand-in's definitions of the objects (zeroed, of the host's sizes) and
#            its table of their addresses in the rank's namespace, by index;
#   NAMES:   the runtime's table of their names, by the same index.
# Neither includes mpi.h: it declares the objects with other types.
file(STRINGS ${LIST} lines REGEX "^[A-Za-z_]")
set(standin "/* Generated from ${LIST}: do not edit. */\n#define OBJECT __attribute__((visibility(\"default\"), aligned(64)))\n")
set(table "void *const thr_standin_objects[] = {\n")
set(names "/* Generated from ${LIST}: do not edit. */\nconst char *const thr_openmpi_object_names[] = {\n")
set(count 0)
foreach(line ${lines})
  string(REPLACE " " ";" fields "${line}")
  list(GET fields 0 name)
  list(GET fields 1 size)
  string(APPEND standin "OBJECT char ${name}[${size}];\n")
  string(APPEND table "  ${name},\n")
  string(APPEND names "  \"${name}\",\n")
  math(EXPR count "${count} + 1")
endforeach()
string(APPEND standin "${table}};\nconst int thr_standin_nobjects = ${count};\n")
string(APPEND names "};\nconst int thr_openmpi_nobjects = ${count};\n")
foreach(pair "${STANDIN}|${standin}" "${NAMES}|${names}")
  string(FIND "${pair}" "|" bar)
  string(SUBSTRING "${pair}" 0 ${bar} out)
  math(EXPR from "${bar} + 1")
  string(SUBSTRING "${pair}" ${from} -1 text)
  file(WRITE ${out}.tmp "${text}")
  file(COPY_FILE ${out}.tmp ${out} ONLY_IF_DIFFERENT)
endforeach()
