#!/usr/bin/env bash
# rules_ab.sh: two node algorithms of one collective forced in turn in one job (mcoll-bench
# -A OLD,NEW: OLD in the native columns, NEW in the mcoll columns), 15 alternating rounds,
# latency and back-to-back mode, both MPIs, 2 ranks; the whole set REPS times (default 3).
# Used to check the rules against the thresholds they replace where the two differ.
#   usage: tools/bench/rules_ab.sh CASES OUTDIR
#   CASES: a file of lines "collective size old new" (e.g. "bcast 4K shm_pipeline cma")
#   tools/bench/rules_ab_summary.py OUTDIR prints the table (old/new > 1: new is faster)
set -euo pipefail
cases_file=${1:?cases file}
out=${2:?outdir}
root=${ROOT:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
mkdir -p "$out"
mapfile -t cases < <(grep -v '^\s*\(#\|$\)' "$cases_file")
for rep in $(seq 1 "${REPS:-3}"); do
  for mpi in openmpi mpich; do
    for mode in latency back2back; do
      for c in "${cases[@]}"; do
        read -r coll size old new <<<"$c"
        tag="$mpi-$mode-$coll-$size-$rep"
        timeout 600 "$root/bin/mcollrun" --mpi "$mpi" --build "$root/build" -np 2 \
          "$root/build/$mpi/bin/mcoll-bench" -C "$coll" -b "$size" -e "$size" -m "$mode" -r 15 \
          -A "$old,$new" -o "$out/$tag.json" > "$out/$tag.txt" 2>&1 || echo "FAILED $tag" >> "$out/failed.txt"
      done
    done
  done
done
