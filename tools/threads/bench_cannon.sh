#!/bin/sh
# Cannon's multiply (apps/cannon.c), plain MPI shifts against SMPI ownership passing,
# alternating inside each job: as thread ranks of one process (the handoff) and as
# processes under mcoll (SMPI falls back to copies). MPICH (thread ranks need it).
# usage: tools/threads/bench_cannon.sh [repeats (default 7)] [sizes (default "256 512 768 1024")]
#        [ranks (a square up to 15, default 4)]
set -eu
cd "$(dirname "$0")/../.."
repeats=${1:-7}
sizes=${2:-256 512 768 1024}
ranks=${3:-4}
app=build/mpich/bin/mcoll-app-cannon
for n in $sizes; do
  echo "== n=$n, 1 process x $ranks thread ranks"
  timeout 600 bin/mcollrun --mpi mpich --threads "$ranks" -np "$ranks" $app "$n" both "$repeats"
  echo "== n=$n, $ranks processes (mcoll)"
  timeout 600 bin/mcollrun --mpi mpich -np "$ranks" $app "$n" both "$repeats"
done
