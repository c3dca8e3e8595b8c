#!/usr/bin/env bash
# One round of OSU 7 jobs at 2 ranks bound to cores, three sides in rotating order per
# collective: the host MPI alone (native), mcoll with its defaults (mcoll), and mcoll
# with the run-time choice off (adapt0: MCOLL_ADAPT=0, the rules alone); the mcoll side
# with MCOLL_VERBOSE=1 (its report comes after the timed calls), from round 3 on.
# Appends rows "coll side bytes us" to OUT, and "# load ..." (/proc/loadavg) before
# and after the round. Run it inside `flock -x /work/notes/bench.lock`.
# usage: BUILD=dir OSU=dir osu3.sh FLAVOUR ROUND OUT COLL...
#        osu3.sh --table RAW...   medians per row over the rounds (results.txt's rows)
#   BUILD: mcoll's build directory (default build); OSU: the OSU programs (BUILD/osu)
#   SIDES: the sides in rotation (default "native mcoll adapt0"; base: mcoll from BASE)
#   OSU_ARGS: each OSU program's arguments (default -m 8:1048576: OSU's own counts,
#   1000 + 100 calls up to 8 KiB, 100 + 10 above)
set -u
if [ "${1:-}" = --table ]; then
  shift
  exec python3 - "$@" <<'PY'
import statistics, sys
rows, loads = {}, []
for path in sys.argv[1:]:
    flavour = path.rsplit("osu-", 1)[-1].split(".")[0]
    for line in open(path):
        w = line.split()
        if line.startswith("# load"):
            loads.append(float(w[6]))
        if line.startswith("#") or len(w) != 4:
            continue
        rows.setdefault((flavour, w[0], int(w[2])), {}).setdefault(w[1], []).append(float(w[3]))
order = ["native", "base", "mcoll", "adapt0"]
names = [s for s in order if any(s in v for v in rows.values())]
print("# flavour coll bytes " + " ".join(f"{s}_us" for s in names) + " " +
      " ".join(f"native/{s}" for s in names[1:]) + " rounds"
      f"  (medians; 1-min load at the rounds' starts and ends: {min(loads):.2f}-{max(loads):.2f})")
for (f, coll, size), sides in sorted(rows.items()):
    if set(sides) != set(names):
        continue
    m = {s: statistics.median(v) for s, v in sides.items()}
    n = min(len(v) for v in sides.values())
    print(f"{f} {coll} {size} " + " ".join(f"{m[s]:.2f}" for s in names) + " " +
          " ".join(f"{m['native'] / m[s]:.2f}" for s in names[1:]) + f" {n}")
PY
fi
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
f=$1 r=$2 out=$3; shift 3
build=${BUILD:-$root/build} osu=${OSU:-${BUILD:-$root/build}/osu}
bind=--bind-to; [ "$f" = mpich ] && bind=-bind-to
echo "# load $f round $r start $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)" >>"$out"
job() { # side coll
  local side=$1 coll=$2 launch env=() args
  case $side in
    native) if [ "$f" = openmpi ]; then launch="mpiexec.openmpi --allow-run-as-root -np 2 --bind-to core"
            else launch="mpiexec.mpich -np 2 -bind-to core"; fi ;;
    mcoll) launch="$root/bin/mcollrun --mpi $f --build $build -np 2 $bind core"; env=(MCOLL_VERBOSE=1) ;;
    adapt0) launch="$root/bin/mcollrun --mpi $f --build $build -np 2 $bind core"; env=(MCOLL_ADAPT=0) ;;
    base) launch="$root/bin/mcollrun --mpi $f --build ${BASE:?} -np 2 $bind core"; env=(MCOLL_VERBOSE=1) ;;
  esac
  args=${OSU_ARGS:--m 8:1048576}; [ "$coll" = barrier ] && args=
  # (mcoll: MCOLL_VERBOSE=1's decision lines, printed at MPI_Finalize, as "# adapt ...")
  env "${env[@]}" timeout 120 $launch "$osu/$f/osu_$coll" $args 2>&1 |
    awk -v s="$side" -v c="$coll" '/^[0-9]/ {print c, s, $1, $2} /^# Avg Latency/ {getline; if ($1 ~ /^[0-9.]+$/) print c, s, 0, $1}
      /^mcoll: rank 0 adapt / {sub(/^mcoll: rank 0 adapt /, ""); print "# adapt", $0}' >>"$out"
}
read -r -a sides <<<"${SIDES:-native mcoll adapt0}"
n=${#sides[@]}
for coll in "$@"; do
  for ((k = 0; k < n; k++)); do job "${sides[$(((k + r) % n))]}" "$coll"; done
done
echo "# load $f round $r end $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)" >>"$out"
