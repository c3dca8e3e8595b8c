"""`mcoll tune`: the rules mcoll chooses algorithms by, from the calibrated model.

For every collective of the cost table, every ranks-per-node count asked for (one node)
and every node count asked for (between nodes), the cheapest algorithm by the cost
functions over message sizes, merged into size ranges whose edges are the model's
crossovers (found by bisection between grid sizes). The output is the rules JSON the
C loader reads (src/coll/rules.c; format in docs/model.md, "Rules"), or that JSON as the C file
of built-in rules (`--c`, src/coll/rules_builtin.c).
"""

import json
from pathlib import Path

from . import corrections, cost, machine as M

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


def _node_costs(table, coll, m, n, mode="latency"):
    out = {}
    for alg in table["node"][coll]:
        t = None if alg in SKIP_NODE else cost.node_cost(coll, alg, m, n, table, mode=mode)
        if t is not None:
            out[alg] = t
    return out


def _node_regrets(table, coll, m, n, modes):
    """With one mode its costs; with several (corrections measured back to back as well
    as in latency mode) each algorithm's worst ratio to the cheapest over the modes: an
    algorithm that wins one mode and loses the other by more keeps its price there (at
    2 ranks single copy at 4 KiB is 1.4x faster with a barrier after every call and 2.4x
    slower back to back, where the areas let the root run ahead)."""
    if len(modes) == 1:
        return _node_costs(table, coll, m, n, modes[0])
    regret = {}
    for mode in modes:
        c = _node_costs(table, coll, m, n, mode)
        best = min(c.values())
        for alg, t in c.items():
            regret[alg] = max(regret.get(alg, 0.0), t / best)
    return regret


def _inter_costs(table, coll, m, n):
    env = cost.environment(m, coll, n)
    return {alg: cost.inter_us(e, m, env) for alg, e in table["inter"][coll].items()}


PRIOR = Path(__file__).resolve().parent / "rules_prior.json"


def prior_pick(rules, coll, level, n, count, pinned=False):
    """The algorithm a rules list gives (first match), or None; count: ranks per node
    (node) or nodes (inter). pinned: only from an entry marked "pinned" (a choice the
    model cannot price, with the reason; the model keeps it whatever its prices)."""
    key = "ranks_per_node" if level == "node" else "nodes"
    for e in rules:
        if e["coll"] != coll or e.get("level", "node") != level:
            continue
        lo, hi = e.get("bytes", [0, None])
        clo, chi = e.get(key, [0, None])
        if lo <= n and (hi is None or n < hi) and clo <= count and (chi is None or count <= chi):
            return e["alg"] if not pinned or e.get("pinned") else None
    return None


def _ranges(costs, tolerance=0.05, prior=None, pinned=None):
    """[(lo, hi, alg)] over [0, inf) (hi None = no limit) from costs(n) -> {alg: µs}.
    With prior(n) (today's choice): it stays wherever the model prices it within
    `tolerance` of the cheapest (the model is not sure enough there to change it), else
    the cheapest. Without: going up in size the algorithm in force stays while within
    `tolerance` of the cheapest (near-ties of the model are no reason to switch, and the
    rules stay few). pinned(n): an algorithm kept whatever the prices. The edges are
    bisected to the byte."""
    tol = tolerance if callable(tolerance) else (lambda n: tolerance)

    def choice(n, cur):
        c = costs(n)
        if pinned and pinned(n) in c:
            return pinned(n)
        best = min(c, key=c.get)
        keep = prior(n) if prior else cur
        return keep if keep in c and c[keep] <= (1 + tol(n)) * c[best] else best

    grid = _grid()
    out, lo = [], 0
    cur = choice(grid[0], None)
    for i in range(1, len(grid)):
        nxt = choice(grid[i], cur)
        if nxt == cur:
            continue
        a, b = grid[i - 1], grid[i]           # cur chosen at a, not at b
        while b - a > 1:
            mid = (a + b) // 2
            if choice(mid, cur) == cur:
                a = mid
            else:
                b = mid
        out.append((lo, b, cur))
        lo, cur = b, choice(b, cur)
    out.append((lo, None, cur))
    merged = []
    for r in out:
        if merged and merged[-1][2] == r[2]:
            merged[-1] = (merged[-1][0], r[1], r[2])
        else:
            merged.append(r)
    return merged


# An erroneous bcast whose ranks pass different counts (the root more or fewer bytes than
# the others) is answered with the host MPI's error classes only when every rank picks
# the same algorithm: ranks on both sides of an edge run different protocols and hang.
# tests/py/test_mismatch.py checks counts b and 2b for these b; bcast edges are kept off
# (b, 2b] by moving them to 2b + 1 (the smaller count's algorithm goes on through 2b).
MISMATCH_WINDOWS = [(b, 2 * b) for b in (8, 1024, 65536, 1 << 20)]


def _off_windows(ranges, windows):
    """ranges [(lo, hi, alg)] with every edge inside a window (lo, hi] moved past it."""
    def moved(edge):
        for lo, hi in windows:
            if lo < edge <= hi:
                return hi + 1
        return edge
    out = []
    for lo, hi, alg in ranges:
        lo = moved(lo) if out else lo
        hi = moved(hi) if hi is not None else None
        if hi is not None and hi <= lo:
            continue  # swallowed by the window: the range below runs on
        if out and out[-1][2] == alg:
            out[-1] = (out[-1][0], hi, alg)
        elif out and out[-1][1] != lo:
            out[-1] = (out[-1][0], lo, out[-1][2])
            out.append((lo, hi, alg))
        else:
            out.append((lo, hi, alg))
    return out


def _calibrated_up_to(m, coll):
    """The largest size the machine's corrections measured coll at, when they were
    measured at its rank count on one node (fit.py); else None."""
    corr = corrections.for_machine(m)
    if not corr:
        return None
    sizes = [n for pts in corr["factors"].get(coll, {}).values() for n, _ in pts]
    if coll == "barrier" and sizes:
        return float("inf")  # no bytes: measured is measured at any size
    return max(sizes) if sizes else None


def _count_ranges(values):
    """values ascending -> [(value, lo, hi)]: the rules for v cover (previous v, v]; the
    first from 1 (or 2 for ranks per node), the last up to v."""
    out, prev = [], None
    for v in values:
        out.append((v, (prev + 1) if prev is not None else None, v))
        prev = v
    return out


def tune(machine="here", ranks=(2, 4, 8), nodes=(2, 4, 8), colls=None, table=None,
         tolerance=0.05, prior=None, calibrated_tolerance=None, net=None, net_tolerance=None):
    """The rules document (a dict) for the machine file; prior: a rules file of today's
    choices the model overrides only where it prices another algorithm cheaper by more
    than the tolerance (calibrated_tolerance, when given, at the rank count the machine's
    corrections were measured at). net: a machine file whose net section (a link
    calibrated across hosts) prices the choice between nodes, with net_tolerance there."""
    table = table or cost.load_table()
    prior_rules = json.loads(Path(prior).read_text())["rules"] if prior else None

    def prior_for(coll, level, count, pinned=False):
        if not prior_rules:
            return None
        return lambda n: prior_pick(prior_rules, coll, level, n, count, pinned)
    base = M.load(machine)
    net_machine = M.load(net) if net else None
    net_section = net_machine.net if net else None
    # a link calibrated on test hosts that share one machine's cores prices that too
    shared_cores = net_machine.topo.get("machine_cores") if net else None
    inter_tolerance = net_tolerance if net and net_tolerance is not None else tolerance
    rules = []
    for coll in colls or list(table["node"]):
        for r, lo, hi in _count_ranges(sorted(ranks)):
            m = M.load(machine, nodes=1, ranks_per_node=r)
            # the calibrated tolerance up to the largest measured size: beyond it the
            # corrections are extrapolated
            top = _calibrated_up_to(m, coll) if calibrated_tolerance is not None else None
            tol = tolerance if top is None else \
                (lambda n, top=top: calibrated_tolerance if n <= top else tolerance)
            modes = corrections.modes_for(m) if top is not None else ["latency"]
            sizes = _ranges(lambda n, m=m, modes=modes: _node_regrets(table, coll, m, n, modes), tol,
                            prior_for(coll, "node", r), prior_for(coll, "node", r, pinned=True))
            if coll == "barrier":  # no bytes: its cost at any size
                sizes = [(0, None, sizes[0][2])]
            if coll == "bcast":
                sizes = _off_windows(sizes, MISMATCH_WINDOWS)
            # the node's shape the model priced: its cores (the thresholds it replaces
            # depend on ranks > cores) and, with one socket, no levels
            shape = {"oversubscribed": r > m.topo["cores_per_node"]}
            if m.topo.get("sockets_per_node", 1) == 1:
                shape["levels"] = [0, 0]
            for blo, bhi, alg in sizes:
                rules.append({"coll": coll, "level": "node", "bytes": [blo, bhi],
                              "ranks_per_node": [lo if lo is not None else 2, hi], **shape,
                              "alg": alg})
        if len(table["inter"].get(coll, {})) < 2:
            continue  # one algorithm between nodes: nothing to choose
        r = base.topo["ranks_per_node"]
        for N, lo, hi in _count_ranges(sorted(nodes)):
            m = M.load(machine, nodes=N, ranks_per_node=r)
            if net_section:
                m.net = m.data["net"] = dict(net_section)
            if shared_cores:
                m.topo["machine_cores"] = shared_cores
            for blo, bhi, alg in _ranges(lambda n, m=m: _inter_costs(table, coll, m, n), inter_tolerance,
                                         prior_for(coll, "inter", N)):
                rules.append({"coll": coll, "level": "inter", "bytes": [blo, bhi],
                              "nodes": [lo if lo is not None else 2, hi], "alg": alg})
    return {"mcoll_rules": 1, "machine": base.name,
            "made_by": "mcoll tune --machine %s --ranks %s --nodes %s --tolerance %g%s%s" % (
                machine, ",".join(map(str, ranks)), ",".join(map(str, nodes)), tolerance,
                " --prior " + Path(prior).name if prior else "",
                " --calibrated-tolerance %g" % calibrated_tolerance
                if calibrated_tolerance is not None else "") + (
                " --net %s --net-tolerance %g" % (net, inter_tolerance) if net else ""),
            "_doc": "bytes [lo, hi): bcast the message, reductions the vector, the gather "
                    "family and alltoall one block; ranks_per_node, nodes and levels inclusive; "
                    "null: no limit; oversubscribed: more ranks than cores on the node. "
                    "First matching entry wins. docs/model.md: Rules.",
            "rules": rules}


# The built-in rules: today's thresholds (the prior), changed where the model prices
# another algorithm cheaper by more than a tolerance.
# - Where the machine file's corrections were measured (2 ranks on one node here: every
#   algorithm forced at every size, fit.py), the corrected model is within the noise of
#   the measurements: it changes a choice that is more than 10% slower (the target).
# - Elsewhere (4 and 8 ranks, between nodes) the uncorrected model is 1.5-5x off for
#   algorithms priced outside the sizes where they ran (bench/records/rules/): there
#   only a 3x cheaper price changes a measured choice.
# - Between nodes: the link measured across test hosts (machines/testhosts_1gbit.json,
#   1 Gbit/s tbf links), on which the model predicts the cluster rows at 2 hosts within
#   20% (bench/records/network-model/); it changes a threshold's algorithm that it prices
#   more than 10% dearer.
BUILTIN_TOLERANCE = 2.0
BUILTIN_CALIBRATED_TOLERANCE = 0.10
BUILTIN_NET = "testhosts_1gbit"
BUILTIN_NET_TOLERANCE = 0.10


def builtin():
    return tune("here", (2, 4, 8), (2, 4, 8), tolerance=BUILTIN_TOLERANCE, prior=PRIOR,
                calibrated_tolerance=BUILTIN_CALIBRATED_TOLERANCE, net=BUILTIN_NET,
                net_tolerance=BUILTIN_NET_TOLERANCE)


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


def json_from_c(text):
    """The JSON text inside a file to_c made (the built-in rules)."""
    import re
    parts = re.findall(r'^\s*"((?:[^"\\]|\\.)*)";?$', text, re.M)
    return "".join(bytes(p, "utf-8").decode("unicode_escape") for p in parts)


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
    ap.add_argument("--tolerance", type=float, default=BUILTIN_TOLERANCE,
                    help="keep the prior's algorithm (without a prior: the one in force at the "
                    "size below) while within this fraction of the cheapest (default %(default)s)")
    ap.add_argument("--prior", default=str(PRIOR),
                    help="rules of today's choices the model overrides only beyond the tolerance "
                    "(default: mcoll_model/rules_prior.json, the parameter table's thresholds); "
                    "'none': the model alone")
    ap.add_argument("--calibrated-tolerance", type=float, default=BUILTIN_CALIBRATED_TOLERANCE,
                    help="the tolerance at the rank count the machine's corrections were "
                    "measured at (mcoll model fit; default %(default)s)")
    ap.add_argument("--net", default=BUILTIN_NET,
                    help="machine file whose net section (a link measured across hosts by "
                    "mcoll-bench --calibrate) prices the choice between nodes (default: "
                    "%(default)s, as the built-in rules; 'none': the machine's own)")
    ap.add_argument("--net-tolerance", type=float, default=BUILTIN_NET_TOLERANCE,
                    help="the tolerance between nodes with --net (default %(default)s)")
    ap.add_argument("-o", "--output", help="write the rules JSON here (default: stdout)")
    ap.add_argument("--c", dest="c_output", help="write the built-in rules C file here "
                    "(src/coll/rules_builtin.c)")
    ap.add_argument("--table", action="store_true", help="print the rules as a table")
    a = ap.parse_args(argv)
    ints = lambda text: [int(x) for x in text.split(",") if x]
    doc = tune(a.machine, ints(a.ranks), ints(a.nodes), tolerance=a.tolerance,
               prior=None if a.prior == "none" else a.prior,
               calibrated_tolerance=a.calibrated_tolerance, net=None if a.net == "none" else a.net,
               net_tolerance=a.net_tolerance)
    if a.c_output:
        Path(a.c_output).write_text(to_c(doc))
    if a.output:
        Path(a.output).write_text(to_json(doc))
    if a.table:
        print(table_text(doc))
    elif not a.output and not a.c_output:
        print(to_json(doc), end="")
    return 0
