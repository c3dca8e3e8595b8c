#!/usr/bin/env bash
# bench_coll_all.sh: every collective (mcoll-bench -C all) as 1 process x T thread ranks
# against T process ranks under mcoll, whose job also times the host MPI (mcoll-bench
# alternates PMPI_* and MPI_* inside the job). Per repeat and per T the two jobs run
# back to back; each repeat holds the bench lock (< 5 min).
#   tools/threads/bench_coll_all.sh FLAVOUR OUTDIR [REPEATS] [T...]
# (BUILD: the build folder, default build; COLLS, MAX, FACTOR: mcoll-bench's -C, -e, -f;
# ONE_JOB=1: every repeat inside one hold of the lock, for short sweeps such as MAX=4K;
# BEFORE=DIR: a third job per T, thread ranks of another build, e.g. the previous runtime)
# Then tools/threads/coll_table.py OUTDIR prints the medians over the repeats.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
flavour=${1:?flavour}
out=${2:?outdir}
repeats=${3:-7}
shift 3 || true
ts=("$@")
[[ ${#ts[@]} -gt 0 ]] || ts=(2 4 8)
build=${BUILD:-$root/build}
prog=$build/$flavour/bin/mcoll-bench
args=(-C "${COLLS:-all}" -b 8 -e "${MAX:-1M}" -f "${FACTOR:-2}" -r 3 -T 1 -N 2000)
mkdir -p "$out"
one_repeat() {
  local r=$1
  for t in "${ts[@]}"; do
    timeout 120 "$root/bin/mcollrun" --build "$build" --mpi "$flavour" --threads "$t" -np "$t" "$prog" "${args[@]}" \
      -o "$out/threads-T$t-$r.json" > "$out/threads-T$t-$r.txt" 2>&1 || echo "threads T=$t repeat $r failed" >&2
    timeout 120 "$root/bin/mcollrun" --build "$build" --mpi "$flavour" -np "$t" "$prog" "${args[@]}" \
      -o "$out/process-T$t-$r.json" > "$out/process-T$t-$r.txt" 2>&1 || echo "process T=$t repeat $r failed" >&2
    if [[ -n ${BEFORE:-} ]]; then
      timeout 120 "$root/bin/mcollrun" --build "$BEFORE" --mpi "$flavour" --threads "$t" -np "$t" "$prog" "${args[@]}" \
        -o "$out/before-T$t-$r.json" > "$out/before-T$t-$r.txt" 2>&1 || echo "before T=$t repeat $r failed" >&2
    fi
  done
}
export -f one_repeat
export root flavour out prog build BEFORE
if [[ ${ONE_JOB:-0} == 1 ]]; then
  flock /work/notes/bench.lock bash -c "$(declare -p ts args); $(declare -f one_repeat)
    for ((r = 1; r <= $repeats; r++)); do one_repeat \$r; echo \"repeat \$r: load \$(cut -d' ' -f1 /proc/loadavg)\" >&2; done"
  exit 0
fi
for ((r = 1; r <= repeats; r++)); do
  start=$(date +%s)
  # (the function's arrays do not cross flock: run it through a fresh bash)
  flock /work/notes/bench.lock bash -c "$(declare -p ts args); $(declare -f one_repeat); one_repeat $r"
  echo "repeat $r: $(( $(date +%s) - start )) s, load $(cut -d' ' -f1 /proc/loadavg)" >&2
done
