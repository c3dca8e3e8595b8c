#!/usr/bin/env python3
"""Benchmark records: what the repository keeps of a run (raw runs stay in bench/raw/,
which git ignores).

    record.py condense FILE.json -o OUT.json     one mcoll-bench file, condensed
    record.py condense DIR -o OUT.json           a directory of them as one bundle
    record.py summary FILE.json...               the summary table of a record: per series
                                                 and per collective, native/mcoll

Condensed keeps the mcoll-bench schema that tools/py (mcoll_report.py, mcoll_model's
compare, fit, and tools/bench/rules_evidence.py) reads and drops the per-round samples,
the iteration counts, the algorithm bandwidths and all but the first line of the MPI's
version text; numbers keep 4 significant digits. A record folder (bench/records/<claim>/)
holds the condensed data, a README.md with the claim, the command, the commit and the
machine, and the summary the docs quote."""

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "py"))
from mcoll_model import runs  # noqa: E402

HEADER_DROP = {"notes", "max_iters", "round_target_ms", "iters", "warmup"}
ROW_DROP = {"iters", "warmup", "count", "algbw_native_gbs", "algbw_mcoll_gbs",
            "native_samples_us", "mcoll_samples_us"}


def sig(x, digits=4):
    if isinstance(x, list):
        return [sig(v, digits) for v in x]
    return float(f"{x:.{digits}g}") if isinstance(x, float) else x


def condense_doc(doc, name=None):
    out = {k: v for k, v in doc.items() if k not in HEADER_DROP and k != "results"}
    if isinstance(out.get("mpi_library"), str):
        out["mpi_library"] = out["mpi_library"].strip().splitlines()[0]
    out["condensed"] = True
    if name:
        out["name"] = name
    rows = []
    for r in doc.get("results", []):
        rows.append({k: sig(v) for k, v in r.items() if k not in ROW_DROP})
    out["results"] = rows
    return out


def condense(src, dst):
    src = Path(src)
    if src.is_dir():
        doc = {"tool": "mcoll-bench-bundle", "format": 1, "source": src.name,
               "docs": [condense_doc(d, name) for name, d in runs.docs(src)]}
    else:
        doc = condense_doc(json.loads(src.read_text()))
    Path(dst).write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def summary(paths):
    """Markdown: per series (flavour and mode) the rows where mcoll is faster, the median
    ratio and the lowest row; then per collective the median ratio of sizes <= 4 KiB and
    above, and the lowest ratio with its size."""
    series, table, totals = [], defaultdict(dict), {}
    for p in paths:
        for _, d in runs.docs(p):
            name = f"{d['flavour']} {d.get('mode', 'back2back')}"
            series.append(name)
            rows = [r for r in d["results"] if r.get("ratio")]
            low = min(rows, key=lambda r: r["ratio"])
            totals[name] = (sum(r["ratio"] > 1 for r in rows), len(rows),
                            statistics.median(r["ratio"] for r in rows),
                            f"{low['coll']} {human(low['bytes'])} {low['ratio']:.2f}")
            by = defaultdict(list)
            for r in rows:
                by[r["coll"]].append(r)
            for coll, rs in by.items():
                small = [r["ratio"] for r in rs if r["bytes"] <= 4096]
                large = [r["ratio"] for r in rs if r["bytes"] > 4096]
                low = min(rs, key=lambda r: r["ratio"])
                table[coll][name] = (statistics.median(small) if small else None,
                                     statistics.median(large) if large else None, low)
    cell = lambda v: "-" if v is None else f"{v:.2f}"
    head = "| | " + " | ".join(series) + " |\n|---|" + "---|" * len(series) + "\n"
    lines = [head + "| rows where mcoll is faster | "
             + " | ".join(f"{totals[s][0]} of {totals[s][1]}" for s in series) + " |",
             "| median native/mcoll | " + " | ".join(f"{totals[s][2]:.2f}" for s in series) + " |",
             "| lowest row | " + " | ".join(totals[s][3] for s in series) + " |", "",
             "Per collective: median native/mcoll of sizes <= 4 KiB / above (lowest row).", "",
             head.rstrip("\n").replace("| |", "| collective |", 1)]
    for coll, per in table.items():
        cells = []
        for s in series:
            if s not in per:
                cells.append("")
                continue
            small, large, low = per[s]
            cells.append(f"{cell(small)} / {cell(large)} ({low['ratio']:.2f} at {human(low['bytes'])})")
        lines.append(f"| {coll} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("condense")
    c.add_argument("src")
    c.add_argument("-o", "--out", required=True)
    s = sub.add_parser("summary")
    s.add_argument("paths", nargs="+")
    a = ap.parse_args()
    if a.cmd == "condense":
        condense(a.src, a.out)
    else:
        print(summary(a.paths), end="")


if __name__ == "__main__":
    main()
