#!/bin/bash
# ABAB: the session's base build (5041914, built in /tmp/s23/base) against the fixes of
# this session (f74ce79, a copy of build/ in /tmp/s23/new): reductions at the sizes
# that run HSRA and single copy (CMA), whose scratch is now per fiber; 2 ranks (CMA)
# and 4 ranks (oversubscribed: HSRA), both MPIs, back to back and latency mode. Each
# job alternates native and mcoll itself; the builds alternate job by job.
OUT=${OUT:?}
cd /work/main
for r in ${REPS:-1 2}; do
  for np in 2 4; do
    for b in base new; do
      d=/tmp/s23/$b
      for f in openmpi mpich; do
        for m in back2back latency; do
          timeout 300 bin/mcollrun --mpi $f --build $d -np $np $d/$f/bin/mcoll-bench \
            -C allreduce,reduce,scan,exscan,reduce_scatter_block -b 16K -e 4M -f 4 -r 5 -m $m \
            -o $OUT/$f-np$np-$b-$r-$m.json > /dev/null 2>&1
        done
      done
    done
  done
done
