"""Latency mode at 2 ranks: from 8 KiB, calls on a node of two
ranks move their data by single copy (CMA) instead of through the segment.

Through the areas or the ring, every call's bytes are written by one core and read
by the other, so all their lines cross the cores on each call; with OSU's barrier
after every call (mcoll-bench -m latency) that made 8 KiB bcast, gather(v),
scatter(v), reduce and exscan 0.73-0.93x native, while single copy reads the
owner's buffer in place, 1.3-2x native (measured 2026-11-23: bench/results/20261123-1037
in the git history). The built-in rules at 2 ranks are now the calibrated model's
choice (docs/model.md); its edges lie between 5.3 and 7.8 KiB, so 4 KiB keeps the
areas/ring (they win there back to back) and 8 KiB runs single copy. The choice is
deterministic: mcoll's report (MCOLL_VERBOSE=1) says which algorithm ran each call. On
larger nodes the choice is the one it was."""

import re

import pytest

from mpijob import check_passed, mpiexec_argv, parse_verbose_report, run_job
from mpijob import BASE_ENV, BUILD, RULES_ONLY, flavour_param, seed_for

JOB_TIMEOUT = 180
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
# collective -> (algorithm at 4 KiB, algorithm from 8 KiB) at 2 ranks: the built-in
# rules' (src/coll/rules_builtin.c: single copy from 5.3-7.8 KiB, where the model's worst
# ratio over latency and back-to-back mode is lowest). bcast runs shm_slot up to 512 B
# (test_fresh_communicators_small_bcast_in_slots).
TWO_RANKS = {
    "bcast": ("shm_pipeline", "cma"),
    "gather": ("area", "cma"), "gatherv": ("area", "cma"),
    "scatter": ("area", "cma"), "scatterv": ("area", "cma"),
    "allgather": ("area", "cma"), "allgatherv": ("area", "cma"),
    "reduce": ("flat", "cma"), "allreduce": ("flat", "cma"),
    "scan": ("flat", "cma"), "exscan": ("flat", "cma"),
}
# 4 KiB and 8 KiB, each call checked against the expected result (-c)
SWEEP = ["-b", "4K", "-e", "8K", "-f", "2", "-m", "latency", "-n", "20", "-w", "2", "-r", "1", "-c"]


def bench_report(flavour, np, colls, sweep, env=None):
    program = BUILD.bin(flavour, "mcoll-bench")
    result = run_job(mpiexec_argv(flavour, np, program, ["-C", ",".join(colls), *sweep]),
                     {**BASE_ENV, **RULES_ONLY, "MCOLL_VERBOSE": "1", **(env or {})}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    return parse_verbose_report(result.stderr), result


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_two_ranks_single_copy_from_8k(flavour):
    report, result = bench_report(flavour, 2, TWO_RANKS, SWEEP)
    for coll, (small, mid) in TWO_RANKS.items():
        counts = report.get(coll, {})
        calls = counts.get("calls", 0)
        # half the calls are 4 KiB, half 8 KiB
        assert calls > 0 and calls % 2 == 0, f"{coll}: {counts}\n{result.describe()}"
        assert counts.get(small) == calls // 2 and counts.get(mid) == calls // 2, (
            f"{coll} at 2 ranks: 4 KiB should run {small}, 8 KiB {mid}: {counts}")


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_pair_threshold_off_keeps_areas(flavour):
    """MCOLL_PAIR_CMA_MIN=0: gather, scatter and allgather keep their own thresholds."""
    colls = ["gather", "scatter", "allgather"]
    report, result = bench_report(flavour, 2, colls, SWEEP, {"MCOLL_PAIR_CMA_MIN": "0"})
    for coll in colls:
        counts = report.get(coll, {})
        assert counts.get("calls", 0) > 0 and counts.get("area") == counts["calls"], (
            f"{coll}: {counts}\n{result.describe()}")


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_larger_nodes_keep_their_thresholds(flavour):
    """Only nodes of two ranks were measured: 4 ranks at 8 KiB keep the areas/ring."""
    colls = {"bcast": "shm_pipeline", "gather": "area", "scatter": "area", "allgather": "area"}
    sweep = ["-b", "8K", "-e", "8K", "-m", "latency", "-n", "5", "-w", "1", "-r", "1", "-c"]
    report, result = bench_report(flavour, 4, colls, sweep)
    for coll, alg in colls.items():
        counts = report.get(coll, {})
        assert counts.get("calls", 0) > 0 and counts.get(alg) == counts["calls"], (
            f"{coll} at 4 ranks: {counts}\n{result.describe()}")


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_fresh_communicators_small_bcast_in_slots(flavour):
    """Cold start: small bcasts on fresh communicators, each with its own context
    (MCOLL_SHARE_CONTEXT=0 MCOLL_CHANNEL_POOL=0, as bench/run.sh's cold mode: a new
    segment each), go through the source's
    area slots and inline lines (bcast_shm_slot.c), not the ring, whose slots lie a
    chunk apart (a new page per call: the first 100 calls ran at 1.5-2.4x warm), and
    arrive intact (-c checks every round)."""
    sweep = ["-b", "8", "-e", "512", "-f", "4", "-m", "cold", "-K", "20", "-r", "3", "-c"]
    report, result = bench_report(flavour, 2, ["bcast"], sweep, {"MCOLL_SHARE_CONTEXT": "0", "MCOLL_CHANNEL_POOL": "0"})
    counts = report.get("bcast", {})
    assert counts.get("calls", 0) > 0 and counts.get("shm_slot") == counts["calls"], (
        f"bcast 8-512 B on fresh communicators: {counts}\n{result.describe()}")
    # one fresh context per round and size (3 x 4: 8, 32, 128, 512 B), none shared
    built = re.search(r"^mcoll: contexts built=(\d+) shared=(\d+) channels made=(\d+) reused=(\d+)$",
                      result.stderr, re.M)
    assert built and int(built.group(1)) >= 12 and built.group(2) == "0", result.describe()
    assert int(built.group(3)) >= 12 and built.group(4) == "0", result.describe()


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_two_ranks_small_alltoall_pair_lines(request, flavour):
    """Two ranks, blocks between them of at most 256 B: alltoall(v,w) send each block in
    the sender's inline lines of the call (alltoall_node.c, pair_inline), chosen alike
    on both ranks from the two lengths each knows; other sizes and mixed calls (one
    direction pair-sized, the other not, zero-byte blocks) keep the areas. Checked
    against point-to-point, with bursts of back-to-back calls long enough (300) to
    reuse every one of the 128 lines twice, interleaved with allgather and gather,
    which share the generations and inline lines."""
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = ["--colls", "alltoall,alltoallv,alltoallw,allgather,gather", "--max-bytes", "256",
            "--iters", "4", "--burst", "300", "--churn", "4", "--seed", str(seed_for(request))]
    result = run_job(mpiexec_argv(flavour, 2, program, args), BASE_ENV, JOB_TIMEOUT)
    check_passed(result)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_two_ranks_small_alltoall_chooses_pair_inline(flavour):
    """2 ranks: alltoall(v) blocks of 32 B go pair_inline; alltoallv's of 128 B too
    (several inline lines, up to MCOLL_A2A_PAIR_MAX), alltoall's keep the rules'
    shm_direct there; 512 B (past pair_inline's largest) go pairwise_cma (alltoallv)
    and the rules' tiled_cma (alltoall); 4 ranks keep the others at 32 B.
    OSU's latency mode before, Open MPI: alltoallv 8/32 B 0.99/0.87x native
    (measured 2026-11-23: bench/results/20261123-1327 in the git history), 64-256 B
    0.74-0.83x (bench/records/osu13)."""
    sweep = ["-b", "32", "-e", "512", "-f", "4", "-m", "latency", "-n", "20", "-w", "2", "-r", "1", "-c"]
    report, result = bench_report(flavour, 2, ["alltoall", "alltoallv"], sweep)
    expected = {"alltoall": {"pair_inline": 1, "shm_direct": 1, "tiled_cma": 1},
                "alltoallv": {"pair_inline": 2, "pairwise_cma": 1}}
    for coll, algs in expected.items():
        counts = report.get(coll, {})
        calls = counts.get("calls", 0)
        assert calls > 0 and calls % 3 == 0, f"{coll}: {counts}\n{result.describe()}"
        got = {alg: counts.get(alg) for alg in algs}
        assert got == {alg: k * calls // 3 for alg, k in algs.items()}, (
            f"{coll} at 2 ranks, 32, 128 and 512 B: {counts}")
    sweep = ["-b", "32", "-e", "32", "-m", "latency", "-n", "5", "-w", "1", "-r", "1", "-c"]
    report, result = bench_report(flavour, 4, ["alltoall", "alltoallv"], sweep)
    for coll, alg in (("alltoall", "shm_direct"), ("alltoallv", "pairwise_cma")):
        counts = report.get(coll, {})
        assert counts.get("calls", 0) > 0 and counts.get(alg) == counts["calls"], (
            f"{coll} at 4 ranks: {counts}\n{result.describe()}")
