#!/usr/bin/env python3
"""Table for summary.md: per run and row, host / window 1 / window 4 (us per call) and
window1/window4 (> 1: side by side faster)."""
import glob, json, os

os.chdir(os.path.dirname(os.path.abspath(__file__)))
print("| run | coll | bytes | host us | window 1 us | window 4 us | w1/w4 |")
print("|---|---|---|---|---|---|---|")
for f in sorted(glob.glob("*.json")):
    run = f.split("-burst-")[1][:-5]
    seen = set()
    for r in json.load(open(f))["rows"]:
        key = (r["coll"], r["bytes"])
        if key in seen:  # barrier: one row per size of the sweep, all 0 bytes
            continue
        seen.add(key)
        print(f"| {run} | {r['coll']} | {r['bytes']} | {r['host_us']:.1f} | {r['window_1_us']:.1f} | "
              f"{r['window_4_us']:.1f} | {r['window_1_us'] / r['window_4_us']:.2f} |")
