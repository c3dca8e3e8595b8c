#!/usr/bin/env bash
# bench/run.sh: the benchmark of record. Builds mcoll (scripts/setup.sh), then for every
# MPI flavour built runs mcoll-bench under mcollrun -- the host MPI's collectives and
# mcoll's, alternating in one job -- at 2 ranks bound to cores and at 4 and 8 ranks
# (oversubscribed on this machine, unbound), and writes to bench/raw/ (ignored by git;
# tools/bench/record.py turns a run into a record under bench/records/):
#   <stamp>-<flavour>-np<N>.json   results (tools/py/mcoll_report.py reads them)
#   <stamp>-<flavour>-np<N>.txt    the table mcoll-bench printed
#   <stamp>-<flavour>-np<N>-<mode>.json/.txt   the same for the modes cold and latency
#   <stamp>-<flavour>-np<N>-nbc-pt<0|1>.json/.txt   mode nbc, MCOLL_PROGRESS_THREAD=0/1
#   <stamp>-<flavour>-np<N>-idle-<k>-pt<0|1>.json/.txt   mode idle, job pair k
#   <stamp>.md                     all runs in one table
#   <stamp>.png                    heat map of native/mcoll, a panel per series
#   <stamp>-curves.png             the absolute times per collective (nbc runs:
#                                  <stamp>-overlap.png, their overlap as a heat map)
#   <stamp>-command.txt            the exact commands
#
# usage: bench/run.sh [--colls LIST|all] [--np "2 4 8"] [--flavours "openmpi mpich"]
#                     [--modes "back2back latency cold nbc idle"] [--cold-colls LIST]
#                     [--nbc-colls LIST] [--progress-threads "0 1"] [--idle-pairs N]
#                     [--idle-seconds S] [--no-check] [--no-setup] [--no-mcoll] [--build DIR]
#                     [--results DIR] [--no-forced] [--osu]
#   --colls     collectives (default all; env MCOLL_BENCH_COLLS); barrier,bcast
#               takes ~2 minutes on 2 cores, all collectives ~10-15
#   --np        rank counts (env MCOLL_BENCH_NP)
#   --flavours  MPI flavours (default: every build/<flavour> with mcoll-bench)
#   --modes     mcoll-bench modes (env MCOLL_BENCH_MODES; default back2back latency
#               cold; nbc and idle are opt-in, at 2 ranks ~2 + ~1.5 minutes per flavour):
#               back2back: warm calls timed back to back (nccl-tests' way);
#               latency: a barrier after every call (OSU's way), sizes 8..1M by 4;
#               cold: each of the first 100 calls on fresh communicators, 8..1M by 4,
#               only the collectives of --cold-colls;
#               nbc: blocking, I<coll> + wait, persistent start + wait (MPI 4 only)
#               and overlap (OSU's way), 16..4M by 4 (coarser oversubscribed), only
#               the collectives of --nbc-colls, one job per --progress-threads value;
#               idle: process CPU time asleep with nothing pending (--idle-seconds
#               in the first pair of jobs, 1 s in the others) and a compute loop,
#               --idle-pairs pairs of jobs alternating MCOLL_PROGRESS_THREAD=0 and =1
#               (ABBA order); ranks <= cores only
#   --cold-colls  collectives of the cold mode (env MCOLL_BENCH_COLD_COLLS; default
#               bcast,allreduce,reduce,allgather,alltoall; 'same' = --colls)
#   --nbc-colls collectives of the nbc mode (env MCOLL_BENCH_NBC_COLLS; default
#               barrier,bcast,reduce,allreduce,allgather,alltoall,gather,scatter;
#               'same' = --colls)
#   --progress-threads  MCOLL_PROGRESS_THREAD values of the nbc jobs (env
#               MCOLL_BENCH_PROGRESS_THREADS; default "0 1"; with --no-mcoll the first)
#   --idle-pairs  job pairs of the idle mode (env MCOLL_BENCH_IDLE_PAIRS; default 7)
#   --idle-seconds  seconds asleep per idle job (env MCOLL_BENCH_IDLE_SECONDS; default 10)
#   --no-check  do not check results (mcoll-bench -c is on by default)
#   --no-setup  use the existing build instead of running scripts/setup.sh
#   --no-mcoll  plain mpiexec, no preload: the pipeline without the library (ratios ~1)
#   --results   write there instead of bench/raw (env MCOLL_BENCH_RESULTS): trial
#               runs that are not the benchmark of record
#   --no-forced back2back and latency rows without mcoll-bench -F (by default each
#               round also times every mcoll algorithm forced: the row gives the
#               fastest, best_us, beside the default's time, so a wrong choice shows)
#   --osu       also OSU 7's collectives (tools/bench/osu.sh, built from their public
#               source; skipped with the reason when it cannot be had) at 2 ranks
#
# bench/run.sh --hosts [options]: the cluster benchmark instead (test hosts on shaped
# links; needs root): bench/hosts.sh, options in `bench/run.sh --hosts --help`.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
if [[ ${1:-} == --hosts ]]; then
  shift
  exec "$root/bench/hosts.sh" "$@"
fi

colls=${MCOLL_BENCH_COLLS:-all}
nps=${MCOLL_BENCH_NP:-2 4 8}
flavours=${MCOLL_BENCH_FLAVOURS:-}
modes=${MCOLL_BENCH_MODES:-back2back latency cold}
cold_colls=${MCOLL_BENCH_COLD_COLLS:-bcast,allreduce,reduce,allgather,alltoall}
nbc_colls=${MCOLL_BENCH_NBC_COLLS:-barrier,bcast,reduce,allreduce,allgather,alltoall,gather,scatter}
progress_threads=${MCOLL_BENCH_PROGRESS_THREADS:-0 1}
idle_pairs=${MCOLL_BENCH_IDLE_PAIRS:-7}
idle_seconds=${MCOLL_BENCH_IDLE_SECONDS:-10}
build=$root/build
results=${MCOLL_BENCH_RESULTS:-$root/bench/raw}
check=1 setup=1 preload=1 forced=1 osu=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --colls) colls=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --flavours) flavours=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --cold-colls) cold_colls=$2; shift 2 ;;
    --nbc-colls) nbc_colls=$2; shift 2 ;;
    --progress-threads) progress_threads=$2; shift 2 ;;
    --idle-pairs) idle_pairs=$2; shift 2 ;;
    --idle-seconds) idle_seconds=$2; shift 2 ;;
    --build) build=$(readlink -f "$2"); shift 2 ;;
    --results) results=$(realpath -m "$2"); shift 2 ;;
    --no-check) check=0; shift ;;
    --no-setup) setup=0; shift ;;
    --no-mcoll) preload=0; shift ;;
    --no-forced) forced=0; shift ;;
    --osu) osu=1; shift ;;
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
    # nbc: five blocks per side and round, each with a barrier per call; -N: at most
    # 200 calls per block (blocks of tiny calls would run thousands of barriers)
    nbc-mpich-oversubscribed) sweep=(-b 16 -e 64K -f 64 -M 1M -T 1 -r 7 -N 100); margs=(-m nbc) ;;
    nbc-*-oversubscribed) sweep=(-b 16 -e 1M -f 16 -M 4M -r 7 -N 100); margs=(-m nbc) ;;
    nbc-*) sweep=(-b 16 -e 4M -f 4 -r 7 -N 200); margs=(-m nbc) ;;
    # idle: each job's loop -r rounds of 2^24 iterations (~0.1 s); -I per job below
    idle-*) sweep=(-r 5 -W 16777216); margs=(-m idle) ;;
    *) echo "run.sh: unknown mode '$1' (back2back, latency, cold, nbc, idle)" >&2; exit 2 ;;
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

# -F (every algorithm forced beside the default) where a row is one timed block per
# side: back2back and latency, with mcoll loaded.
forced_args() {  # mode -> array fargs
  fargs=()
  [[ $forced -eq 1 && $preload -eq 1 && ( $1 == back2back || $1 == latency ) ]] && fargs=(-F)
  return 0
}

# OSU 7's collectives beside mcoll-bench, at 2 ranks, each flavour (tools/bench/osu.sh).
run_osu() {
  local cmd=("$root/tools/bench/osu.sh" --build "$build" --out "$results" --flavours "$flavours")
  printf '%q ' "${cmd[@]}" | sed 's/ $//' >>"$commands"
  echo >>"$commands"
  echo "== osu: ${cmd[*]}"
  "${cmd[@]}" || failed+=(osu)
}

mkdir -p "$results"
stamp=$(date +%Y%m%d-%H%M)
commands=$results/$stamp-command.txt
{
  echo "# bench/run.sh $stamp on $(hostname), $cores cores; git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none)"
  echo "# colls=$colls np=($nps) flavours=($flavours) modes=($modes) cold_colls=$cold_colls nbc_colls=$nbc_colls progress_threads=($progress_threads) idle_pairs=$idle_pairs idle_seconds=$idle_seconds check=$check mcoll=$preload"
} >"$commands"

jsons=() failed=()
# run_job NAME LABEL [VAR=VALUE ...] -- COMMAND...: runs one job, its table to NAME.txt,
# its JSON to NAME.json (appended to the report's list if written).
run_job() {
  local name=$1 label=$2
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local cmd=()
  [[ ${#envs[@]} -gt 0 ]] && cmd=(env "${envs[@]}")
  cmd+=(timeout "$job_timeout" "$@")
  [[ $check -eq 1 && $label != *idle* ]] && cmd+=(-c)
  cmd+=(-o "$results/$name.json")
  printf '%q ' "${cmd[@]}" | sed 's/ $//' >>"$commands"
  echo >>"$commands"
  echo "== $label: ${cmd[*]}"
  if ! "${cmd[@]}" | tee "$results/$name.txt"; then
    echo "run.sh: $label failed (exit ${PIPESTATUS[0]})" >&2
    failed+=("${label// /-}")
  fi
  # A job cut short leaves the rows it finished, marked "complete": false.
  [[ -s $results/$name.json ]] && jsons+=("$results/$name.json")
  return 0
}

for flavour in $flavours; do
  for np in $nps; do
   for mode in $modes; do
    name=$stamp-$flavour-np$np
    [[ $mode == back2back ]] || name+=-$mode
    launcher "$flavour" "$np"
    sweep_args "$flavour" "$np"
    mode_args "$mode" "$flavour" "$np"
    bench=("${launch[@]}" "$build/$flavour/bin/mcoll-bench")
    case $mode in
      nbc)
        mode_colls=$nbc_colls
        [[ $mode_colls == same ]] && mode_colls=$colls
        pts=$progress_threads
        [[ $preload -eq 1 ]] || pts=${pts%% *}  # without mcoll the setting changes nothing
        for pt in $pts; do
          run_job "$name-pt$pt" "$flavour np$np nbc pt$pt" MCOLL_PROGRESS_THREAD="$pt" -- \
            "${bench[@]}" -C "$mode_colls" "${sweep[@]}" "${margs[@]}"
        done
        continue ;;
      idle)
        if [[ $np -gt $cores ]]; then
          echo "== $flavour np$np idle: skipped (oversubscribed: the loop would share cores)"
          continue
        fi
        # The first pair sleeps --idle-seconds (the idle target); the others 1 s, as
        # they are there for the compute loop, compared pair by pair.
        for ((k = 1; k <= idle_pairs; k++)); do
          order="0 1"
          [[ $((k % 2)) -eq 0 ]] && order="1 0"  # ABBA: drift hits both alike
          seconds=1
          [[ $k -eq 1 ]] && seconds=$idle_seconds
          for pt in $order; do
            run_job "$name-$k-pt$pt" "$flavour np$np idle $k pt$pt" MCOLL_PROGRESS_THREAD="$pt" -- \
              "${bench[@]}" "${sweep[@]}" "${margs[@]}" -I "$seconds"
          done
        done
        continue ;;
    esac
    mode_colls=$colls
    [[ $mode == cold && $cold_colls != same ]] && mode_colls=$cold_colls
    # Cold: a dup would share the warm context of its parent (MCOLL_SHARE_CONTEXT), and
    # a context over the same processes would take the pooled channel (segment) of the
    # last one (MCOLL_CHANNEL_POOL), so each fresh communicator builds its own here, with
    # a new segment -- the cost of a communicator over a new set of processes.
    share=()
    [[ $mode == cold ]] && share=(MCOLL_SHARE_CONTEXT=0 MCOLL_CHANNEL_POOL=0)
    forced_args "$mode"
    run_job "$name" "$flavour np$np $mode" "${share[@]}" -- \
      "${bench[@]}" -C "$mode_colls" "${sweep[@]}" "${margs[@]}" "${fargs[@]}"
   done
  done
done

[[ $osu -eq 1 ]] && run_osu

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
