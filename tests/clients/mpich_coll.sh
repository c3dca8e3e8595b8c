#!/usr/bin/env bash
# mpich_coll.sh: MPICH's collective conformance tests (test/mpi/coll of the MPICH
# source, from Debian's source package) built against each host MPI and run under
# bin/mcollrun; a program failing under mcoll is re-run natively (plain mpiexec) to
# tell mcoll's bugs from the host MPI's.
#
#   tests/clients/mpich_coll.sh [--all] [--native] [--prepare] [--max-np N] [openmpi] [mpich]
#
#   --prepare  only fetch the source and build the programs for the flavours
#   --all      every line of coll/testlist.in at its own rank count (up to 16 ranks,
#              about an hour per flavour on 2 cores); the default run caps the rank
#              count at 4 (--max-np) and runs each program/count/arguments once:
#              ~150 jobs per flavour, 5 min on Open MPI and 16 min on MPICH (ch4
#              spins when oversubscribed) on 2 cores at load 20
#   --native   run every program natively too, not only those failing under mcoll
#   --max-np N the rank cap of the default run (4)
# MCOLL_MPICH_COLL_JOBS: jobs run side by side (default 3 on Open MPI, whose jobs
# mostly wait for their launch; 1 on MPICH, whose ranks spin when oversubscribed).
#
# A program passes when its job exits 0 within the timeout, prints MPICH's " No Errors"
# line and (under mcoll) rank 0's MCOLL_VERBOSE report is there. Verdicts:
#   pass         passes under mcoll
#   MCOLL-FAIL   fails or hangs under mcoll but passes natively: an mcoll bug
#   native-fail  fails natively too: the host MPI's or the test's, not counted
#   not-built    does not compile against the flavour (Open MPI 4.1 has no
#                MPI-4 persistent collectives): not counted
# The script fails when any program is MCOLL-FAIL, or mcoll's own algorithms (not
# passthrough or fallback) took no collective in the whole run.
#
# Source: the newest mpich_*.orig.tar.xz in the cache, else the one named by
# MCOLL_MPICH_COLL_TARBALL, else `apt-get source --download-only mpich` (Debian's
# archive; a deb-src entry is added to /etc/apt/sources.list.d when none is there).
# Only test/mpi/{coll,util,include,dtpools/include} is extracted; the programs are
# compiled by hand (no configure) with the test utilities util/mtest*.c and a
# mpitestconf.h written here; against Open MPI with USE_STRICT_MPI (no MPIX_ calls).
#
# Environment: MCOLL_MPICH_COLL_CACHE (source and builds: <repo>/build/mpich-coll,
# git-ignored), MCOLL_MPICH_COLL_TIMEOUT (seconds per job, 60; a testlist timeLimit
# wins when longer), MCOLL_MPICH_COLL_LOGS (job logs and summary.txt: a temporary
# directory, kept when something failed), MCOLL_MPICH_COLL_TESTS (run only these
# programs, space-separated names), MCOLL_BUILD_DIR (mcoll's build, as bin/mcollrun).
set -euo pipefail

root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
cache=${MCOLL_MPICH_COLL_CACHE:-$root/build/mpich-coll}
job_timeout=${MCOLL_MPICH_COLL_TIMEOUT:-60}
mcoll_build=${MCOLL_BUILD_DIR:-$root/build}
only_tests=${MCOLL_MPICH_COLL_TESTS:-}

all=0
native=0
prepare=0
max_np=4
flavours=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --all) all=1 ;;
    --native) native=1 ;;
    --prepare) prepare=1 ;;
    --max-np) max_np=$2; shift ;;
    --max-np=*) max_np=${1#--max-np=} ;;
    openmpi|mpich) flavours+=("$1") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mpich_coll.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ ${#flavours[@]} -gt 0 ]] || flavours=(openmpi mpich)
[[ $max_np =~ ^[1-9][0-9]*$ ]] || { echo "mpich_coll.sh: --max-np wants a count" >&2; exit 2; }

# shellcheck source=tests/clients/lib.sh
. "$root/tests/clients/lib.sh"
client_setup mpich-coll MCOLL_MPICH_COLL_JOB "${MCOLL_MPICH_COLL_LOGS:-}"

log() { printf 'mpich_coll: %s\n' "$*"; }

# Debian's source package, once, into <cache>/src.
src=$cache/src
testsrc=""
fetch_source() {
  mkdir -p "$src"
  local tarball
  tarball=$(ls "$src"/mpich_*.orig.tar.xz 2>/dev/null | sort -V | tail -n1 || true)
  if [[ -z $tarball && -n ${MCOLL_MPICH_COLL_TARBALL:-} ]]; then
    cp "$MCOLL_MPICH_COLL_TARBALL" "$src/"
    tarball=$src/${MCOLL_MPICH_COLL_TARBALL##*/}
  fi
  if [[ -z $tarball ]]; then
    ensure_deb_src
    log "downloading Debian's mpich source package"
    if ! (cd "$src" && apt-get source -qq --download-only mpich) >"$logs/apt-source.log" 2>&1; then
      # A deb-src entry whose index was never fetched: once more after an update.
      apt-get update -qq >>"$logs/apt-source.log" 2>&1 || true
      (cd "$src" && apt-get source -qq --download-only mpich) >>"$logs/apt-source.log" 2>&1 || {
        cat "$logs/apt-source.log"; log "could not download the mpich source package"; exit 1; }
    fi
    tarball=$(ls "$src"/mpich_*.orig.tar.xz 2>/dev/null | sort -V | tail -n1 || true)
    [[ -n $tarball ]] || { log "apt-get source gave no mpich_*.orig.tar.xz"; exit 1; }
  fi
  local base=${tarball##*/}
  local version=${base#mpich_}
  version=${version%.orig.tar.xz}
  testsrc=$src/mpich-$version/test/mpi
  if [[ ! -f $testsrc/coll/testlist.in || ! -f $testsrc/.extracted ]]; then
    log "extracting test/mpi of $base"
    rm -rf "$src/mpich-$version"
    local part parts=()
    for part in coll util include dtpools/include; do parts+=("mpich-$version/test/mpi/$part"); done
    tar -xJf "$tarball" -C "$src" "${parts[@]}"
    touch "$testsrc/.extracted"
  fi
}

# A deb-src entry for the running Debian release, unless apt has one already.
ensure_deb_src() {
  if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return
  fi
  local codename
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ -n $codename ]] || { log "no deb-src entry and no VERSION_CODENAME in /etc/os-release"; exit 1; }
  [[ -w /etc/apt/sources.list.d ]] || {
    log "no deb-src entry in apt's sources, and /etc/apt/sources.list.d is not writable: add one (deb.debian.org $codename main) or set MCOLL_MPICH_COLL_TARBALL"
    exit 1; }
  log "adding a deb-src entry for $codename (/etc/apt/sources.list.d/mcoll-deb-src.sources)"
  cat >/etc/apt/sources.list.d/mcoll-deb-src.sources <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -qq >"$logs/apt-update.log" 2>&1 || { cat "$logs/apt-update.log"; exit 1; }
}

# What configure would find on Debian (x86_64 or arm64, gcc, glibc, POSIX threads).
write_config_header() {
  cat >"$1/mpitestconf.h" <<'EOF'
/* Written by tests/clients/mpich_coll.sh in place of configure's. */
#ifndef MPITESTCONF_H_INCLUDED
#define MPITESTCONF_H_INCLUDED
#define HAVE_STDARG_H 1
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_GETRUSAGE 1
#define HAVE_USLEEP 1
#define HAVE_STRDUP 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_LONG_LONG 1
#define HAVE__BOOL 1
#define HAVE_FLOAT__COMPLEX 1
#define HAVE_DOUBLE__COMPLEX 1
#define HAVE_LONG_DOUBLE__COMPLEX 1
#define HAVE_MPI_WIN_CREATE 1
#define HAVE_MPI_INIT_THREAD 1
#define POINTERINT_t int64_t
#define SIZEOF_VOID_P 8
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
#endif
EOF
}

# Programs that need a rank count dividing 10 ("Number of processors must divide
# 10"): capped to the largest such count within the cap, not to the cap itself.
DIVIDES_10=" coll2 coll6 coll7 gatherv nbcoll2 p_gatherv "
# Seconds a program may take where 60 is too little: nonblocking3 runs 4 ranks for
# 140 s natively on MPICH (ch4 spins) on 2 cores shared with other jobs.
SLOW_LIMITS=" nonblocking3=400 "

# Known native failures (reported as native-fail, not counted):
#   Open MPI: nonblocking2, nonblocking3 -- they keep MPI_Datatype handles in int
#   arrays (MPICH's handles are ints; Open MPI's are pointers), so MPI_Ialltoallw
#   reads truncated pointers and crashes natively.

# The testlist's entries to run: "program np timelimit args..." lines.
entries() {
  awk -v all="$all" -v max_np="$max_np" -v only=" $only_tests " \
      -v divides10="$DIVIDES_10" -v slow="$SLOW_LIMITS" '
    /^[ \t]*#/ || NF < 2 { next }
    {
      prog = $1
      if (prog ~ /^@largetest@/) { if (!all) next; sub(/^@largetest@/, "", prog) }
      if (only != "  " && index(only, " " prog " ") == 0) next
      np = $2 + 0
      if (!all && np > max_np) {
        np = max_np
        if (index(divides10, " " prog " ")) np = (max_np >= 5) ? 5 : (max_np >= 2) ? 2 : 1
      }
      limit = 0; args = ""
      if (match(slow, " " prog "=[0-9]+")) limit = substr(slow, RSTART + length(prog) + 2, RLENGTH - length(prog) - 2) + 0
      for (i = 3; i <= NF; i++) {
        if ($i ~ /^arg=/) args = args " " substr($i, 5)
        else if ($i ~ /^timeLimit=/ && substr($i, 11) + 0 > limit) limit = substr($i, 11) + 0
      }
      line = prog " " np " " limit args
      if (!(line in seen)) { seen[line] = 1; print line }
    }' "$testsrc/coll/testlist.in"
}

# Every program of the list, built against the flavour's MPI into <cache>/<flavour>.
# A program that does not compile is left out (its log is <name>.build.log).
build_flavour() {
  local flavour=$1 dir=$cache/$flavour
  local stamp_want
  stamp_want="$(mpicc."$flavour" -show 2>&1) $(basename "$(dirname "$(dirname "$testsrc")")")"
  if [[ -f $dir/.built && $(cat "$dir/.built") == "$stamp_want" ]]; then
    return
  fi
  log "building MPICH's coll tests with mpicc.$flavour"
  rm -rf "$dir"
  mkdir -p "$dir"
  write_config_header "$dir"
  local flags=(-O1 -w -I"$dir" -I"$testsrc/include" -I"$testsrc/dtpools/include")
  # Open MPI has no MPIX_ extensions the non-strict tests call.
  [[ $flavour == openmpi ]] && flags+=(-DUSE_STRICT_MPI)
  printf '"%s"\n' "${flags[@]}" >"$dir/cflags"  # gcc's @file: paths may hold spaces
  local util
  for util in mtest mtest_common mtest_single; do
    mpicc."$flavour" "${flags[@]}" -c "$testsrc/util/$util.c" -o "$dir/$util.o" \
      || { log "$flavour: util/$util.c does not compile"; exit 1; }
  done
  # The nb* programs are the blocking tests calling the MPI_I* forms (USE_MTEST_NBC),
  # as coll/Makefile.am builds them.
  local prog
  entries | awk '{print $1}' | sort -u | while read -r prog; do
    local source=$testsrc/coll/$prog.c defs=()
    if [[ ! -f $source && $prog == nb* ]]; then
      source=$testsrc/coll/${prog#nb}.c; defs=(-DUSE_MTEST_NBC)
    fi
    printf '%s\0' "$prog" "$source" "${defs[*]:-}"
  done | BUILD_DIR=$dir MPICC=mpicc.$flavour xargs -0 -n3 -P "$(nproc)" bash -c '
      prog=$1 source=$2 defs=$3
      $MPICC @"$BUILD_DIR/cflags" $defs -o "$BUILD_DIR/$prog" "$source" "$BUILD_DIR"/mtest*.o -lm \
        >"$BUILD_DIR/$prog.build.log" 2>&1 || rm -f "$BUILD_DIR/$prog"' _ || true
  echo "$stamp_want" >"$dir/.built"
}

# One job: PROG at NP ranks with ARGS under mcoll or natively; output to LOGFILE.
# Sets job_rc and left_behind.
run_job() {
  local flavour=$1 mode=$2 np=$3 limit=$4 logfile=$5 prog=$6
  shift 6
  local launch
  client_launcher "$flavour" "$mode"
  local seconds=$job_timeout
  [[ $limit -gt $seconds ]] && seconds=$limit
  local shm_before
  shm_before=$(mcoll_shm_files)
  client_job "$mode" "$seconds" "$logfile" "${launch[@]}" -np "$np" "$cache/$flavour/$prog" "$@"
  job_seconds=$seconds
  # mcoll's shared-memory files (mcoll-<creator pid>-...) new since the start whose
  # creator is gone: this job's, left by a crashed or killed rank. Removed, so that
  # one failure does not leave files behind; other jobs' files have live creators
  # (a job beside this one that crashed meanwhile may have its files counted here).
  left_shm=""
  local name pid
  for name in $(comm -13 <(echo "$shm_before") <(mcoll_shm_files)); do
    pid=${name#mcoll-}; pid=${pid%%-*}
    if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
      rm -f "/dev/shm/$name"
      left_shm+="$name "
    fi
  done
}

mcoll_shm_files() { (cd /dev/shm && ls -d mcoll-* 2>/dev/null | sort) || true; }

# Verdict on a job: "PASS" or "FAIL <why>".
verdict() {
  local rc=$1 logfile=$2 mode=$3
  local failed
  failed=$(client_failed "$rc" "$job_seconds")
  if [[ -n $failed ]]; then echo "$failed"; return; fi
  if [[ -n $left_shm ]]; then echo "FAIL shared-memory files left in /dev/shm: $left_shm"; return; fi
  if ! grep -qE '^ *No Errors *$' "$logfile"; then echo "FAIL no 'No Errors' line"; return; fi
  if [[ $mode == mcoll ]] && ! grep -q '^mcoll: report of rank 0' "$logfile"; then
    echo "FAIL no MCOLL_VERBOSE report (was mcoll preloaded?)"; return
  fi
  echo PASS
}

# Calls of mcoll's own algorithms (not passthrough, invalid arguments or fallback)
# in rank 0's report.
mcoll_alg_calls() {
  awk '/^mcoll: [a-z_]+ calls=/ {
         for (i = 4; i <= NF; i++) {
           split($i, kv, "=")
           if (kv[1] != "passthrough" && kv[1] != "invalid_args" && kv[1] != "fallback") n += kv[2]
         }
       }
       END { print n + 0 }' "$1"
}

# The first lines of a failing job's output that say something, for the table.
failure_excerpt() {
  grep -vE '^mcoll: |^ *$|^-{5,}|^={5,}|^= |^Primary job|^mpiexec noticed|^a non-zero exit|^with errorcode|^MPI_ABORT was invoked|^You may or may not|^NOTE: invoking|^exactly when Open MPI|^process rank' "$1" \
    | head -n 3 | cut -c1-160 | tr '\n' '|' | sed 's/|$//'
}

# One entry of the list: its job under mcoll (and natively when that fails) into FILE,
# as fields separated by US (0x1f): result, log line, table row, summary line, calls of
# mcoll's own algorithms. Jobs may run side by side (MCOLL_MPICH_COLL_JOBS): each in a
# subshell of its own (client_fork), with its own logs.
run_entry() {
  local flavour=$1 file=$2 prog=$3 np=$4 limit=$5
  shift 5
  local argv=("$@") name="$prog${*:+ $*}" id result line v nv t0 mlog nlog summary="" calls=0
  id=$(tr -c 'A-Za-z0-9_.=-' '_' <<<"$prog-$np${*:+-$*}")
  id=${id%_}
  if [[ ! -x $cache/$flavour/$prog ]]; then
    result=not-built
    line="$flavour $name np=$np: not-built ($(grep -m1 -E 'error' "$cache/$flavour/$prog.build.log" | cut -c1-120 || true))"
  else
    t0=$SECONDS
    mlog=$logs/$flavour-$id-mcoll.log
    run_job "$flavour" mcoll "$np" "$limit" "$mlog" "$prog" "${argv[@]}"
    v=$(verdict "$job_rc" "$mlog" mcoll)
    calls=$(mcoll_alg_calls "$mlog")
    line="$flavour $name np=$np: mcoll ${v} ($((SECONDS - t0))s)"
    nv=""
    if [[ $native -eq 1 || $v != PASS ]]; then
      t0=$SECONDS
      nlog=$logs/$flavour-$id-native.log
      run_job "$flavour" native "$np" "$limit" "$nlog" "$prog" "${argv[@]}"
      nv=$(verdict "$job_rc" "$nlog" native)
      line+=", native ${nv} ($((SECONDS - t0))s)"
    fi
    if [[ $v == PASS ]]; then
      result=pass
    elif [[ $nv == PASS ]]; then
      result=MCOLL-FAIL
      line+=" -- $(failure_excerpt "$mlog"); log $mlog"
      summary="MCOLL-FAIL $flavour $name np=$np: ${v#FAIL }: $(failure_excerpt "$mlog")"
    else
      result=native-fail
      summary="native-fail $flavour $name np=$np: ${nv#FAIL }"
    fi
    [[ $result == pass && -n $nv && $nv != PASS ]] && line+=" (fails natively only)"
  fi
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$result" "$line" \
    "$(printf '%-8s %-40s %3s  %s' "$flavour" "$name" "$np" "$result")" "$summary" "$calls" >"$file.part"
  mv "$file.part" "$file"
}

# The entries that have finished, in the list's order, up to the first still running.
show_results() {
  local result line row summary calls
  while [[ -f $results/$((shown + 1)) ]]; do
    shown=$((shown + 1))
    IFS=$'\x1f' read -r result line row summary calls <"$results/$shown"
    count[$result]=$((count[$result] + 1))
    alg_calls=$((alg_calls + calls))
    log "$line => $result"
    table+=("$row")
    [[ -n $summary ]] && echo "$summary" >>"$summary_file"
  done
  return 0
}

start_all=$SECONDS
fetch_source
for flavour in "${flavours[@]}"; do build_flavour "$flavour"; done
if [[ $prepare -eq 1 ]]; then
  log "MPICH coll tests ready for ${flavours[*]} in $cache"
  [[ $own_logs -eq 1 ]] && rm -rf "$logs"
  exit 0
fi

summary_file=$logs/summary.txt
: >"$summary_file"
mcoll_failed=0
for flavour in "${flavours[@]}"; do
  if [[ ! -e $mcoll_build/$flavour/lib/libmcoll.so ]]; then
    log "$flavour: $mcoll_build/$flavour/lib/libmcoll.so not built: skipped"
    echo "$flavour: skipped (libmcoll not built)" >>"$summary_file"
    continue
  fi
  if [[ $all -eq 1 ]]; then
    log "$flavour: every entry of coll/testlist.in at its own rank count"
  else
    log "$flavour: coll/testlist.in at most $max_np ranks (--all: as listed)"
  fi
  flavour_start=$SECONDS
  declare -A count=([pass]=0 [MCOLL-FAIL]=0 [native-fail]=0 [not-built]=0)
  alg_calls=0
  table=()
  jobs_at_once=${MCOLL_MPICH_COLL_JOBS:-$([[ $flavour == openmpi ]] && echo 3 || echo 1)}
  results=$logs/$flavour-results
  mkdir -p "$results"
  seq=0 shown=0
  while read -r prog np limit args; do
    seq=$((seq + 1))
    read -r -a argv <<<"${args:-}"
    if [[ $jobs_at_once -gt 1 ]]; then
      while [[ $(jobs -rp | wc -l) -ge $jobs_at_once ]]; do wait -n || true; done
      (client_fork "$seq"; run_entry "$flavour" "$results/$seq" "$prog" "$np" "$limit" "${argv[@]}") </dev/null &
    else
      run_entry "$flavour" "$results/$seq" "$prog" "$np" "$limit" "${argv[@]}" </dev/null
    fi
    show_results
  done < <(entries)
  wait
  show_results
  [[ ${count[MCOLL-FAIL]} -gt 0 ]] && mcoll_failed=1
  if [[ $alg_calls -eq 0 && ${count[pass]} -gt 0 ]]; then
    mcoll_failed=1
    echo "$flavour: mcoll's algorithms took no collective in any program" >>"$summary_file"
  fi
  echo "===== $flavour: MPICH coll tests under mcoll"
  printf '%-8s %-40s %3s  %s\n' flavour program np result
  printf '%s\n' "${table[@]}"
  echo "$flavour: pass=${count[pass]} MCOLL-FAIL=${count[MCOLL-FAIL]} native-fail=${count[native-fail]} not-built=${count[not-built]} mcoll-algorithm-calls=$alg_calls in $((SECONDS - flavour_start))s" \
    | tee -a "$summary_file"
  unset count
done

echo "===== MPICH coll tests summary (logs: $logs)"
cat "$summary_file"
echo "total $((SECONDS - start_all))s"
[[ $mcoll_failed -eq 0 && $own_logs -eq 1 ]] && rm -rf "$logs"
[[ $mcoll_failed -eq 0 ]]
