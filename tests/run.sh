#!/usr/bin/env bash
# run.sh: build mcoll (release, ASan+UBSan and TSan) and run every test in tests/py.
# Extra arguments go to pytest, e.g. tests/run.sh -k openmpi -x
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --asan --tsan
cd "$root"
# (--durations: the slowest tests, for keeping CI short)
exec python3 -m pytest -q -rs --durations=30 tests/py "$@"
