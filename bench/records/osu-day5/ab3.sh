#!/usr/bin/env bash
# OSU jobs of three sides in rotating order, R rounds: the host MPI alone (native),
# mcoll from build directory BASE (base) and from NEW (new); rows "coll side bytes us".
# usage: BASE=dir NEW=dir OSU=dir ab3.sh FLAVOUR ROUNDS OUT COLL...
#   OSU: where osu.sh built the programs (BASE/osu by default)
#   ROT: added to the round number in the rotation (a caller running one round at a time)
#   OSU_ARGS: the arguments of each OSU program (default -m 8:1048576 -i 1000 -x 200)
set -u
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
f=$1 R=$2 out=$3; shift 3
base=${BASE:?} new=${NEW:-$root/build} osu=${OSU:-$BASE/osu}
bind=--bind-to; [ "$f" = mpich ] && bind=-bind-to
: >"$out"
job() { # side coll
  local side=$1 coll=$2 launch
  case $side in
    native) if [ "$f" = openmpi ]; then launch="mpiexec.openmpi --allow-run-as-root -np 2 --bind-to core"
            else launch="mpiexec.mpich -np 2 -bind-to core"; fi ;;
    base) launch="$root/bin/mcollrun --mpi $f --build $base -np 2 $bind core" ;;
    new) launch="$root/bin/mcollrun --mpi $f --build $new -np 2 $bind core" ;;
  esac
  timeout 120 $launch "$osu/$f/osu_$coll" ${OSU_ARGS:--m 8:1048576 -i 1000 -x 200} |
    awk -v s="$side" -v c="$coll" '/^[0-9]/ {print c, s, $1, $2}' >>"$out"
}
sides=(native base new)
for ((r = 0; r < R; r++)); do
  for coll in "$@"; do
    for k in 0 1 2; do job "${sides[$(((k + r + ${ROT:-0}) % 3))]}" "$coll"; done
  done
done
