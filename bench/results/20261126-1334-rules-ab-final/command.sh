#!/usr/bin/env bash
# The old thresholds' algorithm (native columns) against the final built-in rules' (mcoll
# columns; corrections of both modes) at the sizes where they differ at 2 ranks, forced in turn in
# one job, alternating, 15 rounds, latency and back-to-back modes, both MPIs; the whole
# set 3 times (REPS). Usage: command.sh OUTDIR (from anywhere; ROOT= the checkout).
# ratio = old/new time: > 1 the new choice is faster.
set -euo pipefail
out=${1:?outdir}
root=${ROOT:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
mkdir -p "$out"
# collective size old new
cases=(
  "barrier 8 hier counter"
  "bcast 6K shm_pipeline cma"
  "bcast 1M shm_pipeline cma"
  "bcast 2M shm_pipeline cma"
  "reduce 1M hsra cma"
  "reduce 2M hsra cma"
  "allreduce 6K flat cma"
  "allreduce 1M hsra cma"
  "allreduce 2M hsra cma"
  "reduce_scatter 4K cma flat"
  "scan 6K flat cma"
  "exscan 6K flat cma"
  "alltoall 256 shm_direct tiled_cma"
  "alltoall 4K shm_direct tiled_cma"
  "alltoall 32K shm_direct pairwise_cma"
)
for rep in $(seq 1 "${REPS:-3}"); do
for mpi in openmpi mpich; do
  for mode in latency back2back; do
    for c in "${cases[@]}"; do
      set -- $c
      tag="$mpi-$mode-$1-$2-$rep"
      timeout 600 "$root/bin/mcollrun" --mpi $mpi --build "$root/build" -np 2 \
        "$root/build/$mpi/bin/mcoll-bench" -C "$1" -b "$2" -e "$2" -m $mode -r 15 \
        -A "$3,$4" -o "$out/$tag.json" > "$out/$tag.txt" 2>&1 || echo "FAILED $tag" >> "$out/failed.txt"
    done
  done
done
done
