#!/usr/bin/env python3
"""The table of a tools/bench/ab.sh directory: per MPI, ranks, mode, collective and size,
the median over the repetitions of each job's median time for A and for B, and A/B
(> 1: B is faster).

- algs runs (mcoll-bench -A A,B): A and B come from the same job (native and mcoll
  columns); the per-job ratios are listed too.
- builds runs: A's and B's jobs alternate; besides the times, the ratio of their
  mcoll/native (each job's own native time normalises the host's speed of the moment).
- builds runs of nbc mode: mcoll's blocking call, post + wait and persistent start +
  wait for A and for B, and each one's overhead against its own blocking call
  (p+w/blk, s+w/blk: the same job, so the host's speed cancels out).

    tools/bench/ab_summary.py OUTDIR"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def load(outdir):
    for f in sorted(Path(outdir).glob("*.json")):
        doc = json.loads(f.read_text())
        if doc.get("tool") == "mcoll-bench":
            yield f.stem, doc


def algs_table(docs):
    rows = defaultdict(list)
    for _, d in docs:
        a, b = d["versus"]
        for r in d["results"]:
            if r.get("native_us") and r.get("mcoll_us"):
                rows[(d["flavour"], d["nprocs"], d["mode"], r["coll"], r["bytes"], a, b)].append(
                    (r["native_us"], r["mcoll_us"]))
    out = ["| MPI | ranks | mode | coll | bytes | A → B | A µs | B µs | A/B per job | A/B |",
           "|---|---|---|---|---:|---|---:|---:|---|---:|"]
    ratios = []
    for (mpi, np_, mode, coll, size, a, b), v in sorted(rows.items()):
        ta = statistics.median(x for x, _ in v)
        tb = statistics.median(y for _, y in v)
        ratios.append(ta / tb)
        per = ", ".join(f"{x / y:.2f}" for x, y in v)
        out.append(f"| {mpi} | {np_} | {mode} | {coll} | {size} | {a} → {b} | {ta:.3g} | {tb:.3g} | {per} | {ta / tb:.2f} |")
    return out, ratios


def builds_table(docs):
    us, norm = defaultdict(list), defaultdict(list)
    for stem, d in docs:
        side = stem.split("-")[-2]
        for r in d["results"]:
            if r.get("native_us") and r.get("mcoll_us"):
                key = (d["flavour"], d["nprocs"], d["mode"], r["coll"], r["bytes"], side)
                us[key].append(r["mcoll_us"])
                norm[key].append(r["mcoll_us"] / r["native_us"])
    out = ["| MPI | ranks | mode | coll | bytes | A µs | B µs | A/B µs | A/B of mcoll/native |",
           "|---|---|---|---|---:|---:|---:|---:|---:|"]
    ratios = []
    for k in sorted({k[:5] for k in us}):
        a, b = us.get(k + ("a",)), us.get(k + ("b",))
        if not a or not b:
            continue
        ta, tb = statistics.median(a), statistics.median(b)
        na, nb = statistics.median(norm[k + ("a",)]), statistics.median(norm[k + ("b",)])
        ratios.append(ta / tb)
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {ta:.3g} | {tb:.3g} | {ta / tb:.2f} | {na / nb:.2f} |")
    return out, ratios


def nbc_table(docs):
    cols = ("blocking", "post_wait", "start_wait")
    got = defaultdict(list)
    for stem, d in docs:
        side = stem.split("-")[-2]
        for r in d["results"]:
            if r.get("mcoll_blocking_us"):
                got[(d["flavour"], d["nprocs"], r["coll"], r["bytes"], side)].append(
                    [r.get(f"mcoll_{c}_us") or float("nan") for c in cols])
    out = ["| MPI | ranks | coll | bytes | A blk | A p+w | A s+w | A p+w/blk | A s+w/blk "
           "| B blk | B p+w | B s+w | B p+w/blk | B s+w/blk |",
           "|---|---|---|---:|" + "---:|" * 10]
    ratios = []
    for k in sorted({k[:4] for k in got}):
        cells = []
        for side in "ab":
            v = got.get(k + (side,))
            if not v:
                break
            blk, pw, sw = (statistics.median(x[i] for x in v) for i in range(3))
            cells.append(f"{blk:.3g} | {pw:.3g} | {sw:.3g} | {pw / blk:.2f} | {sw / blk:.2f}")
            if side == "b":
                ratios.append(pw / blk)
        if len(cells) == 2:
            out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {cells[0]} | {cells[1]} |")
    return out, ratios


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ab_summary.py OUTDIR")
    docs = list(load(sys.argv[1]))
    if not docs:
        sys.exit(f"no mcoll-bench results in {sys.argv[1]}")
    if docs[0][1].get("mode") == "nbc" and not docs[0][1].get("versus"):
        lines, ratios = nbc_table(docs)
        print("\n".join(lines))
        print(f"\n{len(ratios)} rows; B's p+w/blk median {statistics.median(ratios):.2f}, "
              f"highest {max(ratios):.2f}, rows above 1.1: {sum(r > 1.1 for r in ratios)}")
        return
    lines, ratios = (algs_table if docs[0][1].get("versus") else builds_table)(docs)
    print("\n".join(lines))
    print(f"\n{len(ratios)} rows; A/B median {statistics.median(ratios):.2f}, lowest {min(ratios):.2f}, "
          f"rows below 0.95: {sum(r < 0.95 for r in ratios)}")


if __name__ == "__main__":
    main()
