#!/usr/bin/env python3
"""The ABAB table: per row, the median over the jobs of each build of mcoll's time
(µs) and of mcoll/native (the job's own native normalises the host's mode, except
MPICH at 4 ranks, whose own calls spin for a scheduler slice: ~10 ms), and new/base
of both (> 1: the new build is slower). Usage: summary.py DIR"""
import glob, json, os, statistics, sys
from collections import defaultdict

d = sys.argv[1]
us, ratio = defaultdict(list), defaultdict(list)
for path in glob.glob(os.path.join(d, "*.json")):
    flavour, np, build, _rep, mode = os.path.basename(path)[:-5].split("-")
    for row in json.load(open(path))["results"]:
        if row.get("native_us") and row.get("mcoll_us"):
            key = (flavour, np, mode, row["coll"], row["bytes"])
            us[key + (build,)].append(row["mcoll_us"])
            ratio[key + (build,)].append(row["mcoll_us"] / row["native_us"])
print("| MPI | ranks | mode | coll | bytes | base µs | new µs | new/base µs | new/base of mcoll/native |")
print("|---|---|---|---|---|---|---|---|---|")
by_us, by_ratio = [], []
for k in sorted({k[:5] for k in us}):
    b, n = us.get(k + ("base",)), us.get(k + ("new",))
    if not b or not n:
        continue
    mb, mn = statistics.median(b), statistics.median(n)
    rb, rn = statistics.median(ratio[k + ("base",)]), statistics.median(ratio[k + ("new",)])
    print(f"| {k[0]} | {k[1][2:]} | {k[2]} | {k[3]} | {k[4]} | {mb:.1f} | {mn:.1f} | {mn / mb:.2f} | {rn / rb:.2f} |")
    by_us.append(mn / mb)
    by_ratio.append(rn / rb)
for name, v in (("new/base µs", by_us), ("new/base of mcoll/native", by_ratio)):
    print(f"\n{name}: median {statistics.median(v):.2f}, min {min(v):.2f}, max {max(v):.2f} over {len(v)} rows")
