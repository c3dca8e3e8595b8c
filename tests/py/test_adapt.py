"""The choice that adapts at run time (src/coll/adapt.c): blocking calls of a
repeating size class time the algorithms within reach in turn, the ranks agree on the slowest rank's times, and every rank keeps the same
algorithm. MCOLL_TEST_ADAPT_SKEW_US skews each rank's timings so that each rank
alone would choose another algorithm: the agreement must still give every rank the
same one (else the ranks would run different protocols and hang or mix results),
and every call's result is checked (mcoll-bench -c)."""

import re

import pytest

from mpijob import mpiexec_argv, parse_verbose_report, run_job
from mpijob import BASE_ENV, BUILD, check_passed, flavour_param

# asserts on timing or CPU use: run alone (tests/run.sh's serial phase)
pytestmark = pytest.mark.serial

DEFAULT_ENV = BASE_ENV
# Classes below MCOLL_ADAPT_MIN (1 KiB) keep the rules' choice by default; these tests
# time them too, so that their rounds (pair_inline, bruck, the slot) stay checked.
BASE_ENV = {**BASE_ENV, "MCOLL_ADAPT_MIN": "0"}

JOB_TIMEOUT = 180
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
# The first round after 8 calls, not the default 160, and 3 timed calls per candidate,
# not 5, to keep the jobs short (MPICH at 3 ranks takes tens of ms a call on 2 cores);
# the skew (100 ms) outweighs any call's own time, so 3 samples decide as well as 5.
EARLY = {"MCOLL_ADAPT_WARMUP": "8", "MCOLL_ADAPT_SAMPLES": "3"}
# 8 warm-up calls, then up to 4 candidates x (1 untimed + 3 timed calls) (3 at most
# were seen), then the decision: 28 calls per size and block are past it.
SWEEP = ["-C", "bcast,reduce,allreduce,gather,scatter,allgather,allgatherv", "-b", "4K", "-e", "1M", "-f", "16", "-m", "latency",
         "-n", "28", "-w", "0", "-r", "1", "-c"]
LINE = re.compile(r"^mcoll: rank (\d+) adapt (\w+) \[(\S+), (\S+)\) B: (\w+) .*this rank alone: (\w+)$",
                  re.M)


CANDS = re.compile(r"^mcoll: rank \d+ adapt (\w+) \[(\S+), \S+\) B: .*median us:(.*); this rank alone", re.M)


def adapt_candidates(stderr):
    """{(coll, class): set of candidate names} from MCOLL_VERBOSE=2's lines."""
    out = {}
    for coll, lo, timed in CANDS.findall(stderr):
        out.setdefault((coll, lo), set()).update(re.findall(r"(\w+)=[\d.]+", timed))
    return out


def adapt_lines(stderr):
    """{(coll, class): {rank: (chosen, alone)}} from MCOLL_VERBOSE=2's lines."""
    out = {}
    for rank, coll, lo, hi, chosen, alone in LINE.findall(stderr):
        out.setdefault((coll, lo), {})[int(rank)] = (chosen, alone)
    return out


# Alltoall from 8 B (pair_inline, bruck) to 256 KiB (single copy, tiles): up to 6
# candidates x 4 calls after the 8 warm-up calls.
A2A_SWEEP = ["-C", "alltoall", "-b", "8", "-e", "256K", "-f", "8", "-m", "latency", "-n", "36", "-w", "0",
             "-r", "1", "-c"]


def check_agreement(result, np, colls):
    """Every rank reported each class's decision, all ranks the same algorithm, and
    the skew made at least one class's ranks disagree alone."""
    assert result.returncode == 0, result.describe()
    lines = adapt_lines(result.stderr)
    assert {coll for coll, _ in lines} >= colls, result.describe()
    skewed = 0
    for key, by_rank in lines.items():
        assert sorted(by_rank) == list(range(np)), f"{key}: {by_rank}"
        chosen = {c for c, _ in by_rank.values()}
        assert len(chosen) == 1, f"{key}: ranks chose differently: {by_rank}"
        skewed += len({alone for _, alone in by_rank.values()}) > 1
    # the skew worked: alone, the ranks would have disagreed
    assert skewed > 0, result.stderr
    return lines


@pytest.mark.parametrize("np", [2, pytest.param(3, marks=pytest.mark.full)])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_skewed_ranks_agree(flavour, np):
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {**BASE_ENV, **EARLY, "MCOLL_VERBOSE": "2", "MCOLL_TEST_ADAPT_SKEW_US": "100000"}
    result = run_job(mpiexec_argv(flavour, np, program, SWEEP), env, JOB_TIMEOUT)
    check_agreement(result, np, {"bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "allgatherv"})


@pytest.mark.parametrize("np", [2, pytest.param(3, marks=pytest.mark.full)])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_alltoall_skewed_ranks_agree(flavour, np):
    """Alltoall adapts too: the same candidate on every rank per call (else the ranks'
    protocols would differ: a hang, or blocks in the wrong place, which -c checks), and
    the same decision; every candidate within reach ran on rank 0 during the rounds."""
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {**BASE_ENV, **EARLY, "MCOLL_VERBOSE": "2", "MCOLL_TEST_ADAPT_SKEW_US": "100000"}
    result = run_job(mpiexec_argv(flavour, np, program, A2A_SWEEP), env, JOB_TIMEOUT)
    lines = check_agreement(result, np, {"alltoall"})
    assert len([k for k in lines if k[0] == "alltoall"]) == 6, result.stderr  # 8 B ... 256 KiB
    counts = parse_verbose_report(result.stderr)["alltoall"]
    expected = {"shm_direct", "bruck", "tiled", "pairwise_cma", "tiled_cma"} | ({"pair_inline"} if np == 2 else set())
    assert {alg for alg in expected if counts.get(alg, 0) > 0} == expected, counts


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_small_classes_keep_the_rules_by_default(flavour):
    """With the default MCOLL_ADAPT_MIN, alltoall's classes below 1 KiB run no round
    (no decision reported, every call the rules' choice) while those from 1 KiB do;
    every result is checked (-c)."""
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {**DEFAULT_ENV, **EARLY, "MCOLL_VERBOSE": "2"}
    result = run_job(mpiexec_argv(flavour, 2, program, A2A_SWEEP), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    adapted = {lo for coll, lo in adapt_lines(result.stderr) if coll == "alltoall"}
    assert adapted == {"4K", "32K", "256K"}, result.stderr  # of 8, 64, 512 B, 4, 32, 256 KiB


DECIDED_AT = re.compile(r"^mcoll: rank 0 adapt (\w+) \[(\S+), \S+\) B: (\w+) \((.*?)\) at call (\d+),", re.M)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_long_classes_decide_within_osu_calls(flavour):
    """With the default parameters, a size class from MCOLL_ADAPT_LONG (16 KiB) decides
    within the 110 calls per size that OSU makes above 8 KiB: a warm-up of 2 calls and
    1 + 3 calls per candidate, so the decision comes by call 15 at 2 or 3 candidates and
    the rest of the calls run what it kept. A class below (8 KiB) keeps its warm-up of
    160 calls. Every rank rates the last candidate best (skew alike), not the rules'
    choice, so the decision shows in the counts; -c checks every result."""
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {**BASE_ENV, "MCOLL_VERBOSE": "2", "MCOLL_TEST_ADAPT_SKEW_US": "100000", "MCOLL_TEST_ADAPT_SKEW_ALIKE": "1"}
    argv = ["-C", "reduce,allreduce", "-b", "8K", "-e", "1M", "-f", "128", "-m", "latency", "-n", "110", "-w", "0",
            "-r", "1", "-c"]
    result = run_job(mpiexec_argv(flavour, 2, program, argv), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    decided = {(coll, lo): (alg, why, int(at)) for coll, lo, alg, why, at in DECIDED_AT.findall(result.stderr)}
    assert set(decided) == {("reduce", "1M"), ("allreduce", "1M")}, result.stderr
    counts = parse_verbose_report(result.stderr)
    for coll in ("reduce", "allreduce"):
        alg, why, at = decided[(coll, "1M")]
        assert why == "faster than the rules' choice" and at <= 15, (coll, decided)
        # the 1 MiB size's calls after the decision, and the chosen one's own round calls
        assert counts[coll][alg] >= 110 - at + 4, (coll, alg, counts[coll])
    for by_rank in adapt_lines(result.stderr).values():
        assert len({c for c, _ in by_rank.values()}) == 1, by_rank


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_large_blocks_time_no_area_candidates(flavour):
    """From 128 KiB blocks, where single copy is the rules' choice, alltoall's and
    allgather(v)'s two copies through the areas are out of reach (bench/records/osu-day6:
    they lost 47 of 48 rounds there, and a round a disturbance hit could keep one):
    alltoall's round times only the single copy algorithms, allgather(v) takes no round.
    At 16 KiB the areas are still timed, and gather keeps them at 1 MiB. Every result is
    checked (-c)."""
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {**BASE_ENV, "MCOLL_VERBOSE": "2"}
    argv = ["-C", "alltoall,allgather,allgatherv,gather", "-b", "16K", "-e", "1M", "-f", "64", "-m", "latency",
            "-n", "40", "-w", "0", "-r", "1", "-c"]
    result = run_job(mpiexec_argv(flavour, 2, program, argv), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    cands = adapt_candidates(result.stderr)
    # 16 KiB: the areas beside single copy
    assert {"shm_direct", "tiled", "pairwise_cma"} <= cands[("alltoall", "16K")], cands
    for coll in ("allgather", "allgatherv", "gather"):
        assert {"area", "cma"} <= cands[(coll, "16K")], (coll, cands)
    # 1 MiB: single copy only, but for gather
    assert cands[("alltoall", "1M")] == {"pairwise_cma", "tiled_cma"}, cands
    assert {"area", "cma"} <= cands[("gather", "1M")], cands
    counts = parse_verbose_report(result.stderr)
    for coll in ("allgather", "allgatherv"):
        assert (coll, "1M") not in cands, (coll, cands)
        # every 1 MiB call by single copy, and some of the 16 KiB class's round
        assert counts[coll].get("cma", 0) >= 40, (coll, counts[coll])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_two_rank_reductions_time_flat_at_large_sizes(flavour):
    """On a node of two ranks flat stays within reach of the reductions' rounds at
    every size (bench/records/osu-day7: its time holds from job to job while HSRA's
    and single copy's move by several times); on three ranks it leaves them beyond
    its reach. Every result is checked (-c)."""
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {**BASE_ENV, "MCOLL_VERBOSE": "2"}
    argv = ["-C", "reduce,allreduce", "-b", "1M", "-e", "1M", "-m", "latency",
            "-n", "30", "-w", "0", "-r", "1", "-c"]
    for np, flat in ((2, True), (3, False)):
        result = run_job(mpiexec_argv(flavour, np, program, argv), env, JOB_TIMEOUT)
        assert result.returncode == 0, result.describe()
        cands = adapt_candidates(result.stderr)
        for coll in ("reduce", "allreduce"):
            assert "hsra" in cands[(coll, "1M")], (np, coll, cands)
            assert ("flat" in cands[(coll, "1M")]) == flat, (np, coll, cands)


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_off_and_forced_do_not_adapt(flavour):
    """MCOLL_ADAPT=0 and a forced algorithm leave every call to the rules/the force."""
    program = BUILD.bin(flavour, "mcoll-bench")
    for extra, alg in (({"MCOLL_ADAPT": "0"}, None), ({"MCOLL_ALG_REDUCE": "hsra"}, "hsra")):
        env = {**BASE_ENV, **EARLY, "MCOLL_VERBOSE": "2", **extra}
        result = run_job(mpiexec_argv(flavour, 2, program, SWEEP), env, JOB_TIMEOUT)
        assert result.returncode == 0, result.describe()
        assert not any(coll == "reduce" for coll, _ in adapt_lines(result.stderr)), result.stderr
        if alg:
            counts = parse_verbose_report(result.stderr)["reduce"]
            assert counts[alg] == counts["calls"], counts


# Each rank forces its own bcast engine (a wrapper script sets MCOLL_ALG_BCAST by
# rank): a reader whose source went by another engine must leave its wait and read
# by the source's (coll/bcast/bcast.c: the guard, each engine's abandon), and get
# MPI_SUCCESS since the sizes agree. The shared-memory tree was out of the adaptive
# rounds on nodes without levels until it had that way out (its reader waited for
# ever); it is a candidate now.
PER_RANK = """#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
eval "alg=\\${TEST_ALG_R$r:-}"
[ -n "$alg" ] && export MCOLL_ALG_BCAST=$alg
exec "$@"
"""


@pytest.mark.parametrize("pair", ["shm_pipeline:shm_tree", pytest.param("shm_tree:shm_slot", marks=pytest.mark.full),
                                  pytest.param("shm_tree:cma", marks=pytest.mark.full),
                                  pytest.param("cma:shm_tree", marks=pytest.mark.full)])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_bcast_engines_differ_per_rank(flavour, pair, tmp_path):
    wrapper = tmp_path / "per_rank.sh"
    wrapper.write_text(PER_RANK)
    wrapper.chmod(0o755)
    source_alg, reader_alg = pair.split(":")
    program = BUILD.bin(flavour, "mcoll-bench")
    # 8 B, 512 B (and 32 KiB: a slot holds small calls only), a few calls each: a
    # strayed reader leaves its wait only past its spin, which takes long under load.
    largest = "512" if "shm_slot" in pair else "32K"
    args = ["-m", "latency", "-C", "bcast", "-b", "8", "-e", largest, "-f", "64", "-n", "5", "-w", "0", "-r", "1",
            "-c"]
    env = {**BASE_ENV, "TEST_ALG_R0": source_alg, "TEST_ALG_R1": reader_alg}
    result = run_job(mpiexec_argv(flavour, 2, wrapper, [program, *args]), env, 150)
    assert result.returncode == 0, result.describe()
    assert len(re.findall(r"^  bcast ", result.stdout, re.M)) == (2 if largest == "512" else 3), result.describe()


@pytest.mark.parametrize("np", [2, pytest.param(3, marks=pytest.mark.full)])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_v_forms_unequal_counts_adapt(flavour, np):
    """Allgatherv adapts by its largest block, which every rank computes alike from the
    counts it has; gatherv and scatterv only on two ranks, by the other rank's block
    (the one that moves, known to both). test_coll's cases (counts that differ per
    rank, gaps, datatypes, checked against point-to-point) with a round from a class's
    first call and skewed timings. On three ranks gatherv/scatterv keep the rules: a
    rank there knows only its own count, so no class every rank agrees on without a
    message."""
    program = BUILD.bin(flavour, "mcoll-test-coll")
    env = {**BASE_ENV, "MCOLL_ADAPT_WARMUP": "1", "MCOLL_ADAPT_SAMPLES": "1", "MCOLL_VERBOSE": "2",
           "MCOLL_TEST_ADAPT_SKEW_US": "1000"}
    args = ["--colls", "allgatherv,gatherv,scatterv", "--comms", "world", "--iters", "600", "--max-bytes", "256K"]
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    lines = adapt_lines(result.stderr)
    adapted = {coll for coll, _ in lines}
    assert "allgatherv" in adapted, result.stderr
    if np == 2:
        assert {"gatherv", "scatterv"} <= adapted, result.stderr
        # from 1 KiB (MCOLL_MOVE_CMA_REACH) their rounds time the slot protocol, the
        # whole-area one (what forced area runs) and single copy; below, no round (the
        # rules' start alone: classes of an erroneous call's two lengths would end
        # their rounds at different calls)
        for (coll, lo), cands in adapt_candidates(result.stderr).items():
            if coll in ("gatherv", "scatterv"):
                assert lo.endswith("K") or lo.endswith("M"), (coll, lo, cands)
                assert {"area", "slot", "cma"} <= cands, (coll, lo, cands)
    else:
        assert not {"gatherv", "scatterv"} & adapted, result.stderr
    for key, by_rank in lines.items():
        assert len({c for c, _ in by_rank.values()}) == 1, f"{key}: ranks chose differently: {by_rank}"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_nonblocking_calls_follow_the_choice(flavour):
    """MPI_I* calls and persistent starts run the algorithm the blocking calls' round
    kept, not the rules' choice (the same on every rank, since a blocking call first
    completes its communicator's tasks): every call after the decision runs it, and
    every result is checked (-c)."""
    program = BUILD.bin(flavour, "mcoll-bench")
    # every rank rates the last candidate best: not the rules' choice
    env = {**BASE_ENV, **EARLY, "MCOLL_VERBOSE": "2", "MCOLL_TEST_ADAPT_SKEW_US": "100000",
           "MCOLL_TEST_ADAPT_SKEW_ALIKE": "1"}
    argv = ["-C", "bcast", "-b", "8K", "-e", "8K", "-m", "nbc", "-n", "60", "-w", "0", "-r", "1", "-c"]
    result = run_job(mpiexec_argv(flavour, 2, program, argv), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    assert "(the rules' choice)" not in result.stderr, result.stderr
    (chosen,) = {c for by_rank in adapt_lines(result.stderr).values() for c, _ in by_rank.values()}
    counts = parse_verbose_report(result.stderr)["bcast"]
    # per side: 60 blocking calls (the round ends within them), then 60 I + wait, 60 with
    # the busy loop and 60 persistent starts (+1 untimed), all after the decision
    assert counts[chosen] >= 181, (chosen, counts)
