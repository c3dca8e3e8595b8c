#!/bin/sh
# Cannon's multiply (apps/cannon.c), plain MPI shifts against SMPI ownership passing,
# alternating inside each job: as thread ranks of one process (the handoff) and as
# processes under mcoll (SMPI falls back to copies). MPICH (thread ranks need it).
# usage: tools/threads/bench_cannon.sh [repeats (default 7)] [sizes (default "256 512 768 1024")]
set -eu
cd "$(dirname "$0")/../.."
repeats=${1:-7}
sizes=${2:-256 512 768 1024}
app=build/mpich/bin/mcoll-app-cannon
for n in $sizes; do
  echo "== n=$n, 1 process x 4 thread ranks"
  timeout 600 bin/mcollrun --mpi mpich --threads 4 -np 4 $app "$n" both "$repeats"
  echo "== n=$n, 4 processes (mcoll)"
  timeout 600 bin/mcollrun --mpi mpich -np 4 $app "$n" both "$repeats"
done
