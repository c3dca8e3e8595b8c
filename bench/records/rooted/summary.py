"""The record's tables from its JSON files: python3 bench/records/rooted/summary.py"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = {65536: "64K", 262144: "256K", 1048576: "1M", 4194304: "4M"}


def forced_table(tag):
    print(f"\n### {tag}\n")
    print("| coll | bytes | Open MPI native us | default | best forced | native/default | default/best "
          "| MPICH native us | default | best forced | native/default | default/best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    runs = {f: {(r["coll"], r["bytes"]): r for r in json.loads((HERE / f"{tag}-{f}.json").read_text())["results"]}
            for f in ("openmpi", "mpich")}
    for key in sorted(runs["openmpi"], key=lambda k: (k[0], k[1])):
        if key[1] not in SIZE:
            continue
        cells = []
        for f in ("openmpi", "mpich"):
            r = runs[f].get(key)
            if not r:
                cells += ["-"] * 5
                continue
            n, m, b = r["native_us"], r["mcoll_us"], r["best_forced_us"]
            low = " **<0.95**" if n / m < 0.95 else ""
            far = " **>1.10**" if m / b > 1.10 else ""
            cells += [f"{n:.1f}", f"{m:.1f}", f"{b:.1f} {r['best_forced_alg']}", f"{n / m:.2f}{low}",
                      f"{m / b:.2f}{far}"]
        print(f"| {key[0]} | {SIZE[key[1]]} | " + " | ".join(cells) + " |")


def spin_table():
    print("\n### spin-hogs (-V SPIN_US=0,20000: old waits against new, one job, 2 nice-19 busy loops)\n")
    print("| coll | bytes | Open MPI SPIN_US=0 us | 20000 us | ratio | MPICH SPIN_US=0 us | 20000 us | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    runs = {f: json.loads((HERE / f"spin-hogs-{f}.json").read_text())["results"] for f in ("openmpi", "mpich")}
    for a, b in zip(runs["openmpi"], runs["mpich"]):
        cells = [f"{r['native_us']:.0f} | {r['mcoll_us']:.0f} | {r['ratio']:.1f}" for r in (a, b)]
        print(f"| {a['coll']} | {SIZE.get(a['bytes'], a['bytes'])} | " + " | ".join(cells) + " |")


for tag in ("before", "after", "after-hogs"):
    forced_table(tag)
spin_table()
