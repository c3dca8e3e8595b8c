#!/usr/bin/env python3
"""The cluster benchmark's one table and plot (bench/run.sh --hosts): the blocking jobs
of every setting side by side, host MPI against mcoll, the link rates beside each other.

    python3 tools/bench/hosts_matrix.py STAMP-hosts-*-blocking.json [...] --md out.md --png out.png

A job's setting comes from its file name, <stamp>-hosts-<rate>-<H>x<R>-<flavour>-blocking.json
(bench/hosts.sh names them so). One row per layout (H hosts x R ranks), collective and
size; per flavour and rate the host MPI's and mcoll's median time per call (slowest
rank, latency mode) and their ratio host/mcoll (> 1: mcoll faster); a missing job is
'-'. The plot: one panel per flavour and layout, host/mcoll per collective and size,
one bar per rate.

With --model, a second table: mcoll's measured time against `mcoll model`'s prediction
for each row, from the link the same run calibrated for that rate and flavour
(<stamp>-hosts-<rate>-link-<flavour>.json beside the blocking jobs: bench/hosts.sh's
link job), and the error model/measured - 1.
"""

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py"))

NAME = re.compile(r"-hosts-(?P<rate>[^-]+)-(?P<hosts>\d+)x(?P<per>\d+)-(?P<flavour>[a-z]+)-blocking\.json$")


def size_text(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def rate_key(rate):
    m = re.match(r"(\d+)([kmg]?)bit", rate)
    return int(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else 0


def load(paths, model=False):
    """-> {(flavour, rate, hosts, per): {(coll, bytes): (native_us, mcoll_us[, predicted_us])}}
    (model: only rows with a prediction, from the link file beside the job)"""
    jobs = {}
    for p in paths:
        m = NAME.search(str(p))
        if not m:
            print(f"hosts_matrix.py: {p}: not a blocking job's name, skipped", file=sys.stderr)
            continue
        doc = json.loads(Path(p).read_text())
        key = (m["flavour"], m["rate"], int(m["hosts"]), int(m["per"]))
        if model:
            link = Path(str(p)[:m.start()] + f"-hosts-{m['rate']}-link-{m['flavour']}.json")
            if not link.exists():
                continue
            from mcoll_model import compare as C
            _, _, rows = C.compare(link, p, nodes=int(m["hosts"]))
            jobs[key] = {(r["coll"], r["bytes"]): (r["native_us"], r["measured_us"], r["predicted_us"])
                         for r in rows}
            continue
        jobs[key] = {(r["coll"], r["bytes"]): (r.get("native_us"), r.get("mcoll_us"))
                     for r in doc.get("results", []) if r.get("native_us") and r.get("mcoll_us")}
    return jobs


def axes(jobs):
    flavours = sorted({k[0] for k in jobs}, key=lambda f: (f != "openmpi", f))
    rates = sorted({k[1] for k in jobs}, key=rate_key)
    layouts = sorted({(k[2], k[3]) for k in jobs})
    colls = []
    for rows in jobs.values():
        for c, _ in rows:
            if c not in colls:
                colls.append(c)
    sizes = sorted({b for rows in jobs.values() for _, b in rows})
    return flavours, rates, layouts, colls, sizes


def table(jobs, head, cell, summary):
    """The rows layout x collective x size, a column per (flavour, rate): cell(v) -> (text,
    figure) for a row's tuple; the last row gives summary(figures) per column."""
    flavours, rates, layouts, colls, sizes = axes(jobs)
    cols = [(f, r) for f in flavours for r in rates]
    out = ["| " + " | ".join(["hosts x ranks", "coll", "size"] + [f"{f} {r}: {head}" for f, r in cols]) + " |",
           "|" + "---|" * 3 + "---:|" * len(cols)]
    figures = {c: [] for c in cols}
    for h, p in layouts:
        for c in colls:
            for b in sizes:
                cells = []
                for col in cols:
                    v = jobs.get((*col, h, p), {}).get((c, b))
                    if v is None:
                        cells.append("-")
                        continue
                    text, figure = cell(v)
                    figures[col].append(figure)
                    cells.append(text)
                if any(x != "-" for x in cells):
                    out.append(f"| {h}x{p} | {c} | {size_text(b)} | " + " | ".join(cells) + " |")
    out.append("| all rows | | | " + " | ".join(summary(v) if v else "-" for v in figures.values()) + " |")
    return "\n".join(out) + "\n"


def model_markdown(jobs):
    """mcoll measured against the model, per row; the error model/measured - 1."""
    def cell(v):
        err = v[2] / v[1] - 1
        return f"{v[1]:.4g} / {v[2]:.4g}, {100 * err:+.0f}%", abs(err)
    return table(jobs, "mcoll / model µs, error", cell, lambda e: (
        f"median \\|error\\| {100 * statistics.median(e):.0f}%, within 20% in {sum(x <= 0.2 for x in e)} "
        f"of {len(e)}"))


def markdown(jobs):
    def cell(v):
        return f"{v[0]:.4g} / {v[1]:.4g}, **{v[0] / v[1]:.2f}**", v[0] / v[1]
    return table(jobs, "host / mcoll µs, ratio", cell, lambda x: (
        f"median {statistics.median(x):.2f}, mcoll faster in {sum(r > 1.05 for r in x)}, "
        f"slower in {sum(r < 0.95 for r in x)} of {len(x)}"))


def plot(jobs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    flavours, rates, layouts, colls, sizes = axes(jobs)
    fig, grid = plt.subplots(len(flavours), len(layouts), figsize=(4.2 * len(layouts), 3.2 * len(flavours)),
                             squeeze=False, sharey=True)
    width = 0.8 / max(1, len(rates))
    labels = [(c, b) for c in colls for b in sizes]
    for i, f in enumerate(flavours):
        for j, (h, p) in enumerate(layouts):
            ax = grid[i][j]
            for k, r in enumerate(rates):
                rows = jobs.get((f, r, h, p), {})
                xs = [x + k * width for x, cb in enumerate(labels) if cb in rows]
                ys = [rows[cb][0] / rows[cb][1] for cb in labels if cb in rows]
                ax.bar(xs, ys, width, label=r)
            ax.axhline(1.0, color="k", linewidth=0.6)
            ax.set_yscale("log")
            ax.set_title(f"{f}, {h} hosts x {p}", fontsize=9)
            ax.set_xticks([x + width * (len(rates) - 1) / 2 for x in range(len(labels))])
            ax.set_xticklabels([f"{c[:6]} {size_text(b)}" for c, b in labels], rotation=90, fontsize=6)
            ax.tick_params(axis="y", labelsize=7)
            if j == 0:
                ax.set_ylabel("host / mcoll (> 1: mcoll faster)", fontsize=7)
    grid[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--md", help="write the table here (default: stdout)")
    ap.add_argument("--png", help="write the plot here")
    ap.add_argument("--model", action="store_true",
                    help="the model's table instead (needs the run's link files)")
    a = ap.parse_args(argv)
    jobs = load(a.results, model=a.model)
    if not jobs:
        print("hosts_matrix.py: no blocking job" + (" with a link file beside it" if a.model else "s"),
              file=sys.stderr)
        return 1
    text = (model_markdown if a.model else markdown)(jobs)
    if a.md:
        Path(a.md).write_text(text)
    else:
        print(text, end="")
    if a.png and not a.model:
        plot(jobs, a.png)
    return 0

if __name__ == "__main__":
    sys.exit(main())
