#!/usr/bin/env bash
# bench/hosts.sh (bench/run.sh --hosts): the cluster benchmark of record. Makes test
# hosts (scripts/testhosts.sh: network namespaces, root needed) whose links are shaped
# (tbf, a 50 ms queue), and per link rate, host count, ranks per host and MPI flavour
# runs, each job across the hosts under bin/mcollrun:
#   blocking  mcoll-bench -m latency: the collectives, host MPI against mcoll
#   nbc       mcoll-bench -m nbc, MCOLL_PROGRESS_THREAD=1: MPI_I<coll> + wait, and
#             overlap OSU's way (call, a loop as long as the call, wait)
#   tnbc      mcoll-bench -m tnbc, MCOLL_TNBC=1: blocking alltoall of --tnbc-block,
#             then unrelated work; host, T-NBC off and on
#   apps      the FT-like and IS-like miniapps, MCOLL_TNBC=0 and =1 alternating
#             (--app-rounds jobs each); total and alltoall(v) time
#   arrival   mcoll-bench -m arrival: bcast under random arrival skew (CP bcast:
#             host, fixed leader, first arrival)
#   grid      alltoall between nodes, inter.direct against inter.grid_rsend (2√N)
#             (only with more than one rank per host)
#   link      mcoll-bench --calibrate natively, 2 ranks on the first host and 1 on the
#             second (at the first host count, per rate): the link's ping-pong curve,
#             rate and exchange latency, the machine file of `mcoll model`; the
#             summary then gives the model's prediction of every blocking row
#   extra     every mode of $MCOLL_HOSTS_EXTRA_MODES (space-separated) that
#             `mcoll-bench -h` lists, run as `-m MODE` (hooks for more rows)
# and writes to --results (default bench/raw/, ignored by git):
#   <stamp>-hosts-<rate>-<H>x<R>-<flavour>-<job>.txt/.json   each job
#   <stamp>-hosts.md      the table of record first: every blocking job, the layouts as
#                         rows, flavour and rate as columns (tools/bench/hosts_matrix.py),
#                         then the other jobs' rows and mcoll_report.py's tables
#   <stamp>-hosts.png     that table's plot (host/mcoll per layout, the rates side by side);
#                         <stamp>-hosts-report.png: mcoll_report.py's curves
#   <stamp>-hosts-command.txt             the exact commands
#
# usage: bench/run.sh --hosts [--rates "1gbit 10gbit"] [--hosts-n "2 4"] [--per-host "1 2"]
#                             [--flavours "openmpi mpich"] [--jobs "link blocking nbc tnbc
#                             apps arrival grid extra"] [--rounds N] [--app-rounds N]
#                             [--colls LIST] [--tnbc-block BYTES] [--no-setup]
#                             [--job-timeout S] [--build DIR] [--results DIR] [--mtu BYTES]
#                             [--blocking-sizes "MIN MAX FACTOR"] [--lock FILE]
#                             [--report-only STAMP]
#   defaults: every rate, host count, ranks per host and job above; the whole matrix takes
#   about an hour on 2 cores, so a benchmark of record is usually --jobs blocking (about
#   20 min) and the other jobs per setting
#   --lock         run each job under `flock FILE` (env MCOLL_BENCH_LOCK): the lock is held
#                  one job at a time (set-up, test hosts and reports outside it); with a
#                  lock the job timeout defaults to 280 s, so no job holds it > 5 min
#   --blocking-sizes  the blocking jobs' sweep (default "4K 1M 4": 4, 16, 64, 256 KiB, 1 MiB)
#   --report-only  no jobs: the summary and report of run STAMP's files (a run cut short)
#   --mtu          the links' MTU (default 9000, jumbo frames: at 1500 the CPU carries six
#                  times as many packets through the bridge and the peers' stacks, and
#                  the two cores' compute loops pay for it)
# Exit 77 (skipped, with the reason) where test hosts cannot be made (not root, no
# network namespaces). Uses the test-host set MCOLL_TESTHOSTS_PREFIX/SUBNET (default
# mcb / 10.78.0) and removes it at the end.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)

rates="1gbit 10gbit"
hosts_n="2 4"
per_host="1 2"
flavours=""
jobs="link blocking nbc tnbc apps arrival grid extra"
rounds=7
app_rounds=7
colls=bcast,allreduce,allgather,alltoall
tnbc_block=1M
build=$root/build
results=${MCOLL_BENCH_RESULTS:-$root/bench/raw}
setup=1
job_timeout=900
report_only=""
mtu=9000
lock=${MCOLL_BENCH_LOCK:-}
blocking_sizes="4K 1M 4"
timeout_set=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --rates) rates=$2; shift 2 ;;
    --hosts-n) hosts_n=$2; shift 2 ;;
    --per-host) per_host=$2; shift 2 ;;
    --flavours) flavours=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --app-rounds) app_rounds=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --tnbc-block) tnbc_block=$2; shift 2 ;;
    --build) build=$(readlink -f "$2"); shift 2 ;;
    --results) results=$(realpath -m "$2"); shift 2 ;;
    --no-setup) setup=0; shift ;;
    --job-timeout) job_timeout=$2; timeout_set=1; shift 2 ;;
    --lock) lock=$2; shift 2 ;;
    --blocking-sizes) blocking_sizes=$2; shift 2 ;;
    --report-only) report_only=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "hosts.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -n $report_only ]]; then
  setup=0
  jobs=""
fi
[[ -n $lock && $timeout_set -eq 0 ]] && job_timeout=280
read -r bmin bmax bfactor <<<"$blocking_sizes"
export MCOLL_TESTHOSTS_PREFIX=${MCOLL_TESTHOSTS_PREFIX:-mcb}
export MCOLL_TESTHOSTS_SUBNET=${MCOLL_TESTHOSTS_SUBNET:-10.78.0}
testhosts=$root/scripts/testhosts.sh
if [[ -z $report_only ]] && ! why=$("$testhosts" check 2>&1); then
  echo "bench/run.sh --hosts: skipped: cannot make test hosts: $why"
  exit 77
fi
[[ $setup -eq 1 ]] && "$root/scripts/setup.sh"
if [[ -z $flavours ]]; then
  for dir in "$build"/*/; do
    [[ -x $dir/bin/mcoll-bench ]] && flavours+="$(basename "$dir") "
  done
fi
[[ -n $flavours ]] || { echo "hosts.sh: no mcoll-bench under $build/*/bin" >&2; exit 2; }

mkdir -p "$results"
stamp=${report_only:-$(date +%Y%m%d-%H%M)}
commands=$results/$stamp-hosts-command.txt
summary=$results/$stamp-hosts-rows.tsv
[[ -n $report_only ]] || {
echo "# bench/run.sh --hosts $stamp on $(hostname), $(nproc) cores; git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none); load $(cut -d' ' -f1-3 /proc/loadavg)" >"$commands"
echo "# rates=($rates) hosts=($hosts_n) per_host=($per_host) flavours=($flavours) jobs=($jobs) rounds=$rounds app_rounds=$app_rounds colls=$colls tnbc_block=$tnbc_block mtu=$mtu blocking_sizes=($blocking_sizes) lock=${lock:-none}" >>"$commands"
printf 'setting\tflavour\twhat\tsize\thost\tmcoll\tvalue\n' >"$summary"
}
[[ -n $report_only ]] || trap '"$testhosts" down >/dev/null 2>&1 || true' EXIT

# The tbf bucket must hold a timer tick's worth of bytes at the rate.
burst_for() { case $1 in 10gbit) echo 320kb ;; *) echo 32kb ;; esac; }
wants() { [[ " $jobs " == *" $1 "* ]]; }

# job NAME [VAR=VALUE ...] -- PROGRAM ARGS...: one job across the hosts; its output
# to NAME.txt. Returns the job's status (a failed job is named, the run goes on).
failed=()
finalize_hangs=()
finalize_grace=30
done_marker='^# mcoll-bench: done|^(ft|is)_like: .* verified$'
job() {
  local name=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  # -o: the lock is flock's alone (not inherited), so it ends with the watched job
  local locked=()
  [[ -n $lock ]] && locked=(flock -o "$lock")
  local cmd=(env "${envs[@]}" timeout "$job_timeout" "$testhosts" run --mpi "$flavour" --build "$build"
             --ranks "$ranks" "$@")
  printf '%q ' "${cmd[@]}" | sed 's/ $//' >>"$commands"; echo >>"$commands"
  echo "== $name"
  local out=$results/$name.txt status=0
  # the machine's load when the job starts (under the lock: the others' suites, not our jobs)
  [[ -n $lock ]] && locked+=(sh -c 'echo "# $(date -u +%T) load $(cut -d" " -f1-3 /proc/loadavg): $0" >>"$1"; shift; exec "$@"' "$name" "$commands")
  "${locked[@]}" "$root/bench/watch_job.sh" "$finalize_grace" "$done_marker" "$out" -- "${cmd[@]}" || status=$?
  if ((status == 75)); then
    echo "hosts.sh: $name: the host MPI hung in MPI_Finalize after the results; ended" | tee -a "$out" >&2
    finalize_hangs+=("$name")
    return 0
  fi
  if ((status != 0)); then
    echo "hosts.sh: $name failed (see $out)" >&2
    failed+=("$name")
    return 1
  fi
}

# Adds the setting to a job's JSON, so that the report tells settings apart.
tag_json() {  # file series
  [[ -s $1 ]] || return 0
  python3 - "$1" "$2" <<'EOF'
import json, sys
path, series = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
doc["series"] = series
json.dump(doc, open(path, "w"), indent=1)
EOF
}

row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$setting" "$flavour" "$@" >>"$summary"; }

jsons=()
if [[ -n $report_only ]]; then
  for j in "$results/$stamp"-hosts-*-blocking.json "$results/$stamp"-hosts-*-nbc.json; do
    [[ -s $j ]] || continue
    IFS=- read -r rate setting flavour _ <<<"${j#"$results/$stamp"-hosts-}"
    tag_json "$j" "$flavour $rate $setting"
    jsons+=("$j")
  done
  rates=""
fi
for rate in $rates; do
  for n in $hosts_n; do
    "$testhosts" up --qdisc "tbf rate $rate burst $(burst_for "$rate") latency 50ms" --mtu "$mtu" "$n" >/dev/null
    if wants link && [[ $n == "${hosts_n%% *}" ]]; then
      for flavour in $flavours; do
        setting="$rate link" ranks=2,1
        job "$stamp-hosts-$rate-link-$flavour" -- --native "$build/$flavour/bin/mcoll-bench" --calibrate \
          -r "$rounds" -T 20 -o "$results/$stamp-hosts-$rate-link-$flavour.json" || true
      done
    fi
    for r in $per_host; do
      ranks=$(printf "$r,%.0s" $(seq "$n")); ranks=${ranks%,}
      for flavour in $flavours; do
        setting="$rate ${n}x$r"
        base=$results/$stamp-hosts-$rate-${n}x$r-$flavour
        bench=$build/$flavour/bin/mcoll-bench
        sweep=(-b 64K -e 1M -f 16 -r "$rounds")
        if wants blocking && job "$(basename "$base")-blocking" MCOLL_PROGRESS_THREAD=0 -- \
             "$bench" -m latency -C "$colls" -b "$bmin" -e "$bmax" -f "$bfactor" -r "$rounds" \
             -o "$base-blocking.json"; then
          tag_json "$base-blocking.json" "$flavour $setting"; jsons+=("$base-blocking.json")
        fi
        if wants nbc && job "$(basename "$base")-nbc" MCOLL_PROGRESS_THREAD=1 MCOLL_VERBOSE=1 -- \
             "$bench" -m nbc -P -C "$colls" "${sweep[@]}" -o "$base-nbc.json"; then
          tag_json "$base-nbc.json" "$flavour $setting"; jsons+=("$base-nbc.json")
          cpu=$(grep -o 'progress thread cpu=.*' "$base-nbc.txt" | grep -o '[0-9.]*% of a core' || true)
          [[ -n $cpu ]] && row "progress thread CPU (rank 0, nbc job)" - - - "${cpu%% *}"
        fi
        if wants tnbc && job "$(basename "$base")-tnbc" MCOLL_TNBC=1 MCOLL_PROGRESS_THREAD=1 -- \
             "$bench" -m tnbc -C alltoall -b "$tnbc_block" -e "$tnbc_block" -r "$rounds" -o "$base-tnbc.json"; then
          # rows: coll scenario side total tcomm work overlap hidden% model
          awk '$1 == "alltoall" && $2 == "curc" {printf "%s\n", $0}' "$base-tnbc.txt" |
            while read -r coll scen side total tcomm work overlap hidden model; do
              row "tnbc $coll $scen hidden" "$tnbc_block" - "$side" "$hidden"
            done
          awk '$1 == "alltoall" && $2 == "call" && $3 == "tnbc_on" {print $4, $5}' "$base-tnbc.txt" |
            while read -r tinit tcomm; do
              row "tnbc Tinit / Tcomm" "$tnbc_block" - - "$(awk -v a="$tinit" -v b="$tcomm" 'BEGIN{printf "%.0f%%", 100*a/b}')"
            done
        fi
        if wants apps; then
          for app in ft-like:64 is-like:20; do
            prog=$build/$flavour/bin/mcoll-app-${app%%:*}
            [[ -x $prog ]] || continue
            : >"$base-${app%%:*}.times"
            for ((k = 1; k <= app_rounds; k++)); do
              order="0 1"; [[ $((k % 2)) -eq 0 ]] && order="1 0"
              for t in $order; do
                if job "$(basename "$base")-${app%%:*}-$k-tnbc$t" MCOLL_TNBC="$t" MCOLL_PROGRESS_THREAD=1 -- \
                     "$prog" "${app##*:}" 5; then
                  total=$(grep -o 'total_s=[0-9.]*' "$base-${app%%:*}-$k-tnbc$t.txt" | cut -d= -f2)
                  echo "$t $total" >>"$base-${app%%:*}.times"
                fi
              done
            done
            read -r off on < <(awk '{v[$1] = v[$1] " " $2} END {print v[0] "|" v[1]}' "$base-${app%%:*}.times" |
              python3 -c 'import sys, statistics as s
a, b = sys.stdin.read().strip().split("|")
med = lambda x: s.median(map(float, x.split())) if x.split() else float("nan")
print(med(a), med(b))')
            row "${app%%:*} total s, TNBC=0 / =1" - - "$off" "$on"
            row "${app%%:*} TNBC=1 / TNBC=0" - - - "$(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.2f", a/b}')"
          done
        fi
        if wants arrival && job "$(basename "$base")-arrival" -- \
             "$bench" -m arrival -C bcast -b 64K -e 1M -f 16 -D random:1000 -r "$rounds" -o "$base-arrival.json"; then
          # rows: bytes host_us fixed_us first_us fixed/first push_us fixed/push (then the
          # no-nap side)
          { grep -E '^ +[0-9]+ +[0-9.]+ ' "$base-arrival.txt" || true; } |
            while read -r bytes host fixed first fixed_first push fixed_push _; do
              row "bcast under random arrival: first_arrival (CP); value fixed/first" "$bytes" "$host" "$first" "$fixed_first"
              row "bcast under random arrival: push; value fixed/push" "$bytes" "$host" "$push" "$fixed_push"
            done
        fi
        if wants grid && [[ $r -gt 1 ]] && job "$(basename "$base")-grid" -- \
             "$bench" -C alltoall -A inter.direct,inter.grid_rsend -b 16K -e 256K -f 2 -r "$rounds" \
             -o "$base-grid.json"; then
          { grep -E '^ +alltoall' "$base-grid.txt" || true; } |
            while read -r _ bytes _ _ direct grid ratio _; do
              row "alltoall between nodes: direct (host column) vs grid_rsend (mcoll); value direct/grid" "$bytes" "$direct" "$grid" "$ratio"
            done
        fi
        if wants extra; then
          for mode in ${MCOLL_HOSTS_EXTRA_MODES:-}; do
            if "$bench" -h 2>&1 | grep -q "[|[ ]$mode[]|]"; then
              job "$(basename "$base")-$mode" -- "$bench" -m "$mode" -r "$rounds" -o "$base-$mode.json" || true
            else
              echo "== $mode: skipped (mcoll-bench has no mode $mode)"
            fi
          done
        fi
      done
    done
    "$testhosts" down >/dev/null
  done
done

md=$results/$stamp-hosts.md
{
  echo "# Cluster benchmark $stamp"
  echo
  echo "Test hosts on links shaped by tbf (a 50 ms queue); $(head -1 "$commands" | sed 's/^# //')."
  echo
  blocking_jsons=("$results/$stamp"-hosts-*-blocking.json)
  if [[ -s ${blocking_jsons[0]} ]]; then
    echo "## Blocking collectives, host MPI against mcoll (latency mode)"
    echo
    echo "Median time per call of the slowest rank over $rounds alternating rounds, host / mcoll;" \
         "ratio host/mcoll (> 1: mcoll faster). Plot: $stamp-hosts.png."
    echo
    python3 "$root/tools/bench/hosts_matrix.py" "${blocking_jsons[@]}" --png "$results/$stamp-hosts.png" ||
      echo "(hosts_matrix.py failed)"
    echo
    if compgen -G "$results/$stamp-hosts-*-link-*.json" >/dev/null; then
      echo "## The model against mcoll's rows (mcoll model, the link this run calibrated)"
      echo
      python3 "$root/tools/bench/hosts_matrix.py" --model "${blocking_jsons[@]}" ||
        echo "(hosts_matrix.py --model failed)"
      echo
    fi
  fi
  echo "## Other jobs"
  echo
  python3 - "$summary" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1]), delimiter="\t"))
print("| " + " | ".join(rows[0]) + " |")
print("|" + "---|" * len(rows[0]))
for r in rows[1:]:
    print("| " + " | ".join(r) + " |")
EOF
  if [[ ${#finalize_hangs[@]} -gt 0 ]]; then
    echo
    echo "Jobs whose host MPI hung in MPI_Finalize after their results (ended after" \
         "${finalize_grace} s; MPICH over UCX's TCP transport, natively too: openucx/ucx#8738):" \
         "${finalize_hangs[*]}"
  fi
} >"$md"
if [[ ${#jsons[@]} -gt 0 ]]; then
  python3 "$root/tools/py/mcoll_report.py" "${jsons[@]}" --md "$results/$stamp-hosts-report.md" \
    --png "$results/$stamp-hosts-report.png" && { echo; cat "$results/$stamp-hosts-report.md"; } >>"$md"
fi
cat "$md"
echo
echo "hosts.sh: results in $results/$stamp-hosts*  (commands: $commands)"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "hosts.sh: failed: ${failed[*]}" >&2
  exit 1
fi
