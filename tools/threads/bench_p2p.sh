#!/usr/bin/env bash
# bench_p2p.sh: point-to-point latency between 2 thread ranks of one process against
# 2 process ranks of the host MPI (no mcoll), and 2 thread-rank processes of 1 thread
# (the runtime over the host MPI), jobs alternating A B C A B C ... for ROUNDS (7)
# rounds; prints per size the median one-way time of each and the ratios.
#   tools/threads/bench_p2p.sh [FLAVOUR] [OUTDIR]     (FLAVOUR: mpich)
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
flavour=${1:-mpich}
out=${2:-$root/bench/raw/threads-p2p}
rounds=${ROUNDS:-7}
prog=$root/build/$flavour/bin/mcoll-pingpong
mkdir -p "$out"
for ((r = 1; r <= rounds; r++)); do
  timeout 300 "$root/bin/mcollrun" --mpi "$flavour" --threads 2 -np 2 "$prog" > "$out/threads-$r.txt"
  timeout 300 "mpiexec.$flavour" -np 2 "$prog" > "$out/processes-$r.txt"
  timeout 300 "$root/bin/mcollrun" --mpi "$flavour" --threads 1 -np 2 "$prog" > "$out/runtime-$r.txt"
done
# median per size over the rounds, then the table
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf "%-9s %12s %12s %12s %10s %10s\n" size "threads us" "processes us" "runtime us" "proc/thr" "proc/rt"
for size in $(grep -hv '^#' "$out"/threads-1.txt | awk '{print $1}'); do
  t=$(cat "$out"/threads-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
  p=$(cat "$out"/processes-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
  c=$(cat "$out"/runtime-*.txt | awk -v s="$size" '$1 == s {print $2}' | median)
  awk -v s="$size" -v t="$t" -v p="$p" -v c="$c" \
    'BEGIN {printf "%-9s %12.3f %12.3f %12.3f %10.2f %10.2f\n", s, t, p, c, p / t, p / c}'
done
