#!/usr/bin/env bash
# base and new alternating, REPS times: world_first for bcast and allreduce, 8 B, both MPIs
# usage: BASE_BUILD=dir REPS=3 world_first.sh   (under the bench lock)
set -u
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
here=$root/bench/records/nbc-overhead-5
tmp=$(mktemp -d)
mpicc.openmpi -O2 -o $tmp/wf-openmpi $here/world_first.c && mpicc.mpich -O2 -o $tmp/wf-mpich $here/world_first.c || exit 1
for rep in $(seq 1 ${REPS:-3}); do
  for f in openmpi mpich; do
    for side in base new; do
      b=$root/build; [[ $side == base ]] && b=${BASE_BUILD:?}
      for c in bcast allreduce; do
        echo "== rep $rep $f $side"
        timeout 60 $root/bin/mcollrun --mpi $f --build $b -np 2 --bind-to core $tmp/wf-$f 8 $c
      done
    done
  done
done
rm -rf $tmp
