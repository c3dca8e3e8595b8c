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
tier="not full"
if [[ ${1:-} == --full ]]; then
  shift
  tier=""
  "$root/scripts/setup.sh" --asan --tsan
else
  "$root/scripts/setup.sh"
fi
cd "$root"
# Two phases: the tests run side by side in MCOLL_TEST_WORKERS pytest workers (default 2;
# a file stays on one worker, so its fixtures and build caches are never shared; files
# go out longest first, tests/py/conftest.py's order, not xdist's by count), then
# those marked serial (they assert on timing or CPU use) alone. A -m given here is
# combined with the tier's. Every test's time goes to build/test-times*.xml (--durations:
# the slowest, for keeping the tiers short).
args=() select=""
while [[ $# -gt 0 ]]; do
  case $1 in
    -m) select=$2; shift ;;
    -m*) select=${1#-m} ;;
    *) args+=("$1") ;;
  esac
  shift
done
marks() {  # marks EXTRA: the tier's, the caller's and EXTRA, and-ed
  local expr=$1
  [[ -n $tier ]] && expr="($tier) and $expr"
  [[ -n $select ]] && expr="($select) and $expr"
  echo "$expr"
}
workers=${MCOLL_TEST_WORKERS:-2}
side_by_side=(-p no:xdist)
if [[ $workers -gt 1 ]] && python3 -c 'import xdist' 2>/dev/null; then
  side_by_side=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi
pytest=(python3 -m pytest -q -rs --durations=20)
rc=0
"${pytest[@]}" "${side_by_side[@]}" --junitxml="$root/build/test-times.xml" -m "$(marks "not serial")" \
  tests/py "${args[@]}" || rc=$?
# pytest's 5: no test selected (e.g. -k matching only one phase's tests)
[[ $rc -eq 5 ]] && rc=0
rc2=0
"${pytest[@]}" -p no:xdist --junitxml="$root/build/test-times-serial.xml" -m "$(marks serial)" \
  tests/py "${args[@]}" || rc2=$?
[[ $rc2 -eq 5 ]] && rc2=0
[[ $rc -eq 0 && $rc2 -eq 0 ]]
