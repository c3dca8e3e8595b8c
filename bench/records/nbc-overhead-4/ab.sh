#!/usr/bin/env bash
# one repetition: base and new builds alternating, both MPIs, 2 ranks, nbc mode, 8 B and 1 KiB
# usage: BASE_BUILD=dir ab.sh NAME REP   (results in bench/raw/nbc-overhead-4/NAME)
set -u
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
out=$root/bench/raw/nbc-overhead-4/$1
mkdir -p "$out"
rep=$2
for f in openmpi mpich; do
  for side in base new; do
    b=$root/build; [[ $side == base ]] && b=${BASE_BUILD:?the base build directory}
    timeout 240 $root/bin/mcollrun --mpi $f --build $b -np 2 --bind-to core $b/$f/bin/mcoll-bench -m nbc \
      -C barrier,bcast,allreduce,reduce -b 8 -e 1K -f 128 -r 7 -N 200 -o $out/$f-$side-8-$rep.json \
      > $out/$f-$side-8-$rep.txt 2>&1 || echo FAIL $f $side $rep >> $out/failed.txt
  done
done
