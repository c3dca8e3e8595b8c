#!/usr/bin/env bash
# bench/run.sh: the benchmark of record. Builds mcoll (scripts/setup.sh), then for every
# MPI flavour built runs mcoll-bench under mcollrun -- the host MPI's collectives and
# mcoll's, alternating in one job -- at 2 ranks bound to cores and at 4 and 8 ranks
# (oversubscribed on this machine, unbound), and writes to bench/results/:
#   <stamp>-<flavour>-np<N>.json   results (tools/py/mcoll_report.py reads them)
#   <stamp>-<flavour>-np<N>.txt    the table mcoll-bench printed
#   <stamp>-<flavour>-np<N>-<mode>.json/.txt   the same for the modes cold and latency
#   <stamp>.md, <stamp>.png        all runs in one table and one plot
#   <stamp>-command.txt            the exact commands
#
# usage: bench/run.sh [--colls LIST|all] [--np "2 4 8"] [--flavours "openmpi mpich"]
#                     [--modes "back2back latency cold"] [--cold-colls LIST]
#                     [--no-check] [--no-setup] [--no-mcoll] [--build DIR]
#   --colls     collectives (default all; env MCOLL_BENCH_COLLS); barrier,bcast
#               takes ~2 minutes on 2 cores, all collectives ~10-15
#   --np        rank counts (env MCOLL_BENCH_NP)
#   --flavours  MPI flavours (default: every build/<flavour> with mcoll-bench)
#   --modes     mcoll-bench modes (env MCOLL_BENCH_MODES; default all three):
#               back2back: warm calls timed back to back (nccl-tests' way);
#               latency: a barrier after every call (OSU's way), sizes 8..1M by 4;
#               cold: each of the first 100 calls on fresh communicators, 8..1M by 4,
#               only the collectives of --cold-colls
#   --cold-colls  collectives of the cold mode (env MCOLL_BENCH_COLD_COLLS; default
#               bcast,allreduce,reduce,allgather,alltoall; 'same' = --colls)
#   --no-check  do not check results (mcoll-bench -c is on by default)
#   --no-setup  use the existing build instead of running scripts/setup.sh
#   --no-mcoll  plain mpiexec, no preload: the pipeline without the library (ratios ~1)
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)

colls=${MCOLL_BENCH_COLLS:-all}
nps=${MCOLL_BENCH_NP:-2 4 8}
flavours=${MCOLL_BENCH_FLAVOURS:-}
modes=${MCOLL_BENCH_MODES:-back2back latency cold}
cold_colls=${MCOLL_BENCH_COLD_COLLS:-bcast,allreduce,reduce,allgather,alltoall}
build=$root/build
check=1 setup=1 preload=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --colls) colls=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --flavours) flavours=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --cold-colls) cold_colls=$2; shift 2 ;;
    --build) build=$(readlink -f "$2"); shift 2 ;;
    --no-check) check=0; shift ;;
    --no-setup) setup=0; shift ;;
    --no-mcoll) preload=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $setup -eq 1 ]]; then
  "$root/scripts/setup.sh"
fi
if [[ -z $flavours ]]; then
  for dir in "$build"/*/; do
    [[ -x $dir/bin/mcoll-bench ]] && flavours+="$(basename "$dir") "
  done
fi
[[ -n $flavours ]] || { echo "run.sh: no mcoll-bench under $build/*/bin" >&2; exit 2; }

cores=$(nproc)
ncolls=16
[[ $colls == all ]] || ncolls=$(tr ',' '\n' <<<"$colls" | grep -c .)
job_timeout=300
[[ $ncolls -gt 4 ]] && job_timeout=600

# Size sweep per job, so that the whole run stays within minutes. Oversubscribed
# ranks are slow: Open MPI yields, MPICH spins without yielding and a collective
# then costs scheduler time slices (ms), so MPICH gets a short, coarse sweep. With
# many collectives (--colls all) sweeps are coarser, and oversubscribed jobs skip
# buffers past -M (n blocks for alltoall, allgather, ...), whose calls take seconds.
sweep_args() {  # flavour np -> array sweep
  local load=bound count=few
  [[ $2 -gt $cores ]] && load=oversubscribed
  [[ $ncolls -gt 4 ]] && count=many
  case $1-$load-$count in
    *-bound-few) sweep=(-b 8 -e 16M -f 2) ;;
    *-bound-many) sweep=(-b 8 -e 16M -f 2) ;;
    mpich-oversubscribed-few) sweep=(-b 8 -e 1M -f 4 -T 1) ;;
    mpich-oversubscribed-many) sweep=(-b 8 -e 256K -f 8 -M 2M -T 1 -r 7) ;;
    *-oversubscribed-few) sweep=(-b 8 -e 16M -f 2) ;;
    *-oversubscribed-many) sweep=(-b 8 -e 16M -f 4 -M 16M) ;;
  esac
}

# The other modes: a barrier per call (latency) or 2 x (N + 256) calls per fresh
# communicator and round (cold) cost more per call, so coarser, shorter sweeps.
mode_args() {  # mode flavour np -> array margs (after sweep_args)
  local load=bound
  [[ $3 -gt $cores ]] && load=oversubscribed
  case $1-$2-$load in
    back2back-*) margs=() ;;
    latency-mpich-oversubscribed) sweep=(-b 8 -e 256K -f 8 -M 2M -T 1 -r 7); margs=(-m latency) ;;
    latency-*-oversubscribed) sweep=(-b 8 -e 1M -f 8 -M 4M); margs=(-m latency) ;;
    latency-*) sweep=(-b 8 -e 1M -f 4); margs=(-m latency) ;;
    cold-mpich-oversubscribed) sweep=(-b 8 -e 64K -f 8 -M 1M -r 7); margs=(-m cold -K 100) ;;
    cold-*-oversubscribed) sweep=(-b 8 -e 256K -f 8 -M 2M -r 7); margs=(-m cold -K 100) ;;
    cold-*) sweep=(-b 8 -e 1M -f 4 -r 7); margs=(-m cold -K 100) ;;
    *) echo "run.sh: unknown mode '$1' (back2back, latency, cold)" >&2; exit 2 ;;
  esac
}

launcher() {  # flavour np -> array launch: the command up to the program
  local flavour=$1 np=$2 bind=()
  if [[ $np -le $cores ]]; then
    if [[ $flavour == mpich ]]; then bind=(-bind-to core); else bind=(--bind-to core); fi
  elif [[ $flavour == openmpi ]]; then
    bind=(--bind-to none)  # oversubscribed: unbound (MPICH's hydra binds only if asked)
  fi
  if [[ $preload -eq 1 ]]; then
    launch=("$root/bin/mcollrun" --mpi "$flavour" --build "$build" -np "$np" "${bind[@]}")
  elif [[ $flavour == openmpi ]]; then
    launch=(mpiexec.openmpi --allow-run-as-root --oversubscribe -np "$np" "${bind[@]}")
  else
    launch=(mpiexec.mpich -np "$np" "${bind[@]}")
  fi
}

results=$root/bench/results
mkdir -p "$results"
stamp=$(date +%Y%m%d-%H%M)
commands=$results/$stamp-command.txt
{
  echo "# bench/run.sh $stamp on $(hostname), $cores cores; git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none)"
  echo "# colls=$colls np=($nps) flavours=($flavours) modes=($modes) cold_colls=$cold_colls check=$check mcoll=$preload"
} >"$commands"

jsons=() failed=()
for flavour in $flavours; do
  for np in $nps; do
   for mode in $modes; do
    name=$stamp-$flavour-np$np
    [[ $mode == back2back ]] || name+=-$mode
    launcher "$flavour" "$np"
    sweep_args "$flavour" "$np"
    mode_args "$mode" "$flavour" "$np"
    mode_colls=$colls
    [[ $mode == cold && $cold_colls != same ]] && mode_colls=$cold_colls
    # Cold: a dup would share the warm context of its parent (MCOLL_SHARE_CONTEXT), and
    # a context over the same processes would take the pooled channel (segment) of the
    # last one (MCOLL_CHANNEL_POOL), so each fresh communicator builds its own here, with
    # a new segment -- the cost of a communicator over a new set of processes.
    share=()
    [[ $mode == cold ]] && share=(env MCOLL_SHARE_CONTEXT=0 MCOLL_CHANNEL_POOL=0)
    cmd=("${share[@]}" timeout "$job_timeout" "${launch[@]}" "$build/$flavour/bin/mcoll-bench"
         -C "$mode_colls" "${sweep[@]}" "${margs[@]}")
    [[ $check -eq 1 ]] && cmd+=(-c)
    cmd+=(-o "$results/$name.json")
    printf '%q ' "${cmd[@]}" | sed 's/ $//' >>"$commands"
    echo >>"$commands"
    echo "== $flavour, $np ranks, $mode: ${cmd[*]}"
    if ! "${cmd[@]}" | tee "$results/$name.txt"; then
      echo "run.sh: $flavour np$np $mode failed (exit ${PIPESTATUS[0]})" >&2
      failed+=("$flavour-np$np-$mode")
    fi
    # A job cut short leaves the rows it finished, marked "complete": false.
    [[ -s $results/$name.json ]] && jsons+=("$results/$name.json")
   done
  done
done

if [[ ${#jsons[@]} -gt 0 ]]; then
  report=(python3 "$root/tools/py/mcoll_report.py" "${jsons[@]}"
          --md "$results/$stamp.md" --png "$results/$stamp.png")
  printf '%q ' "${report[@]}" | sed 's/ $//' >>"$commands"
  echo >>"$commands"
  "${report[@]}"
  echo
  cat "$results/$stamp.md"
fi
echo
echo "run.sh: results in $results/$stamp-*  (commands: $commands)"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run.sh: failed: ${failed[*]}" >&2
  exit 1
fi
