#!/usr/bin/env python3
"""ABAB report: per MPI and mode, new/base of the per-round mcoll/native ratio (median over
rows) and of the best mcoll sample, and the rows where new is highest (> 1: new slower)."""
import collections, glob, json, os, statistics as st, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for flav in ("openmpi", "mpich"):
    for mode in ("", "-lat"):
        rows = collections.defaultdict(lambda: collections.defaultdict(list))
        for b in ("base", "new"):
            for f in sorted(glob.glob(f"{d}/{flav}-{b}-[0-9]{mode}.json")):
                for r in json.load(open(f))["results"]:
                    k = (r["coll"], r["bytes"])
                    rows[k][b] += [m / n for m, n in zip(r["mcoll_samples_us"], r["native_samples_us"])]
                    rows[k][b + "_m"] += r["mcoll_samples_us"]
        norm, best, worst = [], [], []
        for k, v in rows.items():
            if not v["new"] or not v["base"]:
                continue
            x = st.median(v["new"]) / st.median(v["base"])
            y = min(v["new_m"]) / min(v["base_m"])
            norm.append(x)
            best.append(y)
            worst.append((round(x, 2), round(y, 2), k))
        if not norm:
            continue
        worst.sort(reverse=True)
        print(f"{flav} {'latency' if mode else 'back2back'}: {len(norm)} rows; new/base normalised median "
              f"{st.median(norm):.3f}, best-sample median {st.median(best):.3f}; highest {worst[:4]}")
