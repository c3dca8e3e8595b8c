#!/bin/bash
# ABAB: the session's base build (b49788d, /tmp/s22/base) against the node side-by-side
# change (f49ddf5, a copy of build/ in /tmp/s22/new), blocking collectives whose
# one-generation paths changed, 2 ranks, both MPIs, back to back and latency mode;
# each job alternates native and mcoll itself (the ratio normalises the host's mode);
# the builds alternate job by job.
OUT=${OUT:?}
cd /work/main
for r in ${REPS:-1 2}; do
  for b in base new; do
    d=/tmp/s22/$b
    for f in openmpi mpich; do
      for m in back2back latency; do
        timeout 300 bin/mcollrun --mpi $f --build $d -np 2 $d/$f/bin/mcoll-bench \
          -C ${COLLS:-bcast,gather,scatter,allgather,alltoall} -b 8 -e ${MAXB:-4K} -f 8 -r 5 -m $m \
          -o $OUT/${TAG:-}$f-$b-$r-$m.json > /dev/null 2>&1
      done
    done
  done
done
