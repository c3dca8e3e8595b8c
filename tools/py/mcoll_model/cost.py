"""Evaluate cost_table.json: the cost of each mcoll algorithm on a machine.

The table is data (expressions over a few variables, terms of a few kinds) so that the
C side can be generated from the same file; this module is its only interpreter here.
"""

import ast
import json
import math
import operator
from pathlib import Path

from . import corrections, formulas as F

TABLE_PATH = Path(__file__).resolve().parent / "cost_table.json"

# mcoll-bench's "bytes": the per-rank block of these; the model's n is their whole vector
PER_RANK_VECTOR = {"reduce_scatter", "reduce_scatter_block"}


def model_bytes(coll, nbytes, nprocs):
    return nbytes * nprocs if coll in PER_RANK_VECTOR else nbytes

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
           ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCS = {"lg": F.lg, "ceil": math.ceil, "sqrt": math.sqrt, "min": min, "max": max}


def evaluate(expr, env):
    """Arithmetic, comparisons, and/or/not, and the functions lg/ceil/sqrt/min/max over env;
    nothing else (the table is data, not code)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise NameError(f"unknown variable {node.id!r} in {expr!r}")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not ev(node.operand)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right in zip(node.ops, node.comparators):
                r = ev(right)
                if not _CMPOPS[type(op)](left, r):
                    return False
                left = r
            return True
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _FUNCS and not node.keywords):
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ValueError(f"not allowed in a cost expression: {ast.dump(node)} in {expr!r}")
    return ev(ast.parse(str(expr), mode="eval"))


def load_table(path=TABLE_PATH):
    return json.loads(Path(path).read_text())


def canonical(coll, table):
    return table["aliases"].get(coll, coll)


def environment(machine, coll, nbytes):
    t, nd = machine.topo, machine.node
    r, N = t["ranks_per_node"], t["nodes"]
    llc, c = t["llc_bytes"], max(1, t["ranks_per_node"])
    tile = nd["tile"] or max(4096, llc // 2 // (c * c))      # c*c*tile <= LLC/2, as mcoll does
    return {"n": float(nbytes), "r": r, "N": N, "P": r * N, "S": t.get("sockets_per_node", 1),
            "chunk": nd["chunk"], "cma_chunk": nd["cma_chunk"], "k": nd["bcast_k"],
            "tile": tile, "slot_max": nd.get("slot_max", 512), "area": nd.get("area", 4 << 20),
            "cma": bool(nd.get("cma", True))}


def term_us(term, machine, env):
    if term[0] == "overlap":
        return max(terms_us(term[1], machine, env), terms_us(term[2], machine, env))
    kind, args = term[0], [evaluate(a, env) for a in term[1:]]
    if kind == "sync":
        return args[0] * machine.sync_us()
    if kind == "allsync":
        return args[0] * machine.allsync_us()
    if kind == "copy":
        return machine.copy_us(args[0], args[1])
    if kind == "xcopy":
        return machine.xcopy_us(args[0], args[1])
    if kind == "copy_cached":
        return machine.copy_us(args[0], args[1], cached=True)
    if kind == "cma":
        return machine.cma_us(*args)
    if kind == "fold":
        return machine.fold_us(*args)
    if kind == "p2p":
        return machine.level_msg_us("node", *args)
    if kind == "net":
        return machine.net_msg_us(*args)
    if kind == "net_x":
        return machine.net_exchange_us(*args)
    if kind == "net_a2a":
        messages, k = args
        if messages <= 0:
            return 0.0
        net = machine.net
        wait = F.contention_step(k, machine.hops(), machine.rho(env["P"]), net["switch_radix"],
                                 net["packet_bits"], net["cycle_ns"] * 1e-3)
        # The NIC serialises the node's messages: each occupies it for its gap (seed 002
        # takes the whole latency, gap_us absent) plus its bytes plus its queueing wait.
        if net.get("link_curve"):
            # A calibrated link: the NIC moves each message at its sustained rate; the
            # first one's latency (the link's one way at k bytes, plus the exchange's,
            # since the messages go both ways at once) shows where the rate does not
            # hide it.
            each = k * machine.net_beta_us() + wait
            latency = machine.net_exchange_us(1, k) - k * machine.net_beta_us()
            return messages * each + max(0.0, latency)
        gap = net.get("gap_us", net["alpha_us"])
        return net["alpha_us"] - gap + messages * (gap + k * machine.net_beta_us() + wait)
    raise ValueError(f"unknown term kind {kind!r}")


def terms_us(terms, machine, env):
    return sum(term_us(t, machine, env) for t in terms)


def node_terms_us(terms, machine, env):
    return machine.call_us() + terms_us(terms, machine, env)


def algorithms(coll, table=None):
    table = table or load_table()
    c = canonical(coll, table)
    return list(table["node"][c]), list(table["inter"].get(c, {}))


def node_cost(coll, alg, machine, nbytes, table=None, corrected=True, mode="latency"):
    """The node phase of algorithm alg (None if its needs do not hold here). On one node
    at the rank count the machine file's corrections were measured at, times the
    algorithm's correction there in mode (fit.py), unless corrected=False."""
    table = table or load_table()
    c = canonical(coll, table)
    entry = table["node"][c][alg]
    env = environment(machine, c, nbytes)
    if machine.topo["ranks_per_node"] < 2:
        return 0.0
    if "needs" in entry and not evaluate(entry["needs"], env):
        return None
    t = node_terms_us(entry["terms"], machine, env)
    if corrected:
        corr = corrections.for_machine(machine, mode)
        if corr:
            t *= corrections.factor(corr, c, alg, 0 if c == "barrier" else nbytes)
    return t


def inter_steps(terms, env):
    """The dependent steps of an inter-node algorithm: its messages one after the other
    (net), its exchange rounds (net_x), and for an exchange of all with all (net_a2a)
    one per other node, each of which must have run."""
    steps = 0.0
    for term in terms:
        if term[0] == "overlap":
            steps += max(inter_steps(term[1], env), inter_steps(term[2], env))
        elif term[0] in ("net", "net_x"):
            steps += evaluate(term[1], env)
        elif term[0] == "net_a2a":
            steps += env["N"] - 1
    return steps


def inter_us(entry, machine, env):
    """An inter-node algorithm's time: its terms, and on nodes that share oversubscribed
    cores each dependent step's wait for its peer (machine.shared_step_wait_us)."""
    t = terms_us(entry["terms"], machine, env)
    wait = machine.shared_step_wait_us()
    return t + wait * inter_steps(entry["terms"], env) if wait else t


def costs(coll, machine, nbytes, table=None):
    """Every (node algorithm, inter-node algorithm) with its predicted time in µs, cheapest
    first; the inter-node algorithm is None on one node."""
    table = table or load_table()
    c = canonical(coll, table)
    env = environment(machine, c, nbytes)
    N = machine.topo["nodes"]
    out = []
    inter = table["inter"].get(c, {}) if N > 1 else {}
    extra = terms_us(table["multi_node"].get(c, []), machine, env) if N > 1 else 0.0
    for alg in table["node"][c]:
        t_node = node_cost(c, alg, machine, nbytes, table)
        if t_node is None:
            continue
        if not inter:
            out.append((t_node, alg, None))
            continue
        for ialg, ientry in inter.items():
            t_inter = inter_us(ientry, machine, env)
            total = max(t_node, t_inter) if ientry.get("overlap") else t_node + t_inter
            out.append((total + extra, alg, ialg))
    out.sort(key=lambda x: x[0])
    return out


def choose(coll, machine, nbytes, table=None):
    """The cheapest (time µs, node algorithm, inter-node algorithm)."""
    return costs(coll, machine, nbytes, table)[0]
