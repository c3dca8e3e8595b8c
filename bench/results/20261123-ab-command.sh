#!/bin/bash
# A/B: the landed main before this session (57f7bf2, /tmp/old) and now, same sweep, one after the other
for f in openmpi mpich; do
  bind=--bind-to; [[ $f == mpich ]] && bind=-bind-to
  for w in old:/tmp/old new:/work/main; do
    n=${w%%:*}; d=${w#*:}
    timeout 300 $d/bin/mcollrun --mpi $f --build $d/build -np 2 $bind core $d/build/$f/bin/mcoll-bench \
      -C bcast,allreduce,reduce,allgather,gather,scatter,alltoall -b 8 -e 1M -f 8 -o /work/main/bench/results/20261123-ab-$f-$n.json > /tmp/ab/$f-$n.txt 2>&1
  done
done
