#!/usr/bin/env bash
# bench/watch_job.sh GRACE MARKER OUT -- COMMAND...: runs COMMAND with its output to OUT.
# A job whose output holds a line matching MARKER (extended regex: the program's "done")
# and that still runs GRACE seconds later is ended (TERM) and counted as finished: exit 75.
# Why: MPICH over UCX's TCP transport hangs in MPI_Finalize now and then across test
# hosts, natively too (openucx/ucx#8738), after the benchmark has written its results.
# Otherwise the exit status is COMMAND's.
set -uo pipefail
grace=$1 marker=$2 out=$3
shift 3
[[ ${1:-} == -- ]] && shift
"$@" >"$out" 2>&1 &
pid=$!
after_done=0
while kill -0 "$pid" 2>/dev/null; do
  if grep -Eqs "$marker" "$out" && ((++after_done > grace)); then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    exit 75
  fi
  sleep 1
done
wait "$pid"
