#!/bin/bash
# CP bcast (issue 12 part 4): mcoll-bench -m arrival, from the repo root after building.
# Fake nodes (MCOLL_TOPO=nodes=2, 4 ranks: the host MPI sees one node there) and real
# test hosts (2 hosts x 2 ranks, network namespaces); one late rank (rank 2: local
# rank 0 of the node without the root, 2 ms) and random delays (uniform 0-2 ms per
# rank and call); 7 rounds, 20 calls each, sides rotating.
set -u
R=${OUT:-bench/results/20261124-0115-cp}
for D in late:2:2000 random:2000; do
  tag=$(echo $D | tr ':' '-')
  for f in openmpi mpich; do
    MCOLL_TOPO=nodes=2 timeout 600 bin/mcollrun --mpi $f -np 4 build/$f/bin/mcoll-bench -m arrival -D $D \
      -b 8 -e 64K -f 8 -r 7 -n 20 -o $R/fake-$f-nodes2-$tag.json > $R/fake-$f-nodes2-$tag.txt 2>&1
  done
  MCOLL_TESTHOSTS_PREFIX=mcw MCOLL_TESTHOSTS_SUBNET=10.79.0 timeout 900 scripts/testhosts-bench.sh \
    --layouts "2,2" --colls bcast --tag hosts-$tag --results $R -- -m arrival -D $D -b 8 -e 64K -f 8 -r 7 -n 20
done
