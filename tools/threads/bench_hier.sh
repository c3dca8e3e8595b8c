#!/usr/bin/env bash
# bench_hier.sh: thread ranks' two-level collectives (coll_hier.c) against the message
# path at P processes x T threads: REPEATS jobs of mcoll-hierbench (inside each job the
# two paths alternate for --rounds 9 rounds, MCOLL_THREADS_HIER=3); prints each job's
# table and the median over the jobs of each cell. Run it inside the bench lock:
#   flock /work/notes/bench.lock tools/threads/bench_hier.sh [FLAVOUR] [REPEATS] [P] [T] [ARGS]
# ARGS go to mcoll-hierbench (e.g. --colls gatherv,alltoall --sizes 8,65536).
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
flavour=${1:-mpich} repeats=${2:-3} procs=${3:-2} threads=${4:-2}
shift $(($# < 4 ? $# : 4))
out=${OUT:-$root/bench/raw/threads-hier}/$flavour-${procs}x$threads
mkdir -p "$out"
for ((r = 1; r <= repeats; r++)); do
  MCOLL_THREADS_HIER=3 timeout 240 "$root/bin/mcollrun" --mpi "$flavour" --threads "$threads" \
    -np $((procs * threads)) "$root/build/$flavour/bin/mcoll-hierbench" --rounds 9 "$@" > "$out/run-$r.txt"
  cat "$out/run-$r.txt"
done
echo "median of $repeats jobs ($flavour, $procs x $threads):"
python3 - "$out"/run-*.txt <<'PY'
import statistics, sys
cells = {}
for path in sys.argv[1:]:
    for line in open(path).read().splitlines()[1:]:
        coll, size, two, msg, _ = line.split()
        cells.setdefault((coll, int(size)), ([], []))
        cells[(coll, int(size))][0].append(float(two))
        cells[(coll, int(size))][1].append(float(msg))
print(f"{'coll':<10} {'bytes':>8} {'two-level us':>14} {'messages us':>14} {'ratio':>10}")
for (coll, size), (two, msg) in cells.items():
    t, m = statistics.median(two), statistics.median(msg)
    print(f"{coll:<10} {size:>8} {t:14.2f} {m:14.2f} {m / t:10.2f}")
PY
