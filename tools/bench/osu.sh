#!/usr/bin/env bash
# tools/bench/osu.sh: OSU micro-benchmarks 7 (the blocking collectives) built from their
# public source with each MPI flavour's mpicc, then run beside mcoll-bench: per round
# and collective one job of the host MPI alone (plain mpiexec) and one under mcollrun,
# in alternating order, OSU's own convention (a barrier around every timed call);
# medians over the rounds and their ratio native/mcoll (> 1: mcoll faster).
#
# usage: tools/bench/osu.sh [--src DIR|TARBALL] [--flavours "openmpi mpich"] [--np N]
#                           [--colls LIST] [--rounds R] [--sizes MIN:MAX]
#                           [--iters I] [--warmup X] [--out DIR] [--build DIR] [--build-only]
#   --src     OSU source: an unpacked tree (with c/util) or a tarball (env MCOLL_OSU_SRC);
#             default: build/osu/src if an earlier run left it, else the official
#             release tarball (OSU_VERSION, checked against its sha256) with curl
#   --colls   OSU's names without osu_ (default: every blocking collective mcoll takes)
#   --out     where the tables go (default bench/raw)
#   --build   mcoll's build directory (default build; OSU's programs go to its osu/)
# Without a source (no --src and no network) it says why and exits 0 with "osu: skip:".
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)

OSU_VERSION=7.4
OSU_URL=https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-$OSU_VERSION.tar.gz
OSU_SHA256=1edd0c2efa61999409bfb28740a7f39689a5b42b1a1b4c66d1656e5637f7cefc

src=${MCOLL_OSU_SRC:-}
flavours="" np=2 rounds=3 sizes=8:1048576 iters=1000 warmup=200 build_only=0
colls=allgather,allreduce,alltoall,barrier,bcast,gather,reduce,scatter,reduce_scatter
out=$root/bench/raw
build=$root/build
while [[ $# -gt 0 ]]; do
  case $1 in
    --src) src=$2; shift 2 ;;
    --flavours) flavours=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --build) build=$(readlink -f "$2"); shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "osu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

skip() { echo "osu: skip: $*"; exit 0; }

# The source tree under build/osu/src: from --src, or the release tarball.
osu_source() {
  local tree=$build/osu/src
  if [[ -n $src ]]; then
    rm -rf "$tree" && mkdir -p "$tree"
    if [[ -d $src ]]; then
      cp -r "$src"/. "$tree"/
    else
      tar -xf "$src" -C "$tree" --strip-components=1 || skip "cannot unpack $src"
    fi
  elif [[ ! -d $tree/c/util ]]; then
    command -v curl >/dev/null || skip "no --src and no curl to fetch $OSU_URL"
    local tarball=$build/osu/osu-$OSU_VERSION.tar.gz
    mkdir -p "$build/osu"
    curl -fsSL --max-time 60 -o "$tarball" "$OSU_URL" ||
      skip "no --src (MCOLL_OSU_SRC) and $OSU_URL cannot be fetched from here"
    echo "$OSU_SHA256  $tarball" | sha256sum -c --quiet - || skip "$tarball: sha256 mismatch"
    mkdir -p "$tree" && tar -xf "$tarball" -C "$tree" --strip-components=1
  fi
  [[ -d $tree/c/util && -d $tree/c/mpi/collective/blocking ]] || skip "$tree: not an OSU 7 tree (no c/util)"
}

# Each collective's program, compiled straight from its file and OSU's utilities (no
# configure: the CPU-only build needs no generated header).
osu_build() {  # flavour
  local flavour=$1 tree=$build/osu/src dir=$build/osu/$1
  local cc=mpicc.$flavour
  command -v "$cc" >/dev/null || skip "no $cc"
  mkdir -p "$dir"
  local util=()
  for f in osu_util.c osu_util_mpi.c osu_util_graph.c osu_util_papi.c osu_util_validation.c; do
    [[ -f $tree/c/util/$f ]] && util+=("$tree/c/util/$f")
  done
  for coll in ${colls//,/ }; do
    local prog=$dir/osu_$coll file=$tree/c/mpi/collective/blocking/osu_$coll.c
    [[ -f $file ]] || { echo "osu.sh: no $file" >&2; exit 2; }
    [[ $prog -nt $file ]] && continue
    "$cc" -O2 -w -I"$tree/c/util" -o "$prog" "$file" "${util[@]}" -lm
  done
}

# One job's "size latency" rows of OSU's output.
osu_job() {  # flavour mcoll(0/1) coll -> stdout: size avg_us lines
  local flavour=$1 with=$2 coll=$3 launch
  local bind=(--bind-to core)
  [[ $flavour == mpich ]] && bind=(-bind-to core)
  if [[ $with -eq 1 ]]; then
    launch=("$root/bin/mcollrun" --mpi "$flavour" --build "$build" -np "$np" "${bind[@]}")
  elif [[ $flavour == openmpi ]]; then
    launch=(mpiexec.openmpi --allow-run-as-root --oversubscribe -np "$np" "${bind[@]}")
  else
    launch=(mpiexec.mpich -np "$np" "${bind[@]}")
  fi
  local args=(-x "$warmup" -i "$iters")
  [[ $coll == barrier ]] || args+=(-m "$sizes")
  timeout 600 "${launch[@]}" "$build/osu/$flavour/osu_$coll" "${args[@]}" |
    awk '/^[0-9]/ {print $1, $2} /^# Avg Latency/ {getline; if ($1 ~ /^[0-9.]+$/) print 0, $1}'
}

osu_source
[[ -n $flavours ]] || for f in openmpi mpich; do command -v "mpicc.$f" >/dev/null && flavours+="$f "; done
[[ -n $flavours ]] || skip "no mpicc.openmpi or mpicc.mpich"
for flavour in $flavours; do osu_build "$flavour"; done
[[ $build_only -eq 1 ]] && { echo "osu: built in $build/osu"; exit 0; }

mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M)
for flavour in $flavours; do
  raw=$out/$stamp-osu-$flavour-np$np.raw
  : >"$raw"
  for ((r = 1; r <= rounds; r++)); do
    for coll in ${colls//,/ }; do
      order="0 1"
      [[ $((r % 2)) -eq 0 ]] && order="1 0"  # alternate which side goes first
      for with in $order; do
        osu_job "$flavour" "$with" "$coll" | sed "s/^/$coll $with /" >>"$raw"
      done
    done
  done
  table=$out/$stamp-osu-$flavour-np$np.md
  python3 - "$raw" "$flavour" "$np" "$rounds" >"$table" <<'EOF'
import statistics, sys
raw, flavour, np, rounds = sys.argv[1:]
rows = {}
for line in open(raw):
    coll, side, size, us = line.split()
    rows.setdefault((coll, int(size)), ([], []))[int(side)].append(float(us))
print(f"OSU {flavour}, {np} ranks, medians of {rounds} alternating rounds (native: plain mpiexec; mcoll: mcollrun)\n")
print("| collective | bytes | native µs | mcoll µs | native/mcoll |")
print("|---|---:|---:|---:|---:|")
for (coll, size), (native, mcoll) in sorted(rows.items()):
    if not native or not mcoll:
        continue
    n, m = statistics.median(native), statistics.median(mcoll)
    print(f"| {coll} | {size} | {n:.2f} | {m:.2f} | {n / m if m else float('nan'):.2f} |")
EOF
  echo "osu: $flavour np$np: $table"
  cat "$table"
done
