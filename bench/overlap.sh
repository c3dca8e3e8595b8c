#!/usr/bin/env bash
# The hierarchical overlap measured against itself: mcoll-bench -V
# INTER_OVERLAP=0,1 alternates the leader's inter-node steps in sequence (the "native"
# columns) and on a companion fiber (the "mcoll" columns) in one job, on fake nodes
# (MCOLL_TOPO=nodes=2, 4 ranks; this machine has 2 cores). Writes
# bench/raw/<stamp>-overlap-<flavour>.json/.txt and <stamp>-overlap-command.txt, and
# the report: <stamp>-overlap.md, <stamp>-overlap.png (heat map of off/on, > 1: the
# overlap is faster) and <stamp>-overlap-curves.png.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
results=$root/bench/raw
stamp=$(date +%Y%m%d-%H%M)
build=${MCOLL_BUILD_DIR:-$root/build}
cmd="$results/$stamp-overlap-command.txt"
echo "# bench/overlap.sh $stamp; git $(git -C "$root" rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" > "$cmd"
jsons=()
for flavour in ${FLAVOURS:-openmpi mpich}; do
  out=$results/$stamp-overlap-$flavour
  args=(-V INTER_OVERLAP=0,1 -C bcast,allreduce,reduce,scan -b 512K -e 8M -f 4 -r 9 -o "$out.json")
  echo "MCOLL_TOPO=nodes=2 bin/mcollrun --mpi $flavour -np 4 $build/$flavour/bin/mcoll-bench ${args[*]}" >> "$cmd"
  MCOLL_TOPO=nodes=2 "$root/bin/mcollrun" --mpi "$flavour" --build "$build" -np 4 \
    "$build/$flavour/bin/mcoll-bench" "${args[@]}" | tee "$out.txt"
  jsons+=("$out.json")
done
report=(python3 "$root/tools/py/mcoll_report.py" "${jsons[@]}" --md "$results/$stamp-overlap.md"
        --png "$results/$stamp-overlap.png")
echo "${report[*]}" >> "$cmd"
"${report[@]}"
