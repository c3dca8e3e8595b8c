#!/bin/bash
# FT-like and IS-like at 2 hosts x 1 rank, MCOLL_TNBC=1 and =0 alternating (which goes
# first alternates too), ROUNDS rounds; one line per job.
cd /work/wt-tnbc
export MCOLL_TESTHOSTS_PREFIX=tnb MCOLL_TESTHOSTS_SUBNET=10.82.0
R=${ROUNDS:-7}
echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) git $(git rev-parse --short HEAD) $*"
for mpi in openmpi mpich; do
  for app in "ft-like:${FT_ARGS:-64 30}" "is-like:${IS_ARGS:-20 20}"; do
    for r in $(seq 1 $R); do
      for t in $([ $((r % 2)) = 1 ] && echo "1 0" || echo "0 1"); do
        out=/tmp/tnbc-app.out
        bench/watch_job.sh 2 "verified" $out -- env MCOLL_TNBC=$t MCOLL_PROGRESS_THREAD=1 "$@" timeout 60 scripts/testhosts.sh run --mpi $mpi --build build --ranks 1,1 build/$mpi/bin/mcoll-app-${app%%:*} ${app#*:}
        rc=$?
        echo "$mpi ${app%%:*} tnbc=$t rc=$rc $(grep -E '^(ft|is)_like:' $out | head -1)"
      done
    done
  done
done
