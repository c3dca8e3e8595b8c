#!/usr/bin/env python3
"""Tables for summary.md from the bench-*.txt and apps-*.txt files of this directory."""
import glob, re, statistics, os

def bench_rows():
    print("| run | load | coll | call host / off / on (ms) | scenario | hidden on / off / host | model ms | measured overlap on ms |")
    print("|---|---|---|---|---|---|---|---|")
    for f in sorted(glob.glob("bench-*.txt")):
        run = f[6:-4]
        load = open(f"uptime-bench-{run}.txt").read().split("load average:")[1].split(",")[0].strip()
        rows = {}
        for line in open(f):
            m = re.match(r"\s+(\w+)\s+(\S+)\s+(host|tnbc_off|tnbc_on)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%\s+(\S+)", line)
            if m:
                coll, scen, side = m.group(1, 2, 3)
                rows[(coll, scen, side)] = [float(x) for x in m.group(4, 5, 6, 7, 8, 9)]
        for coll in ("alltoall", "bcast"):
            call = " / ".join("%.3f" % rows[(coll, "call", s)][0] for s in ("host", "tnbc_off", "tnbc_on"))
            for scen in ("curc", "crc", "curc+crc"):
                h = " / ".join("%.0f%%" % rows[(coll, scen, s)][4] for s in ("tnbc_on", "tnbc_off", "host"))
                on = rows[(coll, scen, "tnbc_on")]
                print(f"| {run} | {load} | {coll} | {call} | {scen} | {h} | {on[5]:.3f} | {on[3]:.3f} |")

def app_rows():
    print("| run | load | app | native total / call ms | TNBC=0 total / call | TNBC=1 total / call | 1 vs 0 | hidden |")
    print("|---|---|---|---|---|---|---|---|")
    for f in sorted(glob.glob("apps-*.txt")):
        run = f[5:-4]
        load = open(f"uptime-apps-{run}.txt").read().split("load average:")[1].split(",")[0].strip()
        data = {}
        for line in open(f):
            m = re.match(r"round \d+ (\w+) (\w+):.*total_s=(\S+) \w+_call_s=(\S+) verified", line)
            if m:
                data.setdefault((m.group(2), m.group(1)), []).append((float(m.group(3)), float(m.group(4))))
        for app in ("ft_like", "is_like"):
            med = {s: (statistics.median(t for t, _ in data[(app, s)]) * 1e3,
                       statistics.median(c for _, c in data[(app, s)]) * 1e3) for s in ("native", "tnbc0", "tnbc1")}
            n = len(data[(app, "tnbc1")])
            hidden = (med["tnbc0"][0] - med["tnbc1"][0]) / med["tnbc0"][1] * 100
            cells = " | ".join("%.1f / %.1f" % med[s] for s in ("native", "tnbc0", "tnbc1"))
            print(f"| {run} | {load} | {app} | {cells} | {med['tnbc1'][0] / med['tnbc0'][0]:.2f} | {hidden:.0f}% ({n} verified runs) |")

os.chdir(os.path.dirname(os.path.abspath(__file__)))
bench_rows()
print()
app_rows()
