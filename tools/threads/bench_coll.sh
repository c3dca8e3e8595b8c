#!/usr/bin/env bash
# bench_coll.sh: small collectives (mcoll-collbench) as 2 thread ranks of one process
# against 2 process ranks under mcoll (mcollrun -np 2) and 2 processes of the host MPI
# alone, jobs alternating for ROUNDS (7) rounds; prints per collective the median time
# of each and the ratios (> 1: thread ranks are faster).
#   tools/threads/bench_coll.sh [FLAVOUR] [OUTDIR]      (FLAVOUR: mpich)
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
flavour=${1:-mpich}
out=${2:-$root/bench/raw/threads-coll}
rounds=${ROUNDS:-7}
prog=$root/build/$flavour/bin/mcoll-collbench
args=(--iters "${ITERS:-200}" --rounds 7)
mkdir -p "$out"
for ((r = 1; r <= rounds; r++)); do
  timeout 300 "$root/bin/mcollrun" --mpi "$flavour" --threads 2 -np 2 "$prog" "${args[@]}" > "$out/threads-$r.txt"
  timeout 300 "$root/bin/mcollrun" --mpi "$flavour" -np 2 "$prog" "${args[@]}" > "$out/mcoll-$r.txt"
  timeout 300 "mpiexec.$flavour" -np 2 "$prog" "${args[@]}" > "$out/native-$r.txt"
done
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf "%-14s %12s %12s %12s %12s %12s\n" call "threads us" "mcoll us" "native us" "mcoll/thr" "native/thr"
for name in $(awk '{print $1}' "$out/threads-1.txt"); do
  t=$(cat "$out"/threads-*.txt | awk -v n="$name" '$1 == n {print $2}' | median)
  m=$(cat "$out"/mcoll-*.txt | awk -v n="$name" '$1 == n {print $2}' | median)
  p=$(cat "$out"/native-*.txt | awk -v n="$name" '$1 == n {print $2}' | median)
  awk -v n="$name" -v t="$t" -v m="$m" -v p="$p" \
    'BEGIN {printf "%-14s %12.3f %12.3f %12.3f %12.2f %12.2f\n", n, t, m, p, m / t, p / t}'
done
