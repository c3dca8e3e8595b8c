"""`mcoll model fit`: per-algorithm corrections of the node cost functions, fitted on
measurements where each algorithm was forced.

The cost functions are built from a handful of machine parameters (a hand-off, copy,
single-copy and fold bandwidths). That prices the algorithms the thresholds already
chose within 10-15%, but an algorithm priced outside the sizes where it ran was 1.5-5x
off (reductions at 32 KiB-2 MiB by flat/HSRA, the gather family by single copy at
2 KiB): effects the terms do not carry (page faults of a fresh area, a peer's cache
lines crossing, the system call's page pinning).

A correction is the ratio measured / modelled of one algorithm at one size, the median
over the runs given (each a `tools/bench/rules_evidence.py` directory, or its bundle
made by tools/bench/record.py: one job per forced algorithm, so an algorithm is measured at every size whatever the thresholds
choose). Between measured sizes the factor is interpolated in log(size); beyond them it
is the nearest one. It applies only at the rank count it was measured at, on one node:
the machine file keeps a list under "corrections", one entry per rank count and
mcoll-bench mode (`latency`: OSU's barrier after every call; `back2back`: calls in a row,
where an algorithm whose root returns before its readers are done gains), and
cost.node_cost uses the entry of its rank count and mode (corrections.py reads them). An
entry without a mode is a latency one.
"""

import json
import math
import statistics
from pathlib import Path

from . import cost, runs as runs_mod

SKIP = {"p2p"}  # the restrictions' fallback, never forced by the evidence tool


def measured(dirs):
    """{(coll, alg, model bytes): [forced µs of each run]}, the rank count and the mode of
    the runs."""
    out, nprocs, modes = {}, set(), set()
    for d in dirs:
        for _, doc in runs_mod.docs(d):
            if not doc.get("versus"):
                continue
            alg = doc["versus"][1]
            nprocs.add(doc["nprocs"])
            modes.add(doc.get("mode", "latency"))
            for r in doc["results"]:
                coll = r["coll"]
                n = 0 if coll == "barrier" else cost.model_bytes(coll, r["bytes"], doc["nprocs"])
                if r.get("mcoll_us"):
                    out.setdefault((coll, alg, n), []).append(r["mcoll_us"])
    if len(nprocs) > 1:
        raise ValueError(f"runs of different rank counts: {sorted(nprocs)}")
    if len(modes) > 1:
        raise ValueError(f"runs of different modes: {sorted(modes)}")
    return out, (nprocs.pop() if nprocs else None), (modes.pop() if modes else "latency")


def fit(dirs, machine, table=None):
    """The corrections document for the machine (already at the runs' rank count)."""
    table = table or cost.load_table()
    points, nprocs, mode = measured(dirs)
    if nprocs != machine.topo["ranks_per_node"]:
        raise ValueError(f"runs of {nprocs} ranks, machine of {machine.topo['ranks_per_node']}")
    factors = {}
    for (coll, alg, n), times in sorted(points.items()):
        if alg in SKIP or alg not in table["node"].get(coll, {}):
            continue
        model = cost.node_cost(coll, alg, machine, max(n, 1), table, corrected=False)
        if not model:
            continue  # its needs do not hold: forcing it ran the normal choice
        ratio = math.exp(statistics.median(math.log(t / model) for t in times))
        factors.setdefault(coll, {}).setdefault(alg, []).append([n, round(ratio, 4)])
    return {"ranks_per_node": nprocs, "mode": mode, "runs": [str(d) for d in dirs],
            "factors": factors}


def dumps_machine(data):
    """The machine file's JSON, indented, with each algorithm's factors on one line."""
    import re
    text = json.dumps(data, indent=1)
    return re.sub(r"\[\s*\[[\d.,\s\[\]]*?\]\s*\]",
                  lambda m: re.sub(r"\s+", "", m.group(0)).replace(",", ", "), text) + "\n"


def main(argv=None):
    import argparse
    from . import machine as M
    ap = argparse.ArgumentParser(prog="mcoll model fit", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="rules_evidence.py result directories (one rank count)")
    ap.add_argument("--machine", "-m", default="here", help="machine file to correct (default: here)")
    ap.add_argument("--write", action="store_true",
                    help="store the corrections in the machine file (else print them)")
    a = ap.parse_args(argv)
    path = M.resolve(a.machine)
    data = json.loads(path.read_text())
    _, nprocs, mode = measured(a.runs)
    m = M.load(a.machine, nodes=1, ranks_per_node=nprocs)
    doc = fit(a.runs, m)
    if not a.write:
        print(json.dumps(doc, indent=1))
        return 0
    others = [e for e in data.get("corrections") or []
              if (e["ranks_per_node"], mode_of(e)) != (nprocs, mode)]
    data["corrections"] = sorted(others + [doc], key=lambda e: (e["ranks_per_node"], mode_of(e) != "latency"))
    path.write_text(dumps_machine(data))
    print(f"{path}: corrections of {sum(len(v) for v in doc['factors'].values())} algorithms "
          f"at {nprocs} ranks per node, {mode} mode, from {len(a.runs)} runs")
    return 0
