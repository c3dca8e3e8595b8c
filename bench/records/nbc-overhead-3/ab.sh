#!/usr/bin/env bash
# one repetition: base and new builds alternating, both MPIs, 2 ranks, nbc mode
set -u
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
out=$root/bench/raw/nbc-overhead-3/$1
mkdir -p "$out"
rep=$2
for f in openmpi mpich; do
  for side in base new; do
    b=$root/build; [[ $side == base ]] && b=${BASE_BUILD:-/tmp/nbcfast2-base-build}
    for range in "-b 8 -e 1K -f 128" "-b 8K -e 64K -f 8"; do
      tag=$(echo $range | awk '{print $2}')
      timeout 300 $root/bin/mcollrun --mpi $f --build $b -np 2 --bind-to core $b/$f/bin/mcoll-bench -m nbc \
        -C barrier,bcast,allreduce,reduce $range -r 7 -N 200 -o $out/$f-$side-$tag-$rep.json > $out/$f-$side-$tag-$rep.txt 2>&1 || echo FAIL $f $side $tag >> $out/failed.txt
    done
  done
done
