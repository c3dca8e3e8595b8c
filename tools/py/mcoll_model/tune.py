"""`mcoll tune`: the rules mcoll chooses algorithms by, from the calibrated model.

For every collective of the cost table, every ranks-per-node count asked for (one node)
and every node count asked for (between nodes), the cheapest algorithm by the cost
functions over message sizes, merged into size ranges whose edges are the model's
crossovers (found by bisection between grid sizes). The output is the rules JSON the
C loader reads (src/coll/rules.c; format in README "Rules"), or that JSON as the C file
of built-in rules (`--c`, src/coll/rules_builtin.c).
"""

import json

from . import cost, machine as M

# Sizes the argmin is evaluated at before bisecting the crossovers: 2^(i/2) up to this.
MAX_BYTES = 1 << 30
# The collectives whose names the rules use: the cost table's, without aliases (the
# loader gives allgatherv allgather's rules, and so on).
SKIP_NODE = {"p2p"}  # reductions in rank order over point-to-point: the restriction's fallback


def _grid():
    sizes, i = [1], 1   # (0 bytes: priced as 1; such calls do no work)
    while True:
        s = int(round(2 ** (i / 2)))
        if s > MAX_BYTES:
            return sorted(set(sizes))
        sizes.append(s)
        i += 1


def _node_costs(table, coll, m, n):
    out = {}
    for alg in table["node"][coll]:
        t = None if alg in SKIP_NODE else cost.node_cost(coll, alg, m, n, table)
        if t is not None:
            out[alg] = t
    return out


def _inter_costs(table, coll, m, n):
    env = cost.environment(m, coll, n)
    return {alg: cost.terms_us(e["terms"], m, env) for alg, e in table["inter"][coll].items()}


def _ranges(costs, tolerance=0.05):
    """[(lo, hi, alg)] over [0, inf) (hi None = no limit) from costs(n) -> {alg: µs}.
    Going up in size the algorithm in force stays while it is within `tolerance` of the
    cheapest (near-ties of the model are no reason to switch, and the rules stay few);
    the edges are bisected to the byte."""
    def best(n):
        c = costs(n)
        return min(c, key=c.get), c

    def keeps(alg, n):
        a, c = best(n)
        return alg in c and c[alg] <= (1 + tolerance) * c[a]

    grid = _grid()
    out, lo, cur = [], 0, best(grid[0])[0]
    for i in range(1, len(grid)):
        if keeps(cur, grid[i]):
            continue
        a, b = grid[i - 1], grid[i]           # cur kept at a, not at b
        while b - a > 1:
            mid = (a + b) // 2
            if keeps(cur, mid):
                a = mid
            else:
                b = mid
        out.append((lo, b, cur))
        lo, cur = b, best(b)[0]
    out.append((lo, None, cur))
    return out


def _count_ranges(values):
    """values ascending -> [(value, lo, hi)]: the rules for v cover (previous v, v]; the
    first from 1 (or 2 for ranks per node), the last up to v."""
    out, prev = [], None
    for v in values:
        out.append((v, (prev + 1) if prev is not None else None, v))
        prev = v
    return out


def tune(machine="here", ranks=(2, 4, 8), nodes=(2, 4, 8), colls=None, table=None,
         tolerance=0.05):
    """The rules document (a dict) for the machine file."""
    table = table or cost.load_table()
    base = M.load(machine)
    rules = []
    for coll in colls or list(table["node"]):
        for r, lo, hi in _count_ranges(sorted(ranks)):
            m = M.load(machine, nodes=1, ranks_per_node=r)
            sizes = _ranges(lambda n: _node_costs(table, coll, m, n), tolerance)
            if coll == "barrier":  # no bytes: its cost at any size
                sizes = [(0, None, sizes[0][2])]
            for blo, bhi, alg in sizes:
                rules.append({"coll": coll, "level": "node", "bytes": [blo, bhi],
                              "ranks_per_node": [lo if lo is not None else 2, hi], "alg": alg})
        if len(table["inter"].get(coll, {})) < 2:
            continue  # one algorithm between nodes: nothing to choose
        r = base.topo["ranks_per_node"]
        for N, lo, hi in _count_ranges(sorted(nodes)):
            m = M.load(machine, nodes=N, ranks_per_node=r)
            for blo, bhi, alg in _ranges(lambda n: _inter_costs(table, coll, m, n), tolerance):
                rules.append({"coll": coll, "level": "inter", "bytes": [blo, bhi],
                              "nodes": [lo if lo is not None else 2, hi], "alg": alg})
    return {"mcoll_rules": 1, "machine": base.name,
            "made_by": "mcoll tune --machine %s --ranks %s --nodes %s --tolerance %g" % (
                machine, ",".join(map(str, ranks)), ",".join(map(str, nodes)), tolerance),
            "_doc": "bytes [lo, hi): bcast the message, reductions the vector, the gather "
                    "family and alltoall one block; ranks_per_node and nodes inclusive; "
                    "null: no limit. First matching entry wins. README: Rules.",
            "rules": rules}


def to_json(doc):
    """One entry per line: diffs stay readable."""
    head = {k: v for k, v in doc.items() if k != "rules"}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append('  "rules": [')
    for i, e in enumerate(doc["rules"]):
        lines.append("    " + json.dumps(e) + ("," if i + 1 < len(doc["rules"]) else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def to_c(doc):
    """The rules JSON as the C file of built-in rules (parsed by the same loader)."""
    text = to_json(doc)
    out = ["/* Generated by `mcoll tune --c` (tools/py/mcoll_model/tune.py) from the cost table",
           f" * and machine file: {doc['made_by']}. Do not edit; regenerate",
           " * (tests/py/test_rules.py checks that this file is what the generator makes). */",
           '#include "coll/rules.h"', "",
           "const char mcoll__rules_builtin_json[] ="]
    for line in text.splitlines():
        out.append('    "' + line.replace("\\", "\\\\").replace('"', '\\"') + '\\n"')
    out[-1] += ";"
    return "\n".join(out) + "\n"


def table_text(doc):
    """Human-readable summary of the rules."""
    out = []
    for e in doc["rules"]:
        lo, hi = e["bytes"]
        span = e.get("ranks_per_node") or e.get("nodes")
        who = ("ppn" if "ranks_per_node" in e else "nodes") + f" {span[0]}-{span[1]}"
        out.append(f"{e['coll']:<15} {e['level']:<6} {who:<12} [{lo}, {hi if hi is not None else '-'}) "
                   f"{e['alg']}")
    return "\n".join(out)


def main(argv=None):
    import argparse
    from pathlib import Path
    ap = argparse.ArgumentParser(prog="mcoll tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", "-m", default="here",
                    help="machine JSON file or name in mcoll_model/machines (default: here)")
    ap.add_argument("--ranks", default="2,4,8", help="ranks per node to tune for (one node)")
    ap.add_argument("--nodes", default="2,4,8", help="node counts to tune the inter-node choice for")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="keep the algorithm in force while within this of the cheapest")
    ap.add_argument("-o", "--output", help="write the rules JSON here (default: stdout)")
    ap.add_argument("--c", dest="c_output", help="write the built-in rules C file here "
                    "(src/coll/rules_builtin.c)")
    ap.add_argument("--table", action="store_true", help="print the rules as a table")
    a = ap.parse_args(argv)
    ints = lambda text: [int(x) for x in text.split(",") if x]
    doc = tune(a.machine, ints(a.ranks), ints(a.nodes), tolerance=a.tolerance)
    if a.c_output:
        Path(a.c_output).write_text(to_c(doc))
    if a.output:
        Path(a.output).write_text(to_json(doc))
    if a.table:
        print(table_text(doc))
    elif not a.output and not a.c_output:
        print(to_json(doc), end="")
    return 0
