"""The corrections of the node cost functions that `mcoll model fit` (fit.py) wrote into a
machine file: which entry applies to a machine and mode, and the factor of one algorithm
at one size (interpolated in log(size) between measured sizes, the nearest beyond them).
Below the cost functions, which apply them (cost.node_cost)."""

import bisect
import math


def mode_of(entry):
    return entry.get("mode", "latency")


def for_machine(machine, mode="latency"):
    """The corrections measured in mode at the machine's rank count on one node, or None."""
    if machine.topo["nodes"] != 1:
        return None
    for entry in machine.data.get("corrections") or []:
        if entry["ranks_per_node"] == machine.topo["ranks_per_node"] and mode_of(entry) == mode:
            return entry
    return None


def modes_for(machine):
    """The modes the machine's corrections were measured in at its rank count (latency
    first), or ["latency"] when there are none."""
    found = [mode_of(e) for e in machine.data.get("corrections") or []
             if machine.topo["nodes"] == 1 and e["ranks_per_node"] == machine.topo["ranks_per_node"]]
    return sorted(set(found) | {"latency"}, key=lambda m: (m != "latency", m))


def factor(corrections, coll, alg, nbytes):
    """The interpolated correction (1 where there is none)."""
    pts = corrections["factors"].get(coll, {}).get(alg)
    if not pts:
        return 1.0
    xs = [math.log2(max(n, 1)) for n, _ in pts]
    x = math.log2(max(nbytes, 1))
    i = bisect.bisect_left(xs, x)
    if i == 0:
        return pts[0][1]
    if i == len(xs):
        return pts[-1][1]
    w = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return math.exp((1 - w) * math.log(pts[i - 1][1]) + w * math.log(pts[i][1]))
