#!/usr/bin/env bash
# bench_startup.sh: start-up of T thread ranks in one process against T processes of the
# host MPI (no mcoll), jobs alternating for ROUNDS (7) rounds, T in TS ("2 8 15"): the
# median wall time of a whole job running a trivial program (mcoll-pingpong with one
# 8-byte round), and, from MCOLL_THREADS_REPORT, the median time to load the T
# namespaces and the resident memory they add per rank.
#   tools/threads/bench_startup.sh [FLAVOUR]      (FLAVOUR: mpich or openmpi)
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
flavour=${1:-mpich}
rounds=${ROUNDS:-7}
prog=$root/build/$flavour/bin/mcoll-pingpong
native=("mpiexec.$flavour")
if [[ $flavour == openmpi ]]; then  # (15 processes on fewer cores; root in the test VM)
  native+=(--oversubscribe)
  [[ $(id -u) -ne 0 ]] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
now() { date +%s.%N; }
printf "%-4s %14s %16s %14s %18s\n" T "threads job s" "processes job s" "load ms" "KiB per rank"
for t in ${TS:-2 8 15}; do
  tj=() pj=() load=() kib=()
  for ((r = 1; r <= rounds; r++)); do
    start=$(now)
    line=$(MCOLL_THREADS_REPORT=1 timeout 120 "$root/bin/mcollrun" --mpi "$flavour" --threads "$t" \
           -np "$t" "$prog" --max 8 --rounds 1 2>&1 >/dev/null | grep 'ranks loaded')
    tj+=("$(echo "$(now) - $start" | bc)")
    load+=("$(sed -E 's/.* in ([0-9.]+) ms.*/\1/' <<<"$line")")
    kib+=("$(sed -E 's/.*\+([0-9]+) KiB.*/\1/' <<<"$line")")
    start=$(now)
    timeout 120 "${native[@]}" -np "$t" "$prog" --max 8 --rounds 1 >/dev/null
    pj+=("$(echo "$(now) - $start" | bc)")
  done
  printf "%-4s %14.3f %16.3f %14.1f %18.0f\n" "$t" "$(printf '%s\n' "${tj[@]}" | median)" \
    "$(printf '%s\n' "${pj[@]}" | median)" "$(printf '%s\n' "${load[@]}" | median)" \
    "$(echo "$(printf '%s\n' "${kib[@]}" | median) / $t" | bc)"
done
