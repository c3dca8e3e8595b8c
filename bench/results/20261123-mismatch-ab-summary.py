import json, glob, statistics, sys, collections
d = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(lambda: {"m": [], "r": [], "s": []}))
for p in glob.glob(f"{d}/*.json"):
    f, i, b = p.split("/")[-1][:-5].split("-")
    try: j = json.load(open(p))
    except Exception: continue
    for r in j["results"]:
        e = rows[(f, r["coll"], r["bytes"])][b]
        e["m"].append(r["mcoll_us"]); e["r"].append(r["native_us"] / r["mcoll_us"]); e["s"] += r["mcoll_samples_us"]
def q(xs, p): xs = sorted(xs); return xs[int(p * (len(xs) - 1))]
print("| MPI | coll | bytes | jobs old/new | mcoll µs old: median of jobs (p10 of rounds) | new | new/old median (p10) | native/mcoll old | new |")
print("|---|---|---|---|---|---|---|---|---|")
for k in sorted(rows):
    o, n = rows[k]["old"], rows[k]["new"]
    if not o["m"] or not n["m"]: continue
    mo, mn = statistics.median(o["m"]), statistics.median(n["m"])
    po, pn = q(o["s"], 0.1), q(n["s"], 0.1)
    print(f"| {k[0]} | {k[1]} | {k[2]} | {len(o['m'])}/{len(n['m'])} | {mo:.3f} ({po:.3f}) | {mn:.3f} ({pn:.3f}) | {mn/mo:.2f} ({pn/po:.2f}) | {statistics.median(o['r']):.2f} | {statistics.median(n['r']):.2f} |")
