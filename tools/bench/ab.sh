#!/usr/bin/env bash
# ab.sh: an A/B comparison, measured so that the host's changing speed cancels out.
#
#   tools/bench/ab.sh algs CASES OUTDIR
#       two node algorithms of one collective forced in turn inside one job (mcoll-bench
#       -A A,B: A in the native columns, B in the mcoll columns). CASES: lines
#       "collective size A B" (e.g. "bcast 4K shm_pipeline cma"; # comments).
#   tools/bench/ab.sh builds A_BUILD B_BUILD OUTDIR [mcoll-bench options...]
#       two builds (build directories, e.g. a copy of build/ made before a change and
#       build/ after it), alternating job by job (A B A B ...); each job alternates the
#       host MPI and mcoll itself. Options default to "-C all -b 8 -e 1M -f 4".
#
# Both run REPS repetitions (default 3) of every flavour in FLAVOURS ("openmpi mpich"),
# rank count in NPS ("2") and mode in MODES ("latency back2back"), ROUNDS (15) rounds per
# job, and write OUTDIR/<flavour>-np<N>-<mode>-<case or a|b>-<rep>.json (.txt: the
# output). tools/bench/ab_summary.py OUTDIR prints the table. OUTDIR belongs under
# bench/raw/ (ignored by git); a record keeps the summary (tools/bench/record.py).
set -euo pipefail
usage() { sed -n '2,18p' "$0" >&2; exit 2; }
all_args="$*"
kind=${1:-}; shift || usage
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
reps=${REPS:-3} flavours=${FLAVOURS:-openmpi mpich} nps=${NPS:-2}
modes=${MODES:-latency back2back} rounds=${ROUNDS:-15}

job() {  # job BUILD FLAVOUR NP OUT mcoll-bench-args...
  local build=$1 flavour=$2 np=$3 out=$4; shift 4
  timeout 600 "$root/bin/mcollrun" --mpi "$flavour" --build "$build" -np "$np" \
    "$build/$flavour/bin/mcoll-bench" -r "$rounds" "$@" -o "$out.json" > "$out.txt" 2>&1 \
    || echo "FAILED $out" >> "$(dirname "$out")/failed.txt"
}

case $kind in
  algs)
    [[ $# -eq 2 ]] || usage
    cases_file=$1 out=$2
    mkdir -p "$out"
    mapfile -t cases < <(grep -v '^\s*\(#\|$\)' "$cases_file")
    for rep in $(seq 1 "$reps"); do
      for f in $flavours; do for np in $nps; do for mode in $modes; do
        for c in "${cases[@]}"; do
          read -r coll size a b <<<"$c"
          job "$root/build" "$f" "$np" "$out/$f-np$np-$mode-$coll-$size-$rep" \
            -C "$coll" -b "$size" -e "$size" -m "$mode" -A "$a,$b"
        done
      done; done; done
    done ;;
  builds)
    [[ $# -ge 3 ]] || usage
    a=$(readlink -f "$1") b=$(readlink -f "$2") out=$3; shift 3
    opts=("$@"); [[ ${#opts[@]} -gt 0 ]] || opts=(-C all -b 8 -e 1M -f 4)
    mkdir -p "$out"
    for rep in $(seq 1 "$reps"); do
      for f in $flavours; do for np in $nps; do for mode in $modes; do
        for side in a b; do
          build=$a; [[ $side == b ]] && build=$b
          job "$build" "$f" "$np" "$out/$f-np$np-$mode-$side-$rep" -m "$mode" "${opts[@]}"
        done
      done; done; done
    done ;;
  *) usage ;;
esac
{ echo "# $0 $all_args ($(git -C "$root" rev-parse --short HEAD), $(date -u +%FT%TZ))"
  echo "# REPS=$reps FLAVOURS=\"$flavours\" NPS=\"$nps\" MODES=\"$modes\" ROUNDS=$rounds"; } >> "$out/command.txt"
