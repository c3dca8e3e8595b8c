#!/bin/bash
# T-NBC overlap benchmark (issue 10 part 4) and miniapps (part 5); run from the repo root
# after building (cmake --build build; copied to /tmp/tnbc-bench-build so that the
# runs are not disturbed by rebuilds). Host MPI, T-NBC off and on alternate inside
# each bench job (mcoll_tnbc_enable), 7 rounds, medians of the slowest rank.
set -u
out=${OUT:-bench/results/20261123-2350-tnbc-quiet}
what=${1:-all} # bench | apps | all
export MCOLL_TNBC=1 MCOLL_PROGRESS_THREAD=1
[[ $what == apps ]] || for np in ${NPS:-2 4}; do
  for f in openmpi mpich; do
    uptime > $out/uptime-bench-$f-$np.txt
    timeout 900 bin/mcollrun --build /tmp/tnbc-bench-build --mpi $f -np $np /tmp/tnbc-bench-build/$f/bin/mcoll-bench -m tnbc -C alltoall,bcast \
      -b 1M -e 1M -r 7 -o $out/bench-$f-$np.json > $out/bench-$f-$np.txt 2>&1
  done
done
# miniapps: native, MCOLL_TNBC=0 (progress thread on, as T-NBC needs), MCOLL_TNBC=1; alternating, 7 rounds
unset MCOLL_TNBC MCOLL_PROGRESS_THREAD
[[ $what == bench ]] || for np in ${NPS:-2 4}; do
  for f in openmpi mpich; do
    uptime > $out/uptime-apps-$f-$np.txt
    for round in 1 2 3 4 5 6 7; do
      for app in "ft-like 64 5" "is-like 20 5"; do
        set -- $app
        prog=/tmp/tnbc-bench-build/$f/bin/mcoll-app-$1
        mpiexec_native=(mpiexec.$f -np $np); [[ $f == openmpi ]] && mpiexec_native=(mpiexec.openmpi --oversubscribe --allow-run-as-root -np $np)
        echo "round $round native $(timeout 300 "${mpiexec_native[@]}" $prog $2 $3)"
        echo "round $round tnbc0 $(MCOLL_PROGRESS_THREAD=1 MCOLL_TNBC=0 timeout 300 bin/mcollrun --build /tmp/tnbc-bench-build --mpi $f -np $np $prog $2 $3)"
        echo "round $round tnbc1 $(MCOLL_PROGRESS_THREAD=1 MCOLL_TNBC=1 timeout 300 bin/mcollrun --build /tmp/tnbc-bench-build --mpi $f -np $np $prog $2 $3)"
      done
    done > $out/apps-$f-$np.txt 2>&1
  done
done
