"""Alltoall's grid_rsend between nodes (src/coll/alltoall/alltoall_inter.c): the
arrival messages along a ceil(sqrt N) grid, counted, and the results under
blocking, MPI_Ialltoall and persistent calls on fake nodes (real test hosts:
test_multihost.py).

The count: the rules of alltoall_inter.c's grid_arrival written out here once
(control_sends, per rank), checked against what rank 0 reports (control_msgs= on
the alltoall.inter line of MCOLL_VERBOSE=1) for each call it ran."""

import math
import re

import pytest

from mpijob import BUILD, check_passed, flavour_param, mpiexec_argv, run_job, seed_for

JOB_TIMEOUT = 240


def grid(n):
    cols = math.isqrt(n - 1) + 1 if n > 1 else 1
    rows = -(-n // cols)
    return cols, rows, n - (rows - 1) * cols


def control_sends(n, rank):
    """Control messages rank sends per call: its row's others, then its column's
    (a short last row's rank j covers the columns c = j mod its length)."""
    cols, rows, last_len = grid(n)
    row, col, last = rank // cols, rank % cols, rows - 1
    sends = (last_len if row == last else cols) - 1
    if row == last:
        sends += (rows - 1) * len(range(col, cols, last_len))
    else:
        sends += (rows - 2) + (1 if col < last_len else 0)
    return sends


def inter_counts(stderr):
    """calls, direct, grid_rsend, control_msgs of rank 0's report line; the time in
    the arrival phase (control_wait_us=) comes with the control messages."""
    m = re.search(r"^mcoll: alltoall\.inter calls=(\d+) direct=(\d+) grid_rsend=(\d+)"
                  r"(?: control_msgs=(\d+))?( control_wait_us=\d+)?$", stderr, re.M)
    assert m, stderr[-3000:]
    assert bool(m.group(4)) == bool(m.group(5)), m.group(0)
    return [int(g or 0) for g in m.groups()[:4]]


# Square (4), products (6, 8), primes (5, 7), 3 (one short row of 1), 2 (one row).
COUNT_CASES = [("openmpi", n, "nodes=2") for n in (2, 3, 4, 5, 6, 7, 8)] + [
    ("openmpi", 7, "nodes=3"), ("mpich", 5, "nodes=2"), ("mpich", 4, "nodes=4")]
DEFAULT_CASES = {("openmpi", 5, "nodes=2"), ("mpich", 4, "nodes=4"), ("openmpi", 4, "nodes=2"),
                 ("mpich", 3, "nodes=3")}


@pytest.mark.parametrize("flavour,np,topo", [flavour_param(*c, full=c not in DEFAULT_CASES) for c in COUNT_CASES])
def test_grid_rsend_counts_and_results(flavour, np, topo):
    """Checked alltoall calls (mcoll-bench -c aborts on a wrong block), 1-64 KiB,
    all on MPI_COMM_WORLD: rank 0 sends exactly control_sends(np, 0) per call."""
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-C", "alltoall", "-b", "1K", "-e", "64K", "-f", "8", "-n", "4", "-w", "1", "-r", "2", "-c"]
    env = {"MCOLL_TOPO": topo, "MCOLL_ALG_ALLTOALL_INTER": "grid_rsend", "MCOLL_VERBOSE": "1",
           "MCOLL_FALLBACK": "error"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    calls, direct, grid_calls, control = inter_counts(result.stderr)
    assert calls > 0 and direct == 0 and grid_calls == calls, result.describe()
    assert control == calls * control_sends(np, 0), (calls, control, control_sends(np, 0))


NBC_CASES = [("openmpi", 5, "nodes=3"), ("openmpi", 4, "nodes=2"), ("mpich", 3, "nodes=3"),
             ("mpich", 5, "nodes=2")]


@pytest.mark.parametrize("flavour,np,topo", [flavour_param(*c, full=c not in DEFAULT_CASES) for c in NBC_CASES])
def test_grid_rsend_nonblocking_and_persistent(request, flavour, np, topo):
    """MPI_Ialltoall(v,w) interleaved with other collectives, out of order, and the
    persistent forms on MPICH (MPI 4), all checked by test_nbc; then the blocking
    forms over several communicators (test_coll)."""
    env = {"MCOLL_TOPO": topo, "MCOLL_ALG_ALLTOALL_INTER": "grid_rsend",
           "MCOLL_ALG_ALLTOALLV_INTER": "grid_rsend", "MCOLL_ALG_ALLTOALLW_INTER": "grid_rsend",
           "MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error"}
    # MPICH from 5 ranks on 2 cores spins through each message: half the groups there
    groups = "3" if flavour == "mpich" and np >= 5 else "6"
    nbc = ["--colls", "alltoall,alltoallv,alltoallw,bcast,allreduce", "--groups", groups,
           "--disorder", "3", "--max-bytes", "256K", "--seed", seed_for(request)]
    result = run_job(mpiexec_argv(flavour, np, BUILD.bin(flavour, "mcoll-test-nbc"), nbc), env, JOB_TIMEOUT)
    assert check_passed(result, "test_nbc") > 0, result.describe()
    if flavour == "mpich":
        assert re.search(r"^test_nbc: forms:[a-z ]*persistent", result.stdout, re.M), result.describe()
    calls, direct, grid_calls, control = inter_counts(result.stderr)
    assert grid_calls == calls > 0 and control > 0, result.describe()
    coll = ["--quick", "--iters", "1", "--colls", "alltoall,alltoallv,alltoallw", "--seed", seed_for(request)]
    result = run_job(mpiexec_argv(flavour, np, BUILD.bin(flavour, "mcoll-test-coll"), coll), env, JOB_TIMEOUT)
    check_passed(result)
    calls, direct, grid_calls, control = inter_counts(result.stderr)
    assert grid_calls == calls > 0 and direct == 0, result.describe()


def test_rules_never_choose_grid_rsend():
    """grid_rsend lost to direct in every measured setting across test hosts
    (bench/records/grid-alltoall/): neither the built-in rules nor the model's choice
    between nodes, with the link calibrated on test hosts or without, ever take it."""
    import json
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tools" / "py"))
    from mcoll_model import tune
    builtin = json.loads(tune.json_from_c((root / "src" / "coll" / "rules_builtin.c").read_text()))
    inter = [r for r in builtin["rules"] if r["coll"] == "alltoall" and r["level"] == "inter"]
    assert inter and {r["alg"] for r in inter} == {"direct"}
    nets = [None] + sorted(str(p) for p in (root / "tools" / "py" / "mcoll_model" / "machines").glob("testhosts*.json"))
    for net in nets:
        doc = tune.tune("here", (2,), (2, 4, 8), colls=["alltoall"], tolerance=0.0, prior=None, net=net)
        assert {r["alg"] for r in doc["rules"] if r["level"] == "inter"} == {"direct"}, net


# Where bench/records/grid-alltoall/ measured grid_rsend slower than direct: 16-256 KiB
# blocks (0.25-0.82x at 4 hosts x 2 ranks, both MPIs, both qdiscs).
LOSING_BLOCKS = ("16K", "256K")


@pytest.mark.parametrize("flavour,np,topo", [flavour_param("openmpi", 4, "nodes=2"),
                                             flavour_param("mpich", 4, "nodes=4", full=True)])
def test_calls_between_nodes_take_direct_where_grid_rsend_loses(flavour, np, topo):
    """Unforced, with the built-in rules and the choice that adapts at run time: every
    alltoall between nodes at the block sizes where grid_rsend lost runs direct (rank
    0's MCOLL_VERBOSE report), blocking and MPI_Ialltoall alike."""
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {"MCOLL_TOPO": topo, "MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error"}
    for mode in ("back2back", "nbc"):
        args = ["-m", mode, "-C", "alltoall", "-b", LOSING_BLOCKS[0], "-e", LOSING_BLOCKS[1],
                "-f", "4", "-n", "3", "-w", "1", "-r", "2", "-P"]
        result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
        assert result.returncode == 0, result.describe()
        calls, direct, grid_calls, control = inter_counts(result.stderr)
        assert calls > 0 and direct == calls and grid_calls == 0 and control == 0, (mode, result.describe())


@pytest.mark.parametrize("flavour,np,topo", [flavour_param("openmpi", 4, "nodes=4"),
                                             flavour_param("mpich", 8, "nodes=4", full=True)])
def test_bench_times_the_algorithms_between_nodes(flavour, np, topo):
    """mcoll-bench -X: beside the host and the default, every algorithm between nodes
    forced in the same rounds (direct, grid_rsend), each printed with host/that; the
    default's own calls stay direct, and only the forced grid blocks count grid calls
    and control messages (4 nodes, the layout of the cluster benchmark's grid rows)."""
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {"MCOLL_TOPO": topo, "MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error"}
    args = ["-C", "alltoall", "-X", "-b", "16K", "-e", "64K", "-f", "4", "-n", "3", "-w", "1",
            "-r", "2", "-c"]
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    rows = [line for line in result.stdout.splitlines() if line.startswith("  alltoall")]
    assert len(rows) == 2, result.stdout
    for line in rows:
        assert re.search(r" direct=[\d.]+\([\d.]+\)  grid_rsend=[\d.]+\([\d.]+\)$", line), line
    calls, direct, grid_calls, control = inter_counts(result.stderr)
    assert grid_calls > 0 and direct > grid_calls and calls == direct + grid_calls, result.stderr[-2000:]
    assert control == grid_calls * control_sends(np, 0), (control, grid_calls)
