"""`mcoll model predict`: predicted times of the collectives on a machine file at any
scale, with the algorithms the cheapest cost function picks there."""

from . import cost

COLLS = ["barrier", "bcast", "reduce", "allreduce", "reduce_scatter", "scan", "exscan",
         "allgather", "gather", "scatter", "alltoall"]
DEFAULT_SIZES = [8, 1024, 65536, 1 << 20]


def parse_size(text):
    t = text.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if t and t[-1] in mult:
        return int(float(t[:-1]) * mult[t[-1]])
    return int(t)


def fmt_size(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def predict(machine, colls=None, sizes=None, table=None):
    """Rows {coll, bytes, us, node_alg, inter_alg, runner_up, runner_up_us}."""
    table = table or cost.load_table()
    rows = []
    for coll in colls or COLLS:
        for n in (sizes or DEFAULT_SIZES):
            if coll == "barrier" and rows and rows[-1]["coll"] == "barrier":
                continue
            ranked = cost.costs(coll, machine, 0 if coll == "barrier" else n, table)
            best = ranked[0]
            second = next((c for c in ranked[1:] if c[1] != best[1]), None)
            rows.append({"coll": coll, "bytes": 0 if coll == "barrier" else n, "us": best[0],
                         "node_alg": best[1], "inter_alg": best[2],
                         "runner_up": (second[1] + (f"+{second[2]}" if second[2] else ""))
                         if second else None,
                         "runner_up_us": second[0] if second else None})
    return rows


def report(machine, rows):
    t = machine.topo
    lines = [f"machine: {machine.name}: {t['nodes']} nodes x {t['ranks_per_node']} ranks "
             f"({t['cores_per_node']} cores per node), NIC {machine.net['nic_MBps']:g} MB/s, "
             f"alpha {machine.net['alpha_us']:g} µs, rho {machine.rho(t['nodes'] * t['ranks_per_node']):.3f}"]
    head = f"{'collective':<15} {'bytes':>6} {'predicted µs':>14}  {'node algorithm':<14} {'between nodes':<22} next best (µs)"
    lines += [head, "-" * len(head)]
    for r in rows:
        ru = f"{r['runner_up']} ({r['runner_up_us']:.4g})" if r["runner_up"] else "-"
        lines.append(f"{r['coll']:<15} {fmt_size(r['bytes']):>6} {r['us']:>14.4g}  {r['node_alg']:<14}"
                     f" {r['inter_alg'] or '-':<22} {ru}")
    return "\n".join(lines)
