#!/usr/bin/env python3
"""Turn mcoll-bench JSON results into a markdown table and a plot.

    python3 tools/py/mcoll_report.py RESULT.json [more.json ...] --md out.md --png out.png

Each JSON file is one series (labelled by MPI flavour, rank count and, but for the
default back-to-back mode, mcoll-bench's mode). The table lists, per collective and
size, the median time per call of the host MPI (native) and of mcoll, their ratio
native/mcoll (> 1: mcoll faster) and the bus bandwidths; latency-mode runs get the
same table in their own section, cold-mode runs a table of set-up, first calls and
warm calls. The plot has one panel per collective: time against size, log-log, native
dashed, mcoll solid (cold runs: the median of their first N calls).
"""

import argparse
import json
import math
import sys
from pathlib import Path

TABLE_HEADER = ["series", "coll", "size", "native µs", "mcoll µs", "ratio",
                "busbw native GB/s", "busbw mcoll GB/s"]
COLD_HEADER = ["series", "coll", "size", "set-up native µs", "set-up mcoll µs",
               "1st native µs", "1st mcoll µs", "1-10 native µs", "1-10 mcoll µs",
               "1-N native µs", "1-N mcoll µs", "warm native µs", "warm mcoll µs",
               "cold/warm native", "cold/warm mcoll", "ratio 1-N"]
MODES = ("back2back", "latency", "cold")
MODE_TITLES = {
    "back2back": "Back-to-back (warm)",
    "latency": "Latency mode (OSU's convention)",
    "cold": "Cold start (fresh communicators)",
}
MODE_NOTES = {
    "back2back": "",
    "latency": ("A barrier of the same side after every call, the calls alone timed; "
                "a rank's average per call, the slowest rank's; median over rounds."),
    "cold": ("Each round, each side: MPI_Comm_dup, its first barrier (set-up: mcoll builds "
             "its context), then each of the first N calls timed alone after a barrier of "
             "the host MPI, then the same calls once warm (after 256 more); per call index "
             "the slowest rank, medians over rounds. cold/warm = median of calls 1-N / "
             "warm; ratio 1-N = native/mcoll of calls 1-N."),
}


def load_result(path):
    """The parsed JSON of one mcoll-bench run; ValueError if it is not one."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("tool") != "mcoll-bench" or "results" not in doc:
        raise ValueError(f"{path}: not an mcoll-bench result")
    return doc


def mode_of(doc):
    """mcoll-bench's mode; files from before the modes are back-to-back."""
    return doc.get("mode", "back2back")


def series_label(doc):
    """'openmpi np4' ('openmpi np4 cold' for the other modes), marked when mcoll was
    not loaded (ratios ~1) or the run was cut short."""
    label = f"{doc.get('flavour', 'unknown')} np{doc.get('nprocs', '?')}"
    if mode_of(doc) != "back2back":
        label += f" {mode_of(doc)}"
    if not doc.get("mcoll_loaded"):
        label += " (no mcoll)"
    if doc.get("complete") is False:
        label += " (partial)"
    return label


def format_size(nbytes):
    """Binary units, exact where possible: 8 B, 4 KiB, 1.5 MiB."""
    value = float(nbytes)
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def short_size(nbytes):
    """Axis labels: 8, 512, 4K, 16M."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}"


def format_us(us):
    """Microseconds with about three significant digits."""
    if us is None or not math.isfinite(us):
        return "-"
    if us < 10:
        return f"{us:.2f}"
    if us < 1000:
        return f"{us:.1f}"
    return f"{us:.0f}"


def format_ratio(ratio):
    """native/mcoll with two decimals; '-' when unknown."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.2f}"


def format_gbs(gbs):
    return "-" if gbs is None or not math.isfinite(gbs) else f"{gbs:.2f}"


def ratio_of(row):
    """The stored ratio, or native/mcoll when the file lacks it."""
    if row.get("ratio") is not None:
        return row["ratio"]
    native, mcoll = row.get("native_us"), row.get("mcoll_us")
    return native / mcoll if native and mcoll else None


def table_rows(docs):
    """One list of cells per (series, coll, size), in the files' order."""
    rows = []
    for doc in docs:
        label = series_label(doc)
        for r in doc["results"]:
            rows.append([label, r["coll"], format_size(r["bytes"]), format_us(r["native_us"]),
                         format_us(r["mcoll_us"]), format_ratio(ratio_of(r)),
                         format_gbs(r.get("busbw_native_gbs")),
                         format_gbs(r.get("busbw_mcoll_gbs"))])
    return rows


def cold_ratio(cold, warm):
    return cold / warm if cold is not None and warm else None


def cold_table_rows(docs):
    """One list of cells per (series, coll, size) of cold-mode runs."""
    rows = []
    for doc in docs:
        label = series_label(doc)
        for r in doc["results"]:
            rows.append([label, r["coll"], format_size(r["bytes"]),
                         format_us(r.get("native_setup_us")), format_us(r.get("mcoll_setup_us")),
                         format_us(r.get("native_first_us")), format_us(r.get("mcoll_first_us")),
                         format_us(r.get("native_first10_us")),
                         format_us(r.get("mcoll_first10_us")),
                         format_us(r["native_us"]), format_us(r["mcoll_us"]),
                         format_us(r.get("native_warm_us")), format_us(r.get("mcoll_warm_us")),
                         format_ratio(cold_ratio(r["native_us"], r.get("native_warm_us"))),
                         format_ratio(cold_ratio(r["mcoll_us"], r.get("mcoll_warm_us"))),
                         format_ratio(ratio_of(r))])
    return rows


def markdown_table(header, rows):
    """A pipe table, numbers right-aligned."""
    right = [i for i, h in enumerate(header) if h not in ("series", "coll")]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def describe_run(doc):
    """One markdown bullet of a run's metadata."""
    mpi = doc.get("mpi_library", "").strip().splitlines()
    mcoll = (f"mcoll {doc.get('mcoll_version')}" if doc.get("mcoll_loaded")
             else "mcoll not loaded")
    return (f"- **{series_label(doc)}**: {mpi[0] if mpi else 'unknown MPI'}; {mcoll}; "
            f"{doc.get('hostname', '?')}, {doc.get('date', '?')}; "
            f"{doc.get('rounds', '?')} rounds")


def render_markdown(docs):
    parts = ["# mcoll-bench results", "",
             "Median time per call (slowest rank) over alternating rounds; "
             "ratio = native/mcoll, > 1 means mcoll is faster. Size: the per-rank block "
             "for allgather, gather, scatter, alltoall and reduce_scatter (and their v "
             "forms), the whole buffer otherwise.", ""]
    parts += [describe_run(doc) for doc in docs]
    by_mode = {mode: [d for d in docs if mode_of(d) == mode] for mode in MODES}
    by_mode["back2back"] += [d for d in docs if mode_of(d) not in MODES]
    only_back2back = len(by_mode["back2back"]) == len(docs)
    for mode in MODES:
        if not by_mode[mode]:
            continue
        if not only_back2back:
            parts += ["", f"## {MODE_TITLES[mode]}", ""]
            if MODE_NOTES[mode]:
                parts += [MODE_NOTES[mode], ""]
        if mode == "cold":
            parts += [markdown_table(COLD_HEADER, cold_table_rows(by_mode[mode]))]
        else:
            parts += ["", markdown_table(TABLE_HEADER, table_rows(by_mode[mode]))]
    return "\n".join(parts)


def collectives_in(docs):
    """Collective names in order of first appearance."""
    names = []
    for doc in docs:
        for r in doc["results"]:
            if r["coll"] not in names:
                names.append(r["coll"])
    return names


def series_points(doc, coll):
    """(sizes, native µs, mcoll µs) of one collective in one run."""
    rows = [r for r in doc["results"] if r["coll"] == coll]
    return ([r["bytes"] for r in rows], [r["native_us"] for r in rows],
            [r["mcoll_us"] for r in rows])


def plot_sizeless(ax, docs, coll):
    """Barrier and the like have one size (0): grouped bars per series."""
    width = 0.38
    for i, doc in enumerate(docs):
        _, native, mcoll = series_points(doc, coll)
        if native:
            ax.bar(i - width / 2, native[0], width, color="tab:gray",
                   label="native" if i == 0 else None)
            ax.bar(i + width / 2, mcoll[0], width, color="tab:blue",
                   label="mcoll" if i == 0 else None)
    ax.set_xticks(range(len(docs)), [series_label(d) for d in docs], rotation=20, fontsize=7)
    ax.legend(fontsize=7)


def series_color(index):
    return f"C{index % 10}"


def plot_sweep(ax, docs, coll):
    from matplotlib.ticker import FuncFormatter

    for i, doc in enumerate(docs):
        sizes, native, mcoll = series_points(doc, coll)
        if sizes:
            ax.plot(sizes, native, "--", marker=".", color=series_color(i))
            ax.plot(sizes, mcoll, "-", marker="o", markersize=3, color=series_color(i))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: short_size(x)))
    ax.set_xlabel("bytes", fontsize=8)


def figure_legend(fig, docs):
    """Series by colour, native/mcoll by line style: one legend for all panels."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=series_color(i), label=series_label(d))
               for i, d in enumerate(docs)]
    handles += [Line2D([], [], color="black", linestyle="--", label="native (host MPI)"),
                Line2D([], [], color="black", linestyle="-", label="mcoll")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8)


def plot(docs, path):
    """One panel per collective; writes a PNG at path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = collectives_in(docs)
    ncols = min(4, max(1, len(names)))
    nrows = math.ceil(len(names) / ncols) or 1
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.6 * nrows), squeeze=False)
    for ax, coll in zip(axes.flat, names):
        sizeless = all(r["bytes"] == 0 for d in docs for r in d["results"] if r["coll"] == coll)
        (plot_sizeless if sizeless else plot_sweep)(ax, docs, coll)
        ax.set_title(coll, fontsize=10)
        ax.set_ylabel("µs per call", fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.suptitle("mcoll-bench: time per call, native (dashed) vs mcoll (solid)", fontsize=11)
    fig.tight_layout(rect=(0, 0.06 / nrows, 1, 0.98))
    figure_legend(fig, docs)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="mcoll-bench JSON files")
    parser.add_argument("--md", type=Path, help="write the markdown here (default: stdout)")
    parser.add_argument("--png", type=Path, help="write the plot here")
    args = parser.parse_args(argv)
    try:
        docs = [load_result(p) for p in args.results]
    except (OSError, ValueError) as e:
        print(f"mcoll_report: {e}", file=sys.stderr)
        return 1
    text = render_markdown(docs)
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if args.png:
        plot(docs, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
