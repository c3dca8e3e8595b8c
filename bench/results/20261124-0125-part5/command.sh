#!/bin/bash
# Issue 12 part 5: each inter-node algorithm forced in turn across 2 test hosts x 2 ranks,
# host MPI vs mcoll alternating in one job (mcoll-bench back-to-back), 7 rounds; the
# verbose report (stderr) shows what ran between nodes.
set -u
R=${OUT:-bench/results/20261124-0125-part5}
mkdir -p $R
export MCOLL_TESTHOSTS_PREFIX=mcw MCOLL_TESTHOSTS_SUBNET=10.79.0
scripts/testhosts.sh up 2 >/dev/null
for f in openmpi mpich; do
  for pair in barrier:dissemination bcast:binomial bcast:scatter_allgather bcast:first_arrival \
              reduce:binomial reduce:rabenseifner allreduce:recursive_doubling allreduce:rabenseifner \
              allgather:ring alltoall:direct alltoall:grid_rsend; do
    coll=${pair%%:*} alg=${pair#*:}
    var=MCOLL_ALG_${coll^^}_INTER
    env $var=$alg MCOLL_VERBOSE=1 timeout 120 scripts/testhosts.sh run --mpi $f --ranks 2,2 \
      build/$f/bin/mcoll-bench -C $coll -b 8 -e 256K -f 64 -r 7 -c -o $R/$f-$coll-$alg.json \
      > $R/$f-$coll-$alg.txt 2> $R/$f-$coll-$alg.err
    echo "$f $coll $alg exit $?" >> $R/exits.txt
  done
done
scripts/testhosts.sh down >/dev/null
