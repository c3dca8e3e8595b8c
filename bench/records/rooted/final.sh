#!/bin/sh
# usage: final.sh TAG [hogs]: the record's runs, both MPIs, one job each
cd /work/wt-rooted
tag=$1; wrap=""
[ "$2" = hogs ] && wrap=bench/raw/rooted/hogs.sh
for f in openmpi mpich; do
  echo "== $f $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) commit $(git rev-parse --short HEAD)"
  $wrap bin/mcollrun --mpi $f -np 2 --bind-to core build/$f/bin/mcoll-bench -m latency -F \
    -C gather,gatherv,scatter,scatterv,allgatherv -b 64K -e 4M -f 4 -r 7 -n 100 -w 10 \
    -o bench/raw/rooted/$tag-$f.json
done
echo "== end $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
