#!/usr/bin/env bash
# Run as: OUT=/tmp/mm-ab/final-a ROUNDS=7 B=8 E=64K BUILDS="old new" FLAVOURS="openmpi mpich" then BUILDS="new old" (final-b);
# old = build of 56f8071 in /tmp/mm-old, new = build/ at the fix/mismatch commit, var = an experiment (unused here).
set -u
cd /work/mismatch
out=$OUT; mkdir -p $out
for f in ${FLAVOURS:-openmpi}; do
  if [[ $f == mpich ]]; then bind=(-bind-to core); else bind=(--bind-to core); fi
  for i in $(seq 1 $ROUNDS); do
    for b in ${BUILDS:-old new var}; do
      case $b in old) bd=/tmp/mm-old;; new) bd=/work/mismatch/build;; var) bd=/tmp/mm-var/build;; esac
      timeout 300 bin/mcollrun --mpi $f --build $bd -np 2 "${bind[@]}" $bd/$f/bin/mcoll-bench \
        -C ${COLLS:-allreduce,reduce} -b ${B:-8} -e ${E:-64K} -f 2 -r 7 -o $out/$f-$i-$b.json > $out/$f-$i-$b.txt 2>&1
    done
  done
done
