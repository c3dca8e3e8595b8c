"""Machine files: the parameters the cost functions read, as JSON.

Schema (every key optional unless marked; times in µs, bandwidths in GB/s = 1e9 B/s
unless the key says MBps = 1e6 B/s; defaults in DEFAULTS below):

    {
      "name": "text", "source": "where the numbers come from",
      "topology": {
        "nodes": N,                 # nodes in the job
        "ranks_per_node": r,        # MPI ranks on each node
        "cores_per_node": C,        # r > C: oversubscribed, a synchronisation costs a scheduler turn
        "sockets_per_node": S,
        "llc_bytes": B,             # last-level cache shared by the ranks of a socket
        "machine_cores": M          # the nodes share one machine's M cores (test hosts:
                                    # --calibrate writes it when every host runs on one
                                    # kernel); absent: each node has its own cores
      },
      "levels": {                   # ping-pong alpha/beta per level of the hierarchy (calibrated)
        "core":   {"alpha_us": a, "GBps": b},   # two ranks on one core
        "cache":  {...},                        # two cores sharing the last-level cache
        "socket": {...},                        # across sockets of a node
        "node":   {...}                         # host MPI point-to-point inside the node
      },
      "node": {
        "sync_us": t,               # one flag hand-off between two cores (a cache line moving)
        "sched_turn_us": t,         # a hand-off when ranks share a core (a scheduler turn);
                                    # with r ranks on c cores a synchronisation of all costs
                                    # (r/c - 1) of them
        "memcpy_GBps": b,           # one copier, buffers beyond the cache
        "memcpy_curve": {"sizes": [...], "GBps": [...]},
                                    # one copier by size (calibrated); when present it
                                    # sets a copy's speed, memory contention applying where
                                    # it is down to memcpy_GBps
        "cache_copy_GBps": b,       # one copier, working set inside the last-level cache
        "mem_GBps": [[c, B], ...],  # aggregate copy bandwidth with c concurrent copiers
                                    # (seed 000 §3.2: copiers share the memory controllers);
                                    # between points linear, beyond the last flat
        "cma_call_us": t,           # process_vm_readv/writev fixed cost per call
        "cma_GBps": b,              # single-copy bandwidth, one reader
        "cma_curve": {"sizes": [...], "us": [...]},
                                    # one process_vm_readv by size (calibrated); when
                                    # present it sets single copies and copies out of a
                                    # peer's area (xcopy: the same cache lines crossing)
        "call_us": t,               # fixed cost of entering a collective
        "xfer_curve": {"sizes": [...], "us": [...]},
                                    # write n bytes, hand them over with a flag, the other
                                    # core copies them out: one way, by size (calibrated)
        "cma_pair_slowdown": f,     # a read with both ranks reading each other at once,
                                    # against one alone (or "cross_slowdown": [[c, f], ...])
        "fold_GBps": b,             # reduction (sum of doubles) reading two inputs, one core
        "fold_curve": {"sizes": [...], "GBps": [...]},   # the same by size (calibrated)
        "chunk": 65536, "cma_chunk": 262144, "bcast_k": 2, "tile": 0,
        "shared_step_us": w         # with machine_cores and more ranks P than those M
                                    # cores: a step between nodes waits w P/M for its
                                    # peer to be scheduled (busy-polling ranks hold a core
                                    # until preempted); fitted, see shared_step_wait_us
      },
      "net": {                      # between nodes (host MPI point-to-point)
        "alpha_us": a, "nic_MBps": b,      # latency, one-way bandwidth of a node's NIC
        "link_curve": {"sizes": [...], "us": [...]},
                                           # one way by size between two hosts (--calibrate
                                           # across hosts): prices each net message
        "stream_curve": {"sizes": [...], "us": [...]},
                                           # per message, sent back to back one way (the
                                           # token bucket of a shaped link drained):
                                           # nic_MBps is its slope; a message costs at
                                           # least its bytes at nic_MBps
        "exchange_us": x,                  # an 8 B exchange timed as latency mode times a
                                           # call (--calibrate across hosts): a net_x round
                                           # and an alltoall pay it beyond the one way
        "gap_us": g,                       # NIC time per message when many are queued
                                           # (LogGP's g; absent: alpha, as seed 002 counts)
        "switch_radix": 16, "hops": 3, "packet_bits": 256, "cycle_ns": 3.2,
        "fat_tree_levels": L,              # instead of hops: a fat tree of L levels of
                                           # radix-port switches, radix/2 nodes per leaf;
                                           # hops = the mean over a node's peers (1 under
                                           # its leaf, 3 across a 2-level tree, ...)
        "rho": 0.6 | {"law": "power", "x0": x, "p0": p, "gamma": g}
                                    # injection probability per cycle at a switch input
                                    # (seed 002 eq. 3); the law: rho/(1-rho) = x0 (P/p0)^gamma
                                    # for P ranks in the job; absent: nic/link bandwidth
      },
      "corrections": [              # per algorithm, measured / modelled (mcoll model fit)
        {"ranks_per_node": r, "mode": "latency" | "back2back" (absent: latency),
         "runs": ["tools/py/mcoll_model/calibration/..."], "factors": {coll: {alg: [[bytes, factor], ...]}}}
      ]
    }
"""

import copy
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
MACHINES = HERE / "machines"

# A step between test hosts when their ranks oversubscribe the machine they share, per
# P/M (P ranks on M cores): the wait grows about as P/M (bench/records/net8/: about 4 ms
# a step at 4 ranks, 8-9 ms at 8 on 2 cores); 1500 fits bench/records/cluster-4/'s
# oversubscribed 1 Gbit/s rows best (median |error| 26%, against 31% with the former
# 5400 (1 - M/P)); bench/records/net9/.
SHARED_STEP_US = 1500.0


# Uncalibrated defaults: numbers of the order of this project's 2-core test machine
# (docs/architecture.md, the machine: single copy ~10 GB/s, a flag hand-off ~0.1 µs, a scheduler turn ~5 µs).
DEFAULTS = {
    "name": "defaults",
    "topology": {"nodes": 1, "ranks_per_node": 2, "cores_per_node": 2,
                 "sockets_per_node": 1, "llc_bytes": 32 << 20},
    "levels": {},
    "node": {"sync_us": 0.1, "sched_turn_us": 5.0, "memcpy_GBps": 10.0,
             "cache_copy_GBps": 25.0, "mem_GBps": [[1, 10.0], [2, 16.0], [4, 20.0]],
             "cma_call_us": 0.5, "cma_GBps": 10.0, "fold_GBps": 8.0,
             "chunk": 65536, "cma_chunk": 262144, "bcast_k": 2, "tile": 0,
             "shared_step_us": SHARED_STEP_US},
    "net": {"alpha_us": 2.0, "nic_MBps": 10000, "switch_radix": 16, "hops": 3,
            "packet_bits": 256, "cycle_ns": 3.2},
}


def _merge(base, over):
    out = copy.deepcopy(base)
    for key, val in over.items():
        if val is None:         # a calibration that could not measure it: keep the default
            continue
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], val)
        else:
            out[key] = val
    return out


def resolve(path):
    """A machine file by path, or by name in the package's machines/ folder."""
    p = Path(path)
    if p.exists():
        return p
    named = MACHINES / (str(path) + ".json")
    if named.exists():
        return named
    raise FileNotFoundError(f"no machine file {path} (nor {named})")


def load(path=None, **topology):
    """The machine of a file (None: the defaults), with topology keys overridden."""
    data = json.loads(resolve(path).read_text()) if path else {}
    m = Machine(_merge(DEFAULTS, data))
    for key, val in topology.items():
        if val is not None:
            m.data["topology"][key] = val
    return m


def _loglog_us(curve, nbytes):
    """A calibrated {"sizes", "us"} curve at nbytes: log-log between points, the first
    point's time below it, the last point's bandwidth beyond it."""
    pts = sorted(zip(curve["sizes"], curve["us"]))
    if nbytes <= pts[0][0]:
        return pts[0][1]
    for (s0, t0), (s1, t1) in zip(pts, pts[1:]):
        if nbytes <= s1:
            f = (math.log(nbytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
            return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
    s_last, t_last = pts[-1]
    return t_last * nbytes / s_last


def _monotone_us(curve, nbytes):
    """_loglog_us on the curve made non-decreasing in size: a larger message never
    arrives sooner; a point below a smaller size's time is noise of the run (a busy
    host), raised to it."""
    pts = sorted(zip(curve["sizes"], curve["us"]))
    us = [max(t for _, t in pts[:i + 1]) for i in range(len(pts))]
    return _loglog_us({"sizes": [p[0] for p in pts], "us": us}, nbytes)


class Machine:
    def __init__(self, data):
        self.data = data
        self.topo = data["topology"]
        self.node = data["node"]
        self.net = data["net"]

    @property
    def name(self):
        return self.data.get("name", "?")

    @property
    def oversubscribed(self):
        return self.topo["ranks_per_node"] > self.topo["cores_per_node"]

    # -- node level ---------------------------------------------------------------
    def sync_us(self):
        """One flag hand-off between two cores."""
        return self.node["sync_us"]

    def allsync_us(self):
        """Every rank waiting for every other: a hand-off; with more ranks than cores all r
        ranks must run in turn, (r/cores - 1) scheduler turns."""
        r, c = self.topo["ranks_per_node"], self.topo["cores_per_node"]
        if r <= c:
            return self.node["sync_us"]
        return max(self.node["sync_us"], (r / c - 1) * self.node["sched_turn_us"])

    def mem_GBps(self, copiers):
        """Aggregate copy bandwidth with `copiers` ranks copying at once (the curve)."""
        pts = sorted(self.node["mem_GBps"])
        c = max(1.0, float(copiers))
        if c <= pts[0][0]:
            return pts[0][1] * c / pts[0][0]
        for (c0, b0), (c1, b1) in zip(pts, pts[1:]):
            if c <= c1:
                return b0 + (b1 - b0) * (c - c0) / (c1 - c0)
        return pts[-1][1]

    def per_copier_GBps(self, copiers, single_GBps):
        """What one of `copiers` concurrent copiers gets: its own speed, or its share of the
        memory bandwidth, whichever is less; ranks sharing cores share them too."""
        c = min(max(1.0, float(copiers)), self.topo["cores_per_node"])  # at once: one per core
        return min(single_GBps, self.mem_GBps(c) / c)

    def curve_GBps(self, nbytes):
        """One copier's memcpy speed at this size from the calibrated curve (linear in
        log2 size between points, flat beyond the ends); None without a curve."""
        cv = self.node.get("memcpy_curve")
        if not cv:
            return None
        pts = sorted(zip(cv["sizes"], cv["GBps"]))
        if nbytes <= pts[0][0]:
            return pts[0][1]
        for (s0, b0), (s1, b1) in zip(pts, pts[1:]):
            if nbytes <= s1:
                f = (math.log2(nbytes) - math.log2(s0)) / (math.log2(s1) - math.log2(s0))
                return b0 + (b1 - b0) * f
        return pts[-1][1]

    def core_share(self, workers):
        """The share of a core each of `workers` ranks working at once gets (ranks beyond
        the cores take turns)."""
        return min(1.0, self.topo["cores_per_node"] / max(1.0, float(workers)))

    def copy_us(self, nbytes, copiers, cached=False):
        if nbytes <= 0:
            return 0.0
        return self._copy_us(nbytes, copiers, cached) / self.core_share(copiers)

    def _copy_us(self, nbytes, copiers, cached=False):
        curve = self.curve_GBps(nbytes)
        if curve is not None and not cached:
            # In a cache (faster than memory) copiers do not share the memory bandwidth;
            # beyond, each gets its share of the aggregate (seed 000 §3.2).
            bw = curve if curve > self.node["memcpy_GBps"] else min(
                curve, self.per_copier_GBps(copiers, curve))
            return nbytes / (bw * 1e3)
        ws = nbytes * max(1.0, float(copiers))
        if cached or ws <= self.topo["llc_bytes"] / 2:
            bw = self.node["cache_copy_GBps"]
        else:
            bw = self.per_copier_GBps(copiers, self.node["memcpy_GBps"])
        return nbytes / (bw * 1e3)

    def _cma_curve_us(self, nbytes):
        """One process_vm_readv of nbytes from the calibrated curve (log-log between
        points, the last point's bandwidth beyond); None without a curve."""
        cv = self.node.get("cma_curve")
        return _loglog_us(cv, nbytes) if cv else None

    def _contention(self, nbytes, readers, single_GBps):
        """How much longer a memory-bound transfer takes when `readers` run at once."""
        if readers <= 1 or single_GBps > 1.5 * self.node["memcpy_GBps"]:
            return 1.0                   # in cache: no shared memory bandwidth
        return single_GBps / self.per_copier_GBps(readers, single_GBps)

    def cma_us(self, calls, nbytes, readers):
        if nbytes <= 0 and calls <= 0:
            return 0.0
        return self._cma_us(calls, nbytes, readers) / self.core_share(readers)

    def _cma_us(self, calls, nbytes, readers):
        calls = max(1.0, float(calls))
        t = self._cma_curve_us(nbytes)
        if t is not None:
            # the bytes move at the speed of their whole size (in cache or not), each
            # call pays the system call, and readers at once slow each other
            move = max(0.0, t - self.node["cma_call_us"])
            bw = nbytes / (move * 1e3) if move > 0 else self.node["cma_GBps"]
            slow = max(self._contention(nbytes, readers, bw), self.cross_slowdown(readers))
            return calls * self.node["cma_call_us"] + move * slow
        bw = self.per_copier_GBps(readers, self.node["cma_GBps"])
        return calls * self.node["cma_call_us"] + nbytes / (bw * 1e3)

    def cross_slowdown(self, readers):
        """How much longer a cross-core transfer takes with `readers` ranks reading each
        other at once (calibrated: cma_pair_slowdown for two; cross_slowdown [[c, f]])."""
        if readers <= 1:
            return 1.0
        pts = self.node.get("cross_slowdown")
        if pts:
            pts = sorted(pts)
            for (c0, f0), (c1, f1) in zip(pts, pts[1:]):
                if readers <= c1:
                    return f0 + (f1 - f0) * (readers - c0) / (c1 - c0)
            return pts[-1][1]
        return self.node.get("cma_pair_slowdown") or 1.0

    def _xfer_extra_us(self, nbytes):
        """From the calibrated hand-off curve (write, hand over, copy out): what nbytes add
        to an empty hand-off; beyond its last size, at the single-copy curve's speed."""
        cv = self.node.get("xfer_curve")
        if not cv:
            return None
        pts = sorted(zip(cv["sizes"], cv["us"]))
        t0 = pts[0][1]
        if nbytes <= pts[0][0]:
            return 0.0
        for (s0, u0), (s1, u1) in zip(pts, pts[1:]):
            if nbytes <= s1:
                return max(0.0, u0 + (u1 - u0) * (nbytes - s0) / (s1 - s0) - t0)
        s_last, u_last = pts[-1]
        extra = max(0.0, u_last - t0)
        a, b = self._cma_curve_us(s_last), self._cma_curve_us(nbytes)
        if a is not None and b is not None and b > a:
            return extra + (b - a)
        return extra + (nbytes - s_last) / (self.node["memcpy_GBps"] * 1e3)

    def xcopy_us(self, nbytes, copiers):
        """A copy of data another core wrote (out of a peer's area): its lines cross the
        cores modified (the hand-off curve), or as a single-copy read does without the
        system call; without either curve, an ordinary copy."""
        if nbytes <= 0:
            return 0.0
        x = self._xfer_extra_us(nbytes)
        if x is not None:
            return x * self.cross_slowdown(min(copiers, self.topo["cores_per_node"])) \
                / self.core_share(copiers)
        t = self._cma_curve_us(nbytes)
        if t is None:
            return self.copy_us(nbytes, copiers)
        move = max(t - self.node["cma_call_us"], nbytes / (self.node["cache_copy_GBps"] * 1e3))
        local = self.copy_us(nbytes, copiers)
        bw = nbytes / (move * 1e3)
        return max(local, move * self._contention(nbytes, copiers, bw))

    def call_us(self):
        """Fixed cost of entering an mcoll collective (wrapper, context, sequence)."""
        return self.node.get("call_us", 0.0)

    def fold_us(self, nbytes, folders=1):
        """Folding nbytes of input while `folders` ranks fold at once; at the speed of its
        size when calibrated by size."""
        cv = self.node.get("fold_curve")
        bw = self.node["fold_GBps"]
        if cv and nbytes > 0:
            pts = sorted(zip(cv["sizes"], cv["GBps"]))
            bw = pts[-1][1]
            for s_, b_ in pts:
                if nbytes <= s_:
                    bw = b_
                    break
        return nbytes / (bw * 1e3) / self.core_share(folders)

    def level_msg_us(self, level, count, nbytes):
        """count host point-to-point messages of nbytes inside the node."""
        lv = self.data.get("levels", {}).get(level) or self.data.get("levels", {}).get("node")
        alpha = (lv or {}).get("alpha_us") or 0.5
        if self.oversubscribed:      # each round needs its partners scheduled
            alpha = max(alpha, self.allsync_us())
        gbps = (lv or {}).get("GBps") or self.node["memcpy_GBps"]
        return count * alpha + nbytes / (gbps * 1e3)

    # -- network ------------------------------------------------------------------
    def shared_step_wait_us(self):
        """What a dependent step between nodes waits for its peer to run when the nodes
        share one machine's cores (topology.machine_cores: test hosts) and the job's P
        ranks outnumber those M: the host MPIs busy-poll, so a waiting rank keeps its core
        until the scheduler preempts it, and the peer waits for its turn among P/M busy
        tasks per core: shared_step_us x P/M. 0 with ranks <= cores or without
        machine_cores."""
        cores = self.topo.get("machine_cores")
        ranks = self.topo["nodes"] * self.topo["ranks_per_node"]
        if not cores or self.topo["nodes"] < 2 or ranks <= cores:
            return 0.0
        return self.node.get("shared_step_us", SHARED_STEP_US) * ranks / cores

    def net_beta_us(self):
        return 1.0 / self.net["nic_MBps"]           # µs per byte

    def net_msg_us(self, count, nbytes):
        """count messages one after the other between nodes, nbytes in all: from the
        link's calibrated ping-pong curve where the machine file has one (a link
        measured over test hosts or a cluster: mcoll-bench --calibrate across hosts),
        else alpha and bandwidth."""
        if count <= 0:
            return 0.0
        curve = self.net.get("link_curve")
        if curve:
            # A ping-pong's one way leaves the link idle for the way back, so a shaped
            # link's token bucket refills and messages up to its burst pass unshaped;
            # calls one after the other do not wait for it: a message takes at least
            # its bytes at the link's sustained rate (nic_MBps; --calibrate fits it
            # from messages sent back to back).
            each = nbytes / count
            return count * max(_monotone_us(curve, each), each * self.net_beta_us())
        return count * self.net["alpha_us"] + nbytes * self.net_beta_us()

    def net_exchange_extra_us(self):
        """What an exchange round costs beyond a one-way message: the measured 8 B
        exchange (exchange_us, --calibrate across hosts) less the link curve's 8 B one
        way; 0 without a measured exchange."""
        x, curve = self.net.get("exchange_us"), self.net.get("link_curve")
        if x is None or not curve:
            return 0.0
        return max(0.0, x - _monotone_us(curve, 8))

    def net_exchange_us(self, rounds, nbytes):
        """rounds exchanges with peer hosts one after the other, nbytes sent in all: each
        a message's price plus the exchange's extra latency (a step where both hosts send
        at once keeps both their network stacks busy: on test hosts the links are the
        cores' work)."""
        if rounds <= 0:
            return 0.0
        each = nbytes / rounds
        latency = self.net_msg_us(1, each) if not self.net.get("link_curve") else \
            _monotone_us(self.net["link_curve"], each)
        # the extra latency overlaps a message the link's rate holds back
        return rounds * max(latency + self.net_exchange_extra_us(), each * self.net_beta_us())

    def hops(self):
        """Switches a packet crosses: the file's hops, or the mean over a node's peers in
        a fat tree (a peer under the same leaf: 1; else 2l-1 for the lowest level l
        whose subtree holds both)."""
        levels = self.net.get("fat_tree_levels")
        if not levels:
            return self.net["hops"]
        n = self.topo["nodes"]
        if n <= 1:
            return 1.0
        half = self.net["switch_radix"] // 2
        total, reached = 0.0, 1
        for lv in range(1, levels + 1):
            span = min(n, half ** lv) if lv < levels else n
            total += (span - reached) * (2 * lv - 1)
            reached = span
        return total / (n - 1)

    def link_MBps(self):
        return self.net["packet_bits"] / 8 / (self.net["cycle_ns"] * 1e-3)

    def rho(self, ranks):
        r = self.net.get("rho")
        if r is None:
            return min(0.95, self.net["nic_MBps"] / self.link_MBps())
        if isinstance(r, (int, float)):
            return float(r)
        if r.get("law") == "power":
            x = r["x0"] * (ranks / r["p0"]) ** r["gamma"]
            return x / (1 + x)
        raise ValueError(f"unknown rho law {r}")
