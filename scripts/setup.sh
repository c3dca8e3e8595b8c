#!/usr/bin/env bash
# setup.sh: install what mcoll needs (Debian packages, Python tools) and build it.
#   scripts/setup.sh            release build in build/
#   scripts/setup.sh --asan     also the ASan+UBSan build in build-asan/
#   scripts/setup.sh --tsan     also the ThreadSanitizer build in build-tsan/ (both may be given)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

debs=(build-essential cmake pkg-config libhwloc-dev hwloc
      libopenmpi-dev openmpi-bin libmpich-dev mpich gfortran python3-pip procps iproute2 util-linux)
missing=()
for p in "${debs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
python3 -m pip install -q -r "$root/tools/py/requirements.txt" 2>&1 | grep -v 'WARNING: Running pip as' || true

build() {  # build DIR TARGET [cmake args] (TARGET all: everything)
  local dir=$1 target=$2; shift 2
  # CI (CI set) compiles with -Werror; the warning check below covers the rest.
  local werror=OFF; [[ -n ${CI:-} ]] && werror=ON
  cmake -S "$root" -B "$root/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCOLL_WERROR=$werror "$@" >/dev/null
  local log
  # A failed build or any compiler diagnostic stops the setup (-Wall -Wextra clean).
  if ! log=$(cmake --build "$root/$dir" -j"$(nproc)" --target "$target" 2>&1) || grep -qE 'warning:|error:' <<<"$log"; then
    grep -E 'warning:|error:|Error [0-9]' -A3 <<<"$log" >&2 || echo "$log" | tail -30 >&2
    echo "setup: the build in $dir failed" >&2
    exit 1
  fi
}
build build all
# The sanitizer builds: only what the tests run from them (mcoll-sanitizer-set); TSan
# for Open MPI only (MPICH 4.0's ch4 crashes under TSan, so no test runs it).
for arg in "$@"; do
  case $arg in
    --asan) build build-asan mcoll-sanitizer-set -DMCOLL_SANITIZE=ON ;;
    --tsan) build build-tsan mcoll-sanitizer-set -DMCOLL_TSAN=ON -DMCOLL_ONLY_FLAVOURS=openmpi ;;
  esac
done
echo "setup: built $(ls -d "$root"/build/*/lib 2>/dev/null | xargs -n1 dirname | xargs -n1 basename | tr '\n' ' ')"
