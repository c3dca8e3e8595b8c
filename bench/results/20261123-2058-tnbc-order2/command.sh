#!/bin/bash
# What MCOLL_TNBC_ORDER buys (issue 10 part 3): T-NBC on, without vs with the order
# file that a MCOLL_TNBC_TRACE run of the same program wrote. The order is read at
# start-up, so the two sides are separate jobs, alternating A B A B ..., 7 rounds.
# ft_like (reads its received blocks in order) N=64 and 128, 5 iterations; mcoll-bench
# -m tnbc alltoall 1 MiB blocks (-r 3 per job; its CRC scenarios read blocks in order).
# Run from the repo root with the build copied to $B.
set -u
out=$(dirname "$0"); B=${B:-/tmp/s18/bb2}
export MCOLL_TNBC=1 MCOLL_PROGRESS_THREAD=1
run() { timeout 300 bin/mcollrun --build $B --mpi $f -np $np "$@"; }
for np in 2 4; do
  for f in openmpi mpich; do
    uptime > $out/uptime-$f-$np.txt
    for n in 64 128; do
      MCOLL_TNBC_TRACE=$out/trace-ft$n-$f-$np run $B/$f/bin/mcoll-app-ft-like $n 5 > /dev/null
      for round in 1 2 3 4 5 6 7; do
        echo "round $round n=$n plain $(run $B/$f/bin/mcoll-app-ft-like $n 5)"
        echo "round $round n=$n order $(MCOLL_TNBC_ORDER=$out/trace-ft$n-$f-$np run $B/$f/bin/mcoll-app-ft-like $n 5)"
      done
    done > $out/ft-$f-$np.txt 2>&1
    MCOLL_TNBC_TRACE=$out/trace-bench-$f-$np run $B/$f/bin/mcoll-bench -m tnbc -C alltoall -b 1M -e 1M -r 1 > /dev/null 2>&1
    for round in 1 2 3 4 5 6 7; do
      run $B/$f/bin/mcoll-bench -m tnbc -C alltoall -b 1M -e 1M -r 3 -o $out/bench-$f-$np-plain-$round.json > /dev/null 2>&1
      MCOLL_TNBC_ORDER=$out/trace-bench-$f-$np run $B/$f/bin/mcoll-bench -m tnbc -C alltoall -b 1M -e 1M -r 3 -o $out/bench-$f-$np-order-$round.json > /dev/null 2>&1
    done
    uptime >> $out/uptime-$f-$np.txt
  done
done
