#!/usr/bin/env bash
# testhosts-bench.sh: mcoll vs the host MPI across test hosts (scripts/testhosts.sh):
# mcoll-bench alternates the host MPI's collective (PMPI_*) and mcoll's (MPI_*) in one
# job, round by round, so both see the same load. Makes the hosts, removes them at the
# end (also on error or Ctrl-C), writes to bench/raw/ (ignored by git):
#   <stamp>-<tag>-command.txt               this command, the machine's load, the layouts
#   <stamp>-hosts-<flavour>-<layout>.json   mcoll-bench -o
#   <stamp>-hosts-<flavour>-<layout>.txt    the table it printed
#
# usage: scripts/testhosts-bench.sh [--flavours "openmpi mpich"] [--layouts "2,2 1,1,1"]
#                                   [--colls LIST] [--results DIR] [--qdisc SPEC] [--tag NAME]
#                                   [--env VAR=VALUE]... [-- mcoll-bench options]
#   --qdisc "tbf rate 1gbit burst 32kb latency 1ms": shape every host's link
#     (testhosts.sh up --qdisc; netem where the kernel has sch_netem);
#   --tag NAME: results named <stamp>-NAME-... instead of <stamp>-hosts-...;
#   --env: exported to the jobs (e.g. MCOLL_ALG_ALLTOALL_INTER=grid_rsend).
#   layout 2,2: 2 ranks on each of 2 hosts. Default mcoll-bench options:
#   -b 8 -e 256K -f 8 -r 7 -c (sizes 8 B .. 256 KiB, 7 rounds, results checked).
set -euo pipefail

here=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
flavours="openmpi mpich"
layouts="2,2"
colls=barrier,bcast,allreduce,allgather,alltoall
results=$here/bench/raw
qdisc=
tag=hosts
envs=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --flavours) flavours=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --qdisc) qdisc=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --env) export "${2?}"; envs+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "testhosts-bench: unknown option $1" >&2; exit 2 ;;
  esac
done
bench_opts=("$@")
[[ ${#bench_opts[@]} -gt 0 ]] || bench_opts=(-b 8 -e 256K -f 8 -r 7 -c)

hosts=0
for layout in $layouts; do
  n=$(tr ',' '\n' <<<"$layout" | wc -l)
  (( n > hosts )) && hosts=$n
done
testhosts=$here/scripts/testhosts.sh
trap '"$testhosts" down' EXIT
trap 'exit 130' INT TERM
if [[ -n $qdisc ]]; then "$testhosts" up --qdisc "$qdisc" "$hosts"; else "$testhosts" up "$hosts"; fi

mkdir -p "$results"
stamp=$(date -u +%Y%m%d-%H%M)
{
  echo "command: scripts/testhosts-bench.sh --flavours \"$flavours\" --layouts \"$layouts\" --colls $colls${qdisc:+ --qdisc \"$qdisc\"} --tag $tag${envs[*]:+ --env ${envs[*]}} -- ${bench_opts[*]}"
  echo "links: ${qdisc:-unshaped veth}"
  echo "git: $(git -C "$here" rev-parse --short HEAD)"
  echo "date: $(date -u +%FT%TZ)"
  echo "load before: $(uptime)"
  echo "cores: $(nproc)"
} >"$results/$stamp-$tag-command.txt"
for flavour in $flavours; do
  for layout in $layouts; do
    out=$results/$stamp-$tag-$flavour-${layout//,/+}
    echo "== $flavour, ranks per host $layout" >&2
    # MPICH over UCX's TCP may hang in MPI_Finalize (see tests/py/test_multihost.py),
    # after the JSON is written: a time limit, and the exit status recorded.
    rc=0
    timeout "${MCOLL_BENCH_TIMEOUT:-1200}" "$testhosts" run --mpi "$flavour" --ranks "$layout" \
      "$here/build/$flavour/bin/mcoll-bench" -C "$colls" "${bench_opts[@]}" -o "$out.json" \
      | tee "$out.txt" || rc=$?
    echo "$flavour $layout: exit $rc, load after: $(uptime)" >>"$results/$stamp-$tag-command.txt"
  done
done
