"""`mcoll model compare`: the model's prediction against mcoll-bench's measured mcoll
times (a bench/run.sh results JSON), per collective and size: a table, a plot and the
median relative error.

The prediction is the model's cheapest algorithm on the machine file with the job's
rank count; the measured time is whatever mcoll chose (its thresholds), so a row where
the two choices differ shows up as an error of the model or of the thresholds."""

import json
import statistics
from pathlib import Path

from . import cost, machine as M

# mcoll-bench's "bytes": the per-rank block of these; the model's n is their whole vector
PER_RANK_VECTOR = {"reduce_scatter", "reduce_scatter_block"}


def model_bytes(coll, nbytes, nprocs):
    return nbytes * nprocs if coll in PER_RANK_VECTOR else nbytes


def compare(machine_path, results_path, table=None, nodes=1):
    """nodes: the hosts the results' job spanned (its ranks spread evenly over them)."""
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
        t, alg, inter = cost.choose(coll, m, model_bytes(coll, r["bytes"], n), table)
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
