#!/usr/bin/env bash
# One repetition: base and new builds alternating (order flips each rep), both MPIs,
# 2 ranks, mcoll-bench's nbc mode. Results in bench/raw/nbc-overhead-5/NAME.
# usage: BASE_BUILD=dir [COLLS=barrier,bcast,reduce,allreduce] [RANGES='8:1K:128 64K:1M:16'] ab.sh NAME REP
set -u
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
out=$root/bench/raw/nbc-overhead-5/$1
mkdir -p "$out"
rep=$2
colls=${COLLS:-barrier,bcast,reduce,allreduce}
sides="base new"; (( rep % 2 == 0 )) && sides="new base"
for f in openmpi mpich; do
  for side in $sides; do
    b=$root/build; [[ $side == base ]] && b=${BASE_BUILD:?the base build directory}
    for range in ${RANGES:-8:1K:128 64K:1M:16}; do
      set -- ${range//:/ }
      timeout 240 $root/bin/mcollrun --mpi $f --build $b -np 2 --bind-to core $b/$f/bin/mcoll-bench -m nbc \
        -C $colls -b $1 -e $2 -f $3 -r 7 -N 200 -o $out/$f-$side-$1-$rep.json \
        > $out/$f-$side-$1-$rep.txt 2>&1 || echo FAIL $f $side $1 $rep >> $out/failed.txt
    done
  done
done
