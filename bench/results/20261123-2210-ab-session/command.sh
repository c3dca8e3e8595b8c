#!/bin/bash
# ABAB: session-start build (base) vs merged main (new), mcoll-bench back2back and latency, 2 ranks
cd /work/main
for r in 1 2 3 4 5; do
  for b in base new; do
    d=/tmp/s18/build-$b; [ $b = new ] && d=/work/main/build
    for f in openmpi; do
      timeout 300 bin/mcollrun --mpi $f --build $d -np 2 --bind-to core $d/$f/bin/mcoll-bench \
        -C barrier,bcast,allreduce,reduce,gather,scatter,allgather,alltoall,scan -b 8 -e 64K -f 8 -r 5 \
        -o /tmp/s18/ab/$f-$b-$r.json > /dev/null 2>&1
      timeout 300 bin/mcollrun --mpi $f --build $d -np 2 --bind-to core $d/$f/bin/mcoll-bench \
        -C barrier,bcast,allreduce,reduce,gather,scatter,allgather,alltoall,scan -b 8 -e 64K -f 8 -r 5 -m latency \
        -o /tmp/s18/ab/$f-$b-$r-lat.json > /dev/null 2>&1
    done
  done
done
echo done
