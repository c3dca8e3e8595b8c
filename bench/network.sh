#!/usr/bin/env bash
# bench/network.sh: the network-side measurements of one test-host layout, for the
# cluster benchmark (bench/run.sh --hosts calls it) or by hand. The test hosts must
# exist (scripts/testhosts.sh up [--qdisc ...] N; MCOLL_TESTHOSTS_PREFIX/SUBNET as
# there); every part is one job in which its sides alternate, -r rounds, medians.
#
#   grid     alltoall between hosts: direct against grid_rsend (-A), the host MPI
#            against grid_rsend (forced), and grid_rsend's arrival phase time per
#            call (control_wait_us= of the MCOLL_VERBOSE report) at 8 B blocks (an
#            idle link) and at --load-block (the link loaded by the call's data)
#   arrival  bcast under random arrival (-D random:US): host, fixed leader,
#            first_arrival (the CP bcast), push
#   pushab   blocking bcast without skew: fixed leader (binomial) against push
#   link     mcoll-bench --calibrate natively with the link to another host
#            (needs 2 ranks on the first host), the machine file for mcoll model
#   cluster  blocking collectives across the hosts in latency mode (mcoll model
#            compare -m <link machine file> --nodes N -r cluster-*.json)
#
# usage: bench/network.sh --mpi openmpi|mpich --ranks 2,2,2,2 --out DIR
#                         [--parts "grid arrival pushab link cluster"] [--rounds 7]
#                         [--delay-us 2000] [--load-block 64K]
# Writes DIR/<part>-<mpi>-<layout>[-<what>].{txt,json}; exits 77 with the reason when
# the test hosts are not there.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
mpi=openmpi ranks=2,2,2,2 out= parts="grid arrival pushab link cluster" rounds=7
delay=2000 load=64K
while [[ $# -gt 0 ]]; do
  case $1 in
    --mpi) mpi=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --delay-us) delay=$2; shift 2 ;;
    --load-block) load=$2; shift 2 ;;
    *) echo "bench/network.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || { echo "bench/network.sh: --out DIR is required" >&2; exit 2; }
hosts=$(awk -F, '{print NF}' <<<"$ranks")
if ! "$here/scripts/testhosts.sh" status 2>/dev/null | grep -q "^hosts: .*[0-9]"; then
  echo "bench/network.sh: no test hosts (scripts/testhosts.sh up N first; needs root)" >&2
  exit 77
fi
mkdir -p "$out"
bench=$here/build/$mpi/bin/mcoll-bench
tag=$mpi-${ranks//,/_}
run() { timeout 900 "$here/scripts/testhosts.sh" run --mpi "$mpi" "$@"; }

for part in $parts; do
  echo "bench/network.sh: $part $tag ($(date -u +%T))" >&2
  case $part in
    grid)
      run --ranks "$ranks" "$bench" -C alltoall -b 16K -e 256K -r "$rounds" -T 30 \
        -A inter.direct,inter.grid_rsend -o "$out/grid-$tag-ab.json" > "$out/grid-$tag-ab.txt" 2>&1
      MCOLL_ALG_ALLTOALL_INTER=grid_rsend run --ranks "$ranks" "$bench" -C alltoall -b 16K -e 256K \
        -r "$rounds" -T 30 -o "$out/grid-$tag-host.json" > "$out/grid-$tag-host.txt" 2>&1
      for block in 8 "$load"; do
        MCOLL_VERBOSE=1 MCOLL_ALG_ALLTOALL_INTER=grid_rsend run --ranks "$ranks" "$bench" -C alltoall \
          -b "$block" -e "$block" -r "$rounds" -T 30 > "$out/grid-$tag-control-$block.txt" 2>&1
      done ;;
    arrival)
      run --ranks "$ranks" "$bench" -m arrival -D "random:$delay" -C bcast -b 8 -e 32K -f 64 \
        -r "$rounds" -n 20 -o "$out/arrival-$tag.json" > "$out/arrival-$tag.txt" 2>&1 ;;
    pushab)
      run --ranks "$ranks" "$bench" -C bcast -b 8 -e 256K -f 8 -r "$rounds" -T 20 \
        -A inter.binomial,inter.push -o "$out/pushab-$tag.json" > "$out/pushab-$tag.txt" 2>&1 ;;
    link)
      run --native --ranks "2,1" "$bench" --calibrate -r "$rounds" -T 20 \
        -o "$out/link-$mpi.json" > "$out/link-$mpi.txt" 2>&1 ;;
    cluster)
      run --ranks "$ranks" "$bench" -m latency -C bcast,allreduce,reduce,allgather,alltoall -b 8 -e 1M \
        -f 8 -r "$rounds" -T 20 -o "$out/cluster-$tag.json" > "$out/cluster-$tag.txt" 2>&1
      echo "bench/network.sh: compare with: bin/mcoll model compare -m $out/link-$mpi.json --nodes $hosts -r $out/cluster-$tag.json" >&2 ;;
    *) echo "bench/network.sh: unknown part $part" >&2; exit 2 ;;
  esac
done
