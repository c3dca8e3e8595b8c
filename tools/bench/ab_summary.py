#!/usr/bin/env python3
"""Table of the old thresholds' algorithm against the new rules' choice (rules_ab.sh's
JSON files): per MPI, mode, collective and size, the median over repetitions of each
job's median time, and old/new (> 1: the new choice is faster)."""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

if len(sys.argv) != 2:
    sys.exit("usage: rules_ab_summary.py OUTDIR")
here = Path(sys.argv[1])
rows = defaultdict(list)
for f in sorted(here.glob("*.json")):
    d = json.loads(f.read_text())
    old, new = d["versus"]
    for r in d["results"]:
        rows[(d["flavour"], d["mode"], r["coll"], r["bytes"], old, new)].append((r["native_us"], r["mcoll_us"]))
print("| MPI | mode | coll | bytes | old → new | old µs | new µs | old/new per job | old/new |")
print("|---|---|---|---:|---|---:|---:|---|---:|")
ratios = []
for (mpi, mode, coll, size, old, new), v in sorted(rows.items()):
    o = statistics.median(x for x, _ in v)
    n = statistics.median(y for _, y in v)
    per = ", ".join(f"{x / y:.2f}" for x, y in v)
    ratios.append(o / n)
    print(f"| {mpi} | {mode} | {coll} | {size} | {old} → {new} | {o:.3g} | {n:.3g} | {per} | {o / n:.2f} |")
print(f"\n{len(ratios)} rows; old/new median {statistics.median(ratios):.2f}, lowest {min(ratios):.2f}, "
      f"rows below 0.95: {sum(r < 0.95 for r in ratios)}")
