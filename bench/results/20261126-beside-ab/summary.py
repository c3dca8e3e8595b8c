#!/usr/bin/env python3
"""The ABAB table: per row, the median over jobs of each build's mcoll/native time
ratio (the job's own native normalises the host's mode), and new/base (> 1: the new
build is slower). Usage: summary.py DIR"""
import glob, json, os, statistics, sys
from collections import defaultdict

d = sys.argv[1]
ratios = defaultdict(list)
for path in glob.glob(os.path.join(d, "*.json")):
    flavour, build, _rep, mode = os.path.basename(path)[:-5].split("-")[-4:]
    for row in json.load(open(path))["results"]:
        if row.get("native_us") and row.get("mcoll_us"):
            ratios[(flavour, mode, row["coll"], row["bytes"], build)].append(row["mcoll_us"] / row["native_us"])
print("| MPI | mode | coll | bytes | base mcoll/native | new mcoll/native | new/base |")
print("|---|---|---|---|---|---|---|")
keys = sorted({k[:4] for k in ratios})
worse = []
for k in keys:
    b, n = ratios.get(k + ("base",)), ratios.get(k + ("new",))
    if not b or not n:
        continue
    mb, mn = statistics.median(b), statistics.median(n)
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {mb:.2f} | {mn:.2f} | {mn / mb:.2f} |")
    worse.append(mn / mb)
print(f"\nnew/base: median {statistics.median(worse):.2f}, min {min(worse):.2f}, max {max(worse):.2f} over {len(worse)} rows")
