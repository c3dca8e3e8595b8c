#!/usr/bin/env python3
"""The rules' choice against every algorithm forced in turn, one node (2 ranks unless --np).

For each collective and each of its node algorithms, one mcoll-bench job alternates
mcoll's own choice (the rules in force: `mcoll_set_algorithm(coll, "auto")`) with the
algorithm forced (`-A auto,ALG`), rounds interleaved, medians; so each ratio
choice/forced comes from one job. At a size the choice is within 10% of the best forced
algorithm when no forced algorithm beats it by more than 10%: max over algorithms of
t_choice / t_forced <= 1.10. Algorithms whose restrictions do not hold at a size (the
cost table's needs) are left out there (forcing them runs the normal choice).

    tools/bench/rules_evidence.py --flavour openmpi --out bench/raw/STAMP-rules-openmpi
    tools/bench/rules_evidence.py --summarize DIR     # the table again from DIR's JSON
                                                      # (or from its bundle: record.py condense)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "py"))
from mcoll_model import cost, machine as M, runs  # noqa: E402

COLLS = ["barrier", "bcast", "reduce", "allreduce", "reduce_scatter", "scan", "exscan",
         "allgather", "gather", "scatter", "alltoall"]
SKIP = {"p2p"}  # reductions over point-to-point: the restrictions' fallback, not a choice


def rules_pick(rules, coll, n, ranks):
    """The node algorithm a rules list gives (absent ranges: no limit, as rules.c reads them)."""
    from mcoll_model import tune
    return tune.prior_pick(rules, coll, "node", n, ranks)


def run(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = cost.load_table()
    bench = ROOT / "build" / args.flavour / "bin" / "mcoll-bench"
    cmds = []
    for coll in args.colls.split(","):
        for alg in table["node"][coll]:
            if alg in SKIP:
                continue
            path = out / f"{coll}-{alg}.json"
            argv = [str(ROOT / "bin" / "mcollrun"), "--mpi", args.flavour, "-np", str(args.np), str(bench),
                    "-m", args.mode, "-C", coll, "-A", f"auto,{alg}", "-b", "8",
                    "-e", args.max, "-f", str(args.factor), "-r", str(args.rounds), "-T", str(args.round_ms),
                    "-o", str(path)]
            if coll == "barrier":
                argv[argv.index("-e") + 1] = "8"
            cmds.append(" ".join(argv))
            load = os.getloadavg()[0]
            env = dict(os.environ)
            if args.rules:
                env["MCOLL_RULES"] = str(Path(args.rules).resolve())
            r = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
            print(f"{coll} {alg}: rc {r.returncode} load {load:.1f}", flush=True)
            if r.returncode:
                print(r.stderr[-2000:], file=sys.stderr)
    rules = f"MCOLL_RULES={Path(args.rules).resolve()} " if args.rules else ""
    (out / "command.txt").write_text(
        f"# {' '.join(sys.argv)}\n# load average after: {os.getloadavg()}\n"
        + "\n".join(rules + c for c in cmds) + "\n")


def summarize(directory, rules_path=None):
    table = cost.load_table()
    rules = json.loads(Path(rules_path).read_text())["rules"] if rules_path else \
        json.loads(_builtin_json())["rules"]
    docs = {name: doc for name, doc in runs.docs(directory) if doc.get("versus")}
    np_ = next(iter(docs.values()))["nprocs"] if docs else 2
    m = M.load("here", nodes=1, ranks_per_node=np_)
    rows = []
    for coll in COLLS:
        forced = {}
        for alg in table["node"][coll]:
            doc = docs.get(f"{coll}-{alg}")
            if doc is None:
                continue
            for res in doc["results"]:
                n = res["bytes"]
                forced.setdefault(n, {})[alg] = (res["native_us"], res["mcoll_us"])
        for n in sorted(forced):
            nm = 0 if coll == "barrier" else cost.model_bytes(coll, n, np_)  # the rules' bytes
            ok = {a: t for a, t in forced[n].items()
                  if cost.node_cost(coll, a, m, max(nm, 1), table) is not None}
            if not ok:
                continue
            ratios = {a: t[0] / t[1] for a, t in ok.items()}      # choice / forced, same job
            pick = rules_pick(rules, coll, nm, np_)
            # the choice against every other algorithm (the pick forced against itself
            # measures the noise: ideally 1)
            others = {a: v for a, v in ratios.items() if a != pick} or ratios
            best = max(others, key=others.get)
            rows.append({"coll": coll, "bytes": n, "np": np_, "pick": pick, "best": best,
                         "ratio": others[best], "self": ratios.get(pick),
                         "choice_us": statistics.median(t[0] for t in ok.values()),
                         "best_us": ok[best][1], "ratios": ratios})
    return rows


def score(rows, rules):
    """Another rules file judged on the same forced runs: at each point its pick's time
    over the fastest forced algorithm's, t_pick / t_best = (t_choice / t_best) /
    (t_choice / t_pick), each ratio from one job's alternation. None where the pick
    was not measured there."""
    out = []
    for r in rows:
        nm = 0 if r["coll"] == "barrier" else cost.model_bytes(r["coll"], r["bytes"], r["np"])
        pick = rules_pick(rules, r["coll"], nm, r["np"])
        best = max(r["ratios"].values())
        ratio = best / r["ratios"][pick] if pick in r["ratios"] else None
        out.append({**r, "pick": pick, "vs_best": ratio})
    return out


def _builtin_json():
    sys.path.insert(0, str(ROOT / "tools" / "py"))
    from mcoll_model import tune
    text = (ROOT / "src" / "coll" / "rules_builtin.c").read_text()
    return tune.json_from_c(text)


def markdown(rows, title):
    within = sum(1 for r in rows if r["ratio"] <= 1.10)
    noisy = sum(1 for r in rows if r["self"] is not None and abs(r["self"] - 1) > 0.10)
    quiet = [r for r in rows if r["self"] is not None and abs(r["self"] - 1) <= 0.10]
    quiet_within = sum(1 for r in quiet if r["ratio"] <= 1.10)
    lines = [f"## {title}", "",
             f"rules' choice within 10% of the best other forced algorithm: {within} of {len(rows)} points; "
             f"the pick forced against itself (noise) off by more than 10%: {noisy} of {len(rows)}; "
             f"at the points where it is not: {quiet_within} of {len(quiet)} within 10%", "",
             "choice/other: the choice's time over the fastest other algorithm's (> 1: that one was "
             "faster), both in one job, alternating; self: the pick forced against the choice (1 = no noise)", "",
             "| collective | bytes | rules pick | fastest other | choice/other | self | choice µs | other µs | every forced (choice/forced) |",
             "|---|---:|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        flag = "" if r["ratio"] <= 1.10 else " **>10%**"
        every = ", ".join(f"{a} {v:.2f}" for a, v in sorted(r["ratios"].items()))
        selfr = f"{r['self']:.2f}" if r["self"] is not None else "-"
        lines.append(f"| {r['coll']} | {r['bytes']} | {r['pick']} | {r['best']} | {r['ratio']:.2f}{flag} | "
                     f"{selfr} | {r['choice_us']:.3g} | {r['best_us']:.3g} | {every} |")
    return "\n".join(lines) + "\n"


def score_markdown(rows, files):
    judged = {}
    for f in files:
        rules = json.loads(_builtin_json() if f == "builtin" else Path(f).read_text())["rules"]
        judged[f] = score(rows, rules)
    names = [Path(f).stem for f in files]
    lines = ["pick's time ÷ the fastest forced algorithm's (1.00: it is the fastest; "
             "**bold**: more than 10% slower)", "",
             "| collective | bytes | " + " | ".join(names) + " |",
             "|---|---:|" + "---|" * len(files)]
    for i, r in enumerate(rows):
        cells = []
        for f in files:
            j = judged[f][i]
            v = j["vs_best"]
            cells.append("-" if v is None else (f"{j['pick']} **{v:.2f}**" if v > 1.10
                                                 else f"{j['pick']} {v:.2f}"))
        lines.append(f"| {r['coll']} | {r['bytes']} | " + " | ".join(cells) + " |")
    lines.append("")
    for f, name in zip(files, names):
        vals = [j["vs_best"] for j in judged[f] if j["vs_best"] is not None]
        within = sum(1 for v in vals if v <= 1.10)
        lines.append(f"- {name}: within 10% of the fastest at {within} of {len(vals)} points; "
                     f"median {statistics.median(vals):.3f}, worst {max(vals):.2f}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flavour", default="openmpi")
    ap.add_argument("--np", type=int, default=2, help="ranks (one node)")
    ap.add_argument("--out", help="directory for the JSON files")
    ap.add_argument("--mode", default="latency")
    ap.add_argument("--max", default="2M")
    ap.add_argument("--factor", type=int, default=4, help="mcoll-bench -f: sizes 8, 8f, 8f^2, ...")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--round-ms", type=float, default=4, help="mcoll-bench -T")
    ap.add_argument("--colls", default=",".join(COLLS))
    ap.add_argument("--summarize", help="print the table from this directory's JSON (or a bundle)")
    ap.add_argument("--rules", help="rules JSON to run with (MCOLL_RULES) and summarize by "
                    "(default: the built-in)")
    ap.add_argument("--score", nargs="+", metavar="RULES",
                    help="with --summarize: judge these rules files (JSON, or 'builtin') on the "
                    "same runs: each pick's time over the fastest forced algorithm's")
    ap.add_argument("--md", help="write the markdown table here")
    ap.add_argument("--title", help="the table's heading (default: flavour, ranks, mode)")
    a = ap.parse_args()
    if not a.summarize:
        run(a)
    rows = summarize(a.summarize or a.out, a.rules)
    if a.score:
        print(score_markdown(rows, a.score))
        return
    text = markdown(rows, a.title or f"{a.flavour}, {rows[0]['np'] if rows else a.np} ranks, {a.mode} mode")
    if a.md:
        Path(a.md).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
