"""Summary of the i8perf A/B runs (bench/results/20261123-i8perf-*.json: {run file: mcoll-bench
JSON}), as in 20261123-i8perf.md: per row, over every round sample of every run of a
side, the 10th percentile and the minimum (the host was busy, load 12-19 on 2 cores:
medians there measure the scheduler), and the median over runs of each run's median.
usage: python3 20261123-i8perf-summary.py FILE.json [TAG_A TAG_B]  (default build-old build)"""
import collections, json, statistics as st, sys

runs = json.load(open(sys.argv[1]))
tags = sys.argv[2:] or ["build-old", "build"]
d = collections.defaultdict(lambda: collections.defaultdict(list))
for name, doc in runs.items():
    tag = name.rsplit("-", 1)[0]
    if tag not in tags: continue
    for r in doc["results"]:
        v = d[(r["coll"], r["bytes"])]
        v[tag + ":n"] += r["native_samples_us"]; v[tag + ":m"] += r["mcoll_samples_us"]
        v[tag + ":rm"].append(r["native_us"] / r["mcoll_us"])
def p(v, q): v = sorted(v); return v[int(q * (len(v) - 1))]
print("| row | " + " | ".join(f"{t}: native p10/min µs | mcoll p10/min µs | ratio p10 | run ratios" for t in tags) + " |")
print("|---|" + "---:|---:|---:|---|" * len(tags))
for k, v in d.items():
    cells = []
    for t in tags:
        n, m = v[t + ":n"], v[t + ":m"]
        cells.append(f"{p(n, .1):.3f}/{min(n):.3f} | {p(m, .1):.3f}/{min(m):.3f} | {p(n, .1) / p(m, .1):.2f} | "
                     + " ".join(f"{x:.2f}" for x in v[t + ":rm"]))
    print(f"| {k[0]} {k[1]} B | " + " | ".join(cells) + " |")
