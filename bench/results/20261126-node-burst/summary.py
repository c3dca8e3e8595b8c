#!/usr/bin/env python3
"""Table of mcoll-bench -m burst runs (one JSON per run): per row the host MPI's
time, mcoll one call after the other (window 1) and side by side (window 4), us
per call, and window1/window4 (> 1: side by side faster). Usage: summary.py JSON..."""
import json
import sys

print("| run | coll | bytes | host us | window 1 us | window 4 us | w1/w4 |")
print("|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    d = json.load(open(path))
    run = f"{d['mpi']}-{d['nprocs']}"
    for row in d["rows"]:
        w1, w4 = row["window_1_us"], row["window_4_us"]
        print(f"| {run} | {row['coll']} | {row['bytes']} | {row['host_us']:.2f} | {w1:.2f} | {w4:.2f} | {w1 / w4:.2f} |")
