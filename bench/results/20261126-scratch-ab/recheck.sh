#!/bin/bash
# Re-run of the rows that read > 10% worse in summary.md: Open MPI, 2 and 4 ranks,
# reduce/allreduce/reduce_scatter_block, 4 more pairs of jobs, builds alternating.
OUT=${OUT:?}
cd /work/main
for r in 3 4 5 6; do
  for np in 2 4; do
    for b in base new; do
      d=/tmp/s23/$b
      for m in back2back latency; do
        timeout 300 bin/mcollrun --mpi openmpi --build $d -np $np $d/openmpi/bin/mcoll-bench \
          -C allreduce,reduce,reduce_scatter_block -b 16K -e 1M -f 4 -r 7 -m $m \
          -o $OUT/openmpi-np$np-$b-$r-$m.json > /dev/null 2>&1
      done
    done
  done
done
