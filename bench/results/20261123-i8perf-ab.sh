#!/usr/bin/env bash
# ab.sh OUT ROUNDS FLAVOUR "bench args" [env...]: alternates build-old / build runs of
# mcoll-bench (each run itself alternates native and mcoll), JSON per run into OUT/
set -u
out=$1 rounds=$2 flavour=$3 args=$4; shift 4
cd /work/i8perf; mkdir -p "$out"
bind=--bind-to; [[ $flavour == mpich ]] && bind=-bind-to
for i in $(seq 1 "$rounds"); do
  for b in build-old build; do
    env "$@" timeout 300 bin/mcollrun --mpi "$flavour" --build $b -np 2 $bind core \
      $b/$flavour/bin/mcoll-bench $args -c -o "$out/$b-$i.json" >/dev/null 2>"$out/$b-$i.err" || echo "fail $b $i"
  done
done
