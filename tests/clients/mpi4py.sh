#!/usr/bin/env bash
# mpi4py.sh: a real client's tests. Runs mpi4py's own collective test modules
# (test_cco_*.py, test_msgzero.py, from its source distribution) at 4 ranks under
# bin/mcollrun, with mpi4py built from source against each host MPI.
#
#   tests/clients/mpi4py.sh [--native] [--all] [--prepare] [openmpi] [mpich]
#
#   --prepare only download the sdist and build mpi4py for the flavours
#   --native  also run every module natively (plain mpiexec), to compare
#   --all     run every module on both flavours (see MPICH_MODULES: slow)
#
# A module passes when its job exits 0, every rank reports OK after running at
# least one test, and rank 0's MCOLL_VERBOSE report is there. The flavour passes
# when all its modules pass and mcoll's own algorithms took some of the calls.
# A module failing under mcoll is re-run natively to tell mcoll's bugs from the
# host MPI's.
#
# Environment: MPI4PY_VERSION (4.1.2), MCOLL_MPI4PY_MODULES (the modules to run
# instead of the default selection, space-separated), MCOLL_MPI4PY_CACHE (where the sdist and the
# builds are kept: <repo>/build, git-ignored), MCOLL_MPI4PY_TIMEOUT (seconds per
# job, 300), MCOLL_MPI4PY_LOGS (job logs: a temporary directory), PYTHON (python3).
# The first run builds mpi4py twice (a few minutes each); later runs reuse it.
set -euo pipefail

root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
version=${MPI4PY_VERSION:-4.1.2}
cache=${MCOLL_MPI4PY_CACHE:-$root/build}
job_timeout=${MCOLL_MPI4PY_TIMEOUT:-300}
build_timeout=3000  # one mpi4py build on 2 busy cores
# The interpreter itself, not a version manager's shim that each rank would run.
python=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
mcoll_build=${MCOLL_BUILD_DIR:-$root/build}  # as bin/mcollrun finds it
np=4

native=0
all=0
prepare=0
flavours=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --native) native=1 ;;
    --all) all=1 ;;
    --prepare) prepare=1 ;;
    openmpi|mpich) flavours+=("$1") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mpi4py.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ ${#flavours[@]} -gt 0 ]] || flavours=(openmpi mpich)

# Every test_cco_* module of the sdist, and test_msgzero (found at run time).
MODULES=()
# MPICH 4.0 (ch4) spins without yielding, so with 4 ranks on 2 cores each message
# costs a time slice: its full list takes ~20 minutes, so by default it runs these
# (the blocking buffer and object collectives, the zero-size messages, the
# non-blocking and the persistent buffer and vector collectives) and --all runs the
# rest too.
MPICH_MODULES=(test_cco_buf test_cco_obj test_cco_ngh_obj test_msgzero
               test_cco_nb_buf test_cco_nb_vec test_cco_pr_buf test_cco_pr_vec test_cco_pr_ngh_buf)
# The modules of the non-blocking (MPI_I*) and persistent (MPI_<Coll>_init)
# collectives; Open MPI runs the first two (its default list has every test_cco_*
# module but OPENMPI_LEFT_OUT).
NBC_MODULES=(test_cco_nb_buf test_cco_nb_vec test_cco_pr_buf test_cco_pr_vec test_cco_pr_ngh_buf)
# Open MPI 4.1 is MPI 3.1: mpi4py skips every test of its persistent-collective
# modules there, so they would only cost three launches.
OPENMPI_LEFT_OUT=(test_cco_pr_buf test_cco_pr_ngh_buf test_cco_pr_vec)

# Tests that fail natively too are the host MPI's, not mcoll's: excluded per
# flavour as runtests.py -x patterns, each with why. (None so far.)
EXCLUDE_openmpi=()
EXCLUDE_mpich=()

# shellcheck source=tests/clients/lib.sh
. "$root/tests/clients/lib.sh"
client_setup mpi4py MPI4PY_CLIENT_JOB "${MCOLL_MPI4PY_LOGS:-}"

log() { printf 'mpi4py: %s\n' "$*"; }

# The sdist, once: its test/ directory is what runs; the tarball is what is built.
sdist=$cache/mpi4py-src/mpi4py-$version.tar.gz
testdir=$cache/mpi4py-src/mpi4py-$version/test
fetch_sdist() {
  if [[ ! -f $sdist ]]; then
    log "downloading the mpi4py $version sdist"
    mkdir -p "$cache/mpi4py-src"
    # --no-binary mpi4py (not :all:) so that its build tools come as wheels.
    "$python" -m pip download -q --no-deps --no-binary mpi4py -d "$cache/mpi4py-src" \
      "mpi4py==$version"
  fi
  if [[ ! -f $testdir/runtests.py ]]; then
    tar -xzf "$sdist" -C "$cache/mpi4py-src" "mpi4py-$version/test"
  fi
}

# mpi4py built against the flavour's MPI, into <cache>/mpi4py-<flavour>.
build_mpi4py() {
  local flavour=$1 target=$cache/mpi4py-$flavour
  if [[ -d $target/mpi4py-$version.dist-info ]]; then
    return
  fi
  log "building mpi4py $version with mpicc.$flavour (a few minutes)"
  rm -rf "$target" "$target.tmp"
  # Into a scratch directory first, so an interrupted build is never taken as done.
  # -O1 -g0: its one huge C file compiles faster, and the tests measure MPI,
  # not mpi4py's own speed.
  (
    export MPICC=mpicc.$flavour CFLAGS="${CFLAGS:-} -O1 -g0"
    exec timeout -k 10 "$build_timeout" "$python" -m pip install --no-deps --no-cache-dir \
      --target "$target.tmp" "$sdist"
  ) >"$logs/build-$flavour.log" 2>&1 &
  client_wait
  local rc=$job_rc
  if [[ $rc -ne 0 ]]; then
    tail -n 40 "$logs/build-$flavour.log"
    log "mpi4py build for $flavour failed (exit code $rc; log $logs/build-$flavour.log)"
    exit 1
  fi
  local so
  so=$(ls "$target.tmp"/mpi4py/MPI.*.so 2>/dev/null | head -n1)
  [[ -n $so ]] || { log "mpi4py build for $flavour made no MPI module"; exit 1; }
  local want='libmpi\.so'
  [[ $flavour == mpich ]] && want='libmpich'
  local libs
  libs=$(ldd "$so")
  if ! grep -q "$want" <<<"$libs"; then
    log "mpi4py for $flavour is not linked with its MPI:"; echo "$libs"; exit 1
  fi
  mv "$target.tmp" "$target"
}

# One job: run MODULE at $np ranks, under mcoll or natively; output to LOGFILE.
# Sets job_rc.
run_job() {
  local flavour=$1 mode=$2 module=$3 logfile=$4
  local -n excludes=EXCLUDE_$flavour
  local launch
  client_launcher "$flavour" "$mode"
  local args=(--no-numpy --path "$cache/mpi4py-$flavour" -i "^$module\\.py\$")
  local x
  for x in "${excludes[@]}"; do args+=(-x "$x"); done
  # --no-numpy: the builtin array module alone exercises the same collectives
  # over the same datatypes, at a fraction of the time.
  client_job "$mode" "$job_timeout" "$logfile" "${launch[@]}" -np "$np" \
    "$python" "$testdir/runtests.py" "${args[@]}"
}

# Verdict on a job's log: "PASS <tests> <skipped>" or "FAIL <why>". The ranks'
# unittest reports interleave, so they are matched anywhere, not by line.
verdict() {
  local rc=$1 logfile=$2 mode=$3
  local failed
  failed=$(client_failed "$rc" "$job_timeout")
  if [[ -n $failed ]]; then echo "$failed"; return; fi
  local counts reports
  counts=$(grep -oE 'Ran [0-9]+ tests? in' "$logfile" | awk '{print $2}' || true)
  reports=$(grep -c . <<<"$counts" || true)
  if [[ $reports -ne $np ]]; then echo "FAIL $reports of $np ranks reported"; return; fi
  if grep -qE 'FAILED \(' "$logfile"; then echo "FAIL a rank reported FAILED"; return; fi
  if grep -qx 0 <<<"$counts"; then echo "FAIL no test ran"; return; fi
  if [[ $mode == mcoll ]] && ! grep -q '^mcoll: report of rank 0' "$logfile"; then
    echo "FAIL no MCOLL_VERBOSE report (was mcoll preloaded?)"; return
  fi
  local skipped
  skipped=$(grep -oE 'OK \(skipped=[0-9]+' "$logfile" | head -n1 | grep -oE '[0-9]+$' || true)
  echo "PASS $(sort -n <<<"$counts" | tail -n1) ${skipped:-0}"
}

# "coll:alg=n ..." for the algorithms of mcoll that ran (not passthrough, invalid
# arguments or fallback), from rank 0's report.
mcoll_algs() {
  awk '/^mcoll: [a-z_]+ calls=/ {
         for (i = 4; i <= NF; i++) {
           split($i, kv, "=")
           if (kv[1] != "passthrough" && kv[1] != "invalid_args" && kv[1] != "fallback" && kv[2] > 0)
             printf "%s:%s=%s ", $2, kv[1], kv[2]
         }
       }' "$1"
}

mcoll_fallbacks() {
  awk '/^mcoll: [a-z_]+ calls=/ { for (i = 4; i <= NF; i++) if ($i ~ /^fallback=/) { split($i, kv, "="); n += kv[2] } }
       END { print n + 0 }' "$1"
}

passed=0
failed=0
summary=()
start_all=$SECONDS
fetch_sdist
if [[ $prepare -eq 1 ]]; then
  for flavour in "${flavours[@]}"; do build_mpi4py "$flavour"; done
  log "mpi4py $version ready for ${flavours[*]} in $cache"
  if [[ $own_logs -eq 1 ]]; then rm -rf "$logs"; fi
  exit 0
fi
for m in "$testdir"/test_cco_*.py "$testdir"/test_msgzero.py; do
  m=${m##*/}; MODULES+=("${m%.py}")
done

for flavour in "${flavours[@]}"; do
  if [[ ! -e $mcoll_build/$flavour/lib/libmcoll.so ]]; then
    log "$flavour: $mcoll_build/$flavour/lib/libmcoll.so not built: skipped"
    summary+=("$flavour: skipped (libmcoll not built)")
    continue
  fi
  build_mpi4py "$flavour"
  modules=("${MODULES[@]}")
  if [[ -n ${MCOLL_MPI4PY_MODULES:-} ]]; then
    read -r -a modules <<<"$MCOLL_MPI4PY_MODULES"
    log "$flavour: running MCOLL_MPI4PY_MODULES: ${modules[*]}"
  elif [[ $flavour == mpich && $all -eq 0 ]]; then
    modules=("${MPICH_MODULES[@]}")
    log "mpich: running ${MPICH_MODULES[*]} only (slow when oversubscribed; --all runs every module)"
  elif [[ $flavour == openmpi && $all -eq 0 ]]; then
    modules=()
    for m in "${MODULES[@]}"; do
      [[ " ${OPENMPI_LEFT_OUT[*]} " == *" $m "* ]] || modules+=("$m")
    done
    log "openmpi: leaving out ${OPENMPI_LEFT_OUT[*]} (all skipped on MPI 3.1; --all runs them)"
  fi
  flavour_start=$SECONDS
  algs_seen=0
  flavour_failed=0
  for module in "${modules[@]}"; do
    t0=$SECONDS
    run_job "$flavour" mcoll "$module" "$logs/$flavour-$module-mcoll.log"
    v=$(verdict "$job_rc" "$logs/$flavour-$module-mcoll.log" mcoll)
    algs=$(mcoll_algs "$logs/$flavour-$module-mcoll.log")
    fallbacks=$(mcoll_fallbacks "$logs/$flavour-$module-mcoll.log")
    [[ -n $algs ]] && algs_seen=1
    line="$flavour $module mcoll: ${v%% *} ($((SECONDS - t0))s)"
    if [[ $v == PASS* ]]; then
      read -r _ ntests nskipped <<<"$v"
      line+=" tests=$ntests skipped=$nskipped fallback=$fallbacks mcoll algorithms: ${algs:-none}"
    else
      line+=" ${v#FAIL }"
    fi
    log "$line"
    native_v=""
    if [[ $native -eq 1 || $v != PASS* ]]; then
      t0=$SECONDS
      run_job "$flavour" native "$module" "$logs/$flavour-$module-native.log"
      native_v=$(verdict "$job_rc" "$logs/$flavour-$module-native.log" native)
      log "$flavour $module native: ${native_v%% *} ($((SECONDS - t0))s)"
      if [[ $v == PASS* && $native_v != PASS* ]]; then
        summary+=("$flavour $module: passes under mcoll but fails natively (${native_v#FAIL })")
      fi
    fi
    if [[ $v == PASS* ]]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1)); flavour_failed=1
      if [[ $native_v == PASS* ]]; then
        why="fails under mcoll only: an mcoll bug"
      else
        why="fails natively too (${native_v#FAIL }): the host MPI's? (if so, exclude it in EXCLUDE_$flavour, saying why)"
      fi
      summary+=("$flavour $module: FAIL, $why; log $logs/$flavour-$module-mcoll.log")
      echo "----- $flavour $module under mcoll: the last 60 lines of its log"
      tail -n 60 "$logs/$flavour-$module-mcoll.log"
      echo "-----"
    fi
  done
  if [[ $algs_seen -eq 0 && ${#modules[@]} -gt 0 ]]; then
    failed=$((failed + 1)); flavour_failed=1
    summary+=("$flavour: mcoll's algorithms took no collective in any module")
  fi
  summary+=("$flavour: $([[ $flavour_failed -eq 0 ]] && echo ok || echo FAILED), ${#modules[@]} modules in $((SECONDS - flavour_start))s")
done

# Our temporary logs are kept only when they tell of a failure.
[[ $failed -eq 0 && $own_logs -eq 1 ]] && rm -rf "$logs" && logs="(removed)"
echo "===== mpi4py $version client tests, $np ranks (logs: $logs)"
for s in "${summary[@]}"; do echo "$s"; done
echo "total $((SECONDS - start_all))s"
echo "mpi4py: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
