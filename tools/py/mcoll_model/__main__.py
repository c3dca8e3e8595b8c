"""Command line: python3 -m mcoll_model (or bin/mcoll model) reproduce-002 | predict |
compare | fit | gen-c | algorithms."""

import argparse
import json
import sys
from pathlib import Path

from . import compare as C, cost, fit, gen_c, machine as M, predict as P, seed002


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["fit"]:  # its own parser (fit.py)
        return fit.main(argv[1:])
    ap = argparse.ArgumentParser(prog="mcoll model", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("reproduce-002", help="seed 002's tables 5 and 6 against our evaluation")
    rp.add_argument("--rho", choices=["fit", "paper"], default="fit",
                    help="fit: rho derived from the measured column (default); paper: the "
                    "loads the paper's new-model column implies (checks the formula alone)")
    pr = sub.add_parser("predict", help="predicted times at a scale and topology from a machine file")
    pr.add_argument("--machine", "-m", help="machine JSON file or name in mcoll_model/machines "
                    "(e.g. fat_tree_256x32, here, bxj); default: built-in defaults")
    pr.add_argument("--coll", "-c", action="append", help="collective (repeatable; default: all)")
    pr.add_argument("--sizes", "-s", default=None, help="comma-separated bytes, e.g. 8,4K,1M")
    pr.add_argument("--nodes", type=int, help="override the file's topology.nodes")
    pr.add_argument("--ppn", type=int, help="override topology.ranks_per_node")
    pr.add_argument("--cores", type=int, help="override topology.cores_per_node")
    pr.add_argument("--json", action="store_true", help="print JSON rows")
    co = sub.add_parser("compare", help="prediction vs. a mcoll-bench results JSON")
    co.add_argument("--machine", "-m", required=True, help="machine JSON file or name")
    co.add_argument("--results", "-r", required=True, nargs="+", help="mcoll-bench JSON file(s)")
    co.add_argument("--md", help="write the markdown table here (several results: appended)")
    co.add_argument("--png", help="write the plot here (first results file)")
    co.add_argument("--nodes", type=int, default=1,
                    help="hosts the results' jobs spanned (ranks spread evenly; default 1)")
    co.add_argument("--choice", choices=("rules", "built-in", "cheapest"), default="rules",
                    help="between nodes, price what mcoll runs (default: the built-in rules, "
                         "bcast's tree where the nodes share one machine's cores), the "
                         "built-in rules alone (runs recorded before that) or the model's "
                         "own cheapest algorithm")
    sub.add_parser("fit", help="per-algorithm corrections from forced measurements (fit.py)")
    gc = sub.add_parser("gen-c", help="C cost functions generated from cost_table.json")
    gc.add_argument("-o", "--output", help="write here (default: stdout)")
    al = sub.add_parser("algorithms", help="list the cost table's algorithms")
    al.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    if a.cmd == "reproduce-002":
        out, fits = seed002.reproduce(rho_source=a.rho)
        print(seed002.report(out, fits, a.rho))
        return 0
    if a.cmd == "predict":
        m = M.load(a.machine, nodes=a.nodes, ranks_per_node=a.ppn, cores_per_node=a.cores)
        sizes = [P.parse_size(s) for s in a.sizes.split(",")] if a.sizes else None
        table = cost.load_table()
        for c in a.coll or []:
            if cost.canonical(c, table) not in table["node"]:
                ap.error(f"unknown collective {c}")
        rows = P.predict(m, a.coll, sizes, table)
        print(json.dumps(rows, indent=1) if a.json else P.report(m, rows))
        return 0
    if a.cmd == "compare":
        texts = []
        for i, path in enumerate(a.results):
            doc, m, rows = C.compare(a.machine, path, nodes=a.nodes, choice=a.choice)
            texts.append(C.markdown(doc, m, rows))
            if a.png and i == 0:
                C.plot(rows, a.png, f"model vs. measured, {doc.get('flavour')} "
                       f"{doc['nprocs']} ranks {doc.get('mode')}")
            _, overall = C.summary(rows)
            print(f"{path}: {len(rows)} rows, median |error| {100 * overall:.1f}%")
        if a.md:
            Path(a.md).write_text("\n".join(texts))
        return 0
    if a.cmd == "gen-c":
        text = gen_c.generate()
        if a.output:
            Path(a.output).write_text(text)
        else:
            print(text, end="")
        return 0
    if a.cmd == "algorithms":
        t = cost.load_table()
        if a.json:
            print(json.dumps({"node": {c: list(v) for c, v in t["node"].items()},
                              "inter": {c: list(v) for c, v in t["inter"].items()}}, indent=1))
        else:
            for c in t["node"]:
                print(f"{c:<15} node: {', '.join(t['node'][c])}; between nodes: "
                      f"{', '.join(t['inter'].get(c, {}))}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
