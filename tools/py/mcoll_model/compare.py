"""`mcoll model compare`: the model's prediction against mcoll-bench's measured mcoll
times (a bench/run.sh results JSON), per collective and size: a table, a plot and the
median relative error.

The prediction is, between nodes, the algorithm mcoll's built-in rules take for the row
(what the measured time ran: a row where the model's own cheapest choice differs would
otherwise count the rules' choice as the model's error; `choice="cheapest"` gives that),
with the library's override where nodes share one machine's cores (bcast takes the
binomial tree: src/coll/bcast/bcast.c; `choice="built-in"`: the built-in rules alone, what
runs recorded before that override ran),
and on the node the model's cheapest, on the machine file with the job's rank count."""

import json
import statistics
from pathlib import Path

from . import cost, machine as M

# bytes the C side chooses a bcast's inter-node algorithm by: one piece
# (src/core/config.h INTER_PIECE, src/coll/bcast/bcast.c bcast_by)
INTER_PIECE = 256 * 1024
INTER_SAG_MIN = 64 * 1024  # MCOLL_INTER_SAG_MIN's default
_builtin_rules = None


def first_arrival_pays(nodes, ranks_per_node, piece):
    """src/coll/bcast/bcast.c's first_arrival_pays: nodes of 1 rank from 4 nodes and
    pieces of INTER_SAG_MIN, at 3 from pieces of twice that; nodes of several ranks from
    4 nodes, pieces from INTER_SAG_MIN below a whole piece."""
    if ranks_per_node == 1:
        return (nodes >= 4 and piece >= INTER_SAG_MIN) or (nodes == 3 and piece >= 2 * INTER_SAG_MIN)
    return nodes >= 4 and INTER_SAG_MIN <= piece < INTER_PIECE


def rules_inter(coll, nodes, nbytes, shared_cores=False, ranks_per_node=None, flavour=None):
    """The inter-node algorithm of mcoll's built-in rules for this row, or None;
    shared_cores: the nodes share one machine's cores, more ranks than cores (there
    bcast takes the tree, and under Open MPI first_arrival where first_arrival_pays:
    src/coll/bcast/bcast.c)."""
    global _builtin_rules
    if _builtin_rules is None:
        from . import tune
        src = Path(__file__).resolve().parents[3] / "src" / "coll" / "rules_builtin.c"
        _builtin_rules = json.loads(tune.json_from_c(src.read_text()))["rules"] if src.exists() else []
    from . import tune
    n = min(nbytes, INTER_PIECE) if coll == "bcast" else nbytes
    alg = tune.prior_pick(_builtin_rules, coll, "inter", n, nodes)
    if shared_cores and coll == "bcast" and flavour == "openmpi" and first_arrival_pays(
            nodes, ranks_per_node, n):
        return "first_arrival"
    if shared_cores and coll == "bcast" and alg == "scatter_allgather":
        return "binomial"
    return alg


def shares_cores(m):
    """The machine file's nodes share one machine's cores (topology.machine_cores, which
    the calibration writes when every rank runs on the same kernel), oversubscribed."""
    cores = m.topo.get("machine_cores")
    return bool(cores) and m.topo["nodes"] > 1 and m.topo["nodes"] * m.topo["ranks_per_node"] > cores


def predict(coll, m, nbytes, table, choice="rules", flavour=None):
    """(µs, node algorithm, inter algorithm) of the row; flavour: the results' MPI."""
    options = cost.costs(coll, m, nbytes, table)
    if choice in ("rules", "built-in") and m.topo["nodes"] > 1:
        inter = rules_inter(cost.canonical(coll, table), m.topo["nodes"], nbytes,
                            choice == "rules" and shares_cores(m), m.topo["ranks_per_node"], flavour)
        ran = [o for o in options if o[2] == inter]
        if ran:
            return ran[0]
    return options[0]


def compare(machine_path, results_path, table=None, nodes=1, choice="rules"):
    """nodes: the hosts the results' job spanned (its ranks spread evenly over them);
    choice: "rules" (between nodes what mcoll runs), "built-in" (what it ran before nodes
    sharing cores took bcast's tree) or "cheapest" (the model's own)."""
    doc = json.loads(Path(results_path).read_text())
    n = doc["nprocs"]
    if n % nodes:
        raise ValueError(f"{n} ranks do not spread evenly over {nodes} nodes")
    m = M.load(machine_path, ranks_per_node=n // nodes, nodes=nodes)
    table = table or cost.load_table()
    rows = []
    for r in doc["results"]:
        coll = r["coll"]
        if cost.canonical(coll, table) not in table["node"] or not r.get("mcoll_us"):
            continue
        t, alg, inter = predict(coll, m, cost.model_bytes(coll, r["bytes"], n), table, choice,
                                doc.get("flavour"))
        rows.append({"coll": coll, "bytes": r["bytes"], "measured_us": r["mcoll_us"],
                     "native_us": r.get("native_us"), "predicted_us": t,
                     "algorithm": alg + (" + " + inter if inter else ""),
                     "error": t / r["mcoll_us"] - 1})
    return doc, m, rows


def summary(rows):
    by = {}
    for r in rows:
        by.setdefault(r["coll"], []).append(abs(r["error"]))
    per = {c: statistics.median(v) for c, v in by.items()}
    return per, statistics.median(abs(r["error"]) for r in rows) if rows else float("nan")


def markdown(doc, m, rows):
    per, overall = summary(rows)
    nodes = m.topo["nodes"]
    out = [f"# Model vs. measured: {doc.get('flavour')} {doc['nprocs']} ranks"
           f"{f' on {nodes} nodes' if nodes > 1 else ''}, mode "
           f"{doc.get('mode', 'back2back')}, {doc.get('date')}", "",
           f"machine file: {m.name}", "",
           "| collective | median \\|error\\| | rows |", "|---|---|---|"]
    for c, e in per.items():
        out.append(f"| {c} | {100 * e:.0f}% | {sum(1 for r in rows if r['coll'] == c)} |")
    out += ["", f"median |error| over all rows: {100 * overall:.1f}%", "",
            "| collective | bytes | measured µs | predicted µs | error | model's algorithm |",
            "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['coll']} | {r['bytes']} | {r['measured_us']:.3g} | "
                   f"{r['predicted_us']:.3g} | {100 * r['error']:+.0f}% | {r['algorithm']} |")
    return "\n".join(out) + "\n"


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colls = list(dict.fromkeys(r["coll"] for r in rows if r["bytes"] > 0))
    cols = 4
    nrows = (len(colls) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3 * nrows), squeeze=False)
    for ax, c in zip(axes.flat, colls):
        rs = [r for r in rows if r["coll"] == c]
        ax.loglog([r["bytes"] for r in rs], [r["measured_us"] for r in rs], "o-", label="measured")
        ax.loglog([r["bytes"] for r in rs], [r["predicted_us"] for r in rs], "s--", label="model")
        ax.set_title(c, fontsize=9)
        ax.set_xlabel("bytes", fontsize=8)
        ax.set_ylabel("µs", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(colls):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
