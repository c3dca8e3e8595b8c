#!/usr/bin/env bash
# bench_p2p.sh: point-to-point latency between 2 thread ranks of one process against
# 2 process ranks of the host MPI (no mcoll), 2 thread-rank processes of 1 thread
# (the runtime over the host MPI), and 2 process ranks under mcoll (mcollrun -np 2,
# libmcoll preloaded), jobs alternating A B C D A B C D ... for ROUNDS (7) rounds;
# prints per size the median one-way time of each and the ratios (> 1: threads faster).
# BEFORE=DIR: a fifth job per round, 2 thread ranks of another build (the previous runtime).
# Run it under flock /work/notes/bench.lock (one job, ~1-2 min).
#   tools/threads/bench_p2p.sh [FLAVOUR] [OUTDIR]     (FLAVOUR: mpich)
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
flavour=${1:-mpich}
out=${2:-$root/bench/raw/threads-p2p}
rounds=${ROUNDS:-7}
prog=$root/build/$flavour/bin/mcoll-pingpong
read -ra pp_args <<< "${PINGPONG_ARGS:-}" # e.g. "--rounds 3": fewer inner rounds per job
mkdir -p "$out"
for ((r = 1; r <= rounds; r++)); do
  timeout 300 "$root/bin/mcollrun" --mpi "$flavour" --threads 2 -np 2 "$prog" "${pp_args[@]}" > "$out/threads-$r.txt"
  timeout 300 "mpiexec.$flavour" -np 2 "$prog" "${pp_args[@]}" > "$out/processes-$r.txt"
  timeout 300 "$root/bin/mcollrun" --mpi "$flavour" --threads 1 -np 2 "$prog" "${pp_args[@]}" > "$out/runtime-$r.txt"
  timeout 300 "$root/bin/mcollrun" --mpi "$flavour" -np 2 "$prog" "${pp_args[@]}" > "$out/mcoll-$r.txt"
  if [[ -n ${BEFORE:-} ]]; then
    timeout 300 "$root/bin/mcollrun" --build "$BEFORE" --mpi "$flavour" --threads 2 -np 2 \
      "$prog" "${pp_args[@]}" > "$out/before-$r.txt"
  fi
done
# median per size over the rounds, then the table
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf "%-9s %11s %12s %11s %11s %9s %9s %9s %9s" size "threads us" "processes us" \
  "runtime us" "mcoll us" "thr MB/s" "proc/thr" "mcoll/thr" "proc/rt"
[[ -n ${BEFORE:-} ]] && printf " %11s %10s" "before us" "before/thr"
echo
for size in $(grep -hv '^#' "$out"/threads-1.txt | awk '{print $1}'); do
  t=$(cat "$out"/threads-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
  p=$(cat "$out"/processes-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
  c=$(cat "$out"/runtime-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
  m=$(cat "$out"/mcoll-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
  awk -v s="$size" -v t="$t" -v p="$p" -v c="$c" -v m="$m" \
    'BEGIN {printf "%-9s %11.3f %12.3f %11.3f %11.3f %9.0f %9.2f %9.2f %9.2f", s, t, p, c, m, s / t, p / t, m / t, p / c}'
  if [[ -n ${BEFORE:-} ]]; then
    b=$(cat "$out"/before-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
    awk -v t="$t" -v b="$b" 'BEGIN {printf " %11.3f %10.2f", b, b / t}'
  fi
  echo
done
