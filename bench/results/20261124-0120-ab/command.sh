#!/bin/bash
# ABAB: session-start build (base: 5451db4, /tmp/tnbc-bench-build) vs this session's main
# (new: a copy of build/ at the commit in commit.txt), mcoll-bench back2back and latency,
# 2 ranks, Open MPI and MPICH; each job alternates native and mcoll itself, so a round's
# mcoll/native ratio normalises the host's mode; the builds alternate job by job.
OUT=${OUT:?}
cd /work/main
for r in 1 2 3; do
  for b in base new; do
    d=/tmp/tnbc-bench-build; [ $b = new ] && d=/tmp/s19/build-new
    for f in openmpi mpich; do
      timeout 300 bin/mcollrun --mpi $f --build $d -np 2 $d/$f/bin/mcoll-bench \
        -C barrier,bcast,allreduce,reduce,gather,scatter,allgather,alltoall -b 8 -e 64K -f 8 -r 5 \
        -o $OUT/$f-$b-$r.json > /dev/null 2>&1
      timeout 300 bin/mcollrun --mpi $f --build $d -np 2 $d/$f/bin/mcoll-bench \
        -C barrier,bcast,allreduce,reduce,gather,scatter,allgather,alltoall -b 8 -e 64K -f 8 -r 5 -m latency \
        -o $OUT/$f-$b-$r-lat.json > /dev/null 2>&1
    done
  done
done
echo done
