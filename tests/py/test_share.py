"""Communicators with identical groups share one mcoll context:
interleaved calls over several dups stay correct, a freed dup leaves the others
working, a reordered split keeps its own context, and with MPI_THREAD_MULTIPLE
nothing is shared. Node channels (segment and sequence numbers) are shared by
communicators whose node holds the same processes in the same order, and pooled
when their last communicator is freed: a new split over the same processes makes
no new segment. The MCOLL_VERBOSE report counts contexts built and shared, and
channels made and reused."""

import re

import pytest

import mpijob
from mpijob import check_passed, mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
CASES = [("openmpi", 2, None), ("openmpi", 3, None), ("openmpi", 5, "nodes=2"),
         ("openmpi", 4, "nodes=2,sockets=2"), ("mpich", 2, None), ("mpich", 4, "nodes=2")]


def report(stderr):
    m = re.search(r"^mcoll: contexts built=(\d+) shared=(\d+) channels made=(\d+) reused=(\d+)$",
                  stderr, re.M)
    assert m, f"no contexts line in the MCOLL_VERBOSE report:\n{stderr[-2000:]}"
    return tuple(int(g) for g in m.groups())


def contexts(stderr):
    return report(stderr)[:2]


CYCLES = 5


def params(threads):
    for flavour, np, topo in CASES:
        marks = [] if flavour in BUILD.flavours else [pytest.mark.skip(reason=f"{flavour} not built")]
        marks += [] if np == 2 else [mpijob.FULL]
        yield pytest.param(flavour, np, topo, threads, marks=marks,
                           id=f"{flavour}-{np}-{topo or 'flat'}-{threads}")


@pytest.mark.parametrize("flavour,np,topo,threads",
                         [*params("single"), *[p for p in params("multiple")][:2]])
def test_share(flavour, np, topo, threads):
    env = {"MCOLL_FALLBACK": "error", "MCOLL_VERBOSE": "1"}
    if topo:
        env["MCOLL_TOPO"] = topo
    program = BUILD.bin(flavour, "mcoll-test-share")
    args = ["120", threads, str(CYCLES)]
    result = run_job(mpiexec_argv(flavour, np, program, args), env, timeout=240)
    check_passed(result, "test_share")
    built, shared = contexts(result.stderr)
    assert (built, shared) == expected_contexts(np, threads, CYCLES), result.describe()


def expected_contexts(np, threads, cycles):
    """(built, shared) in rank 0's report."""
    if threads == "multiple":
        return 6 + 1 + cycles, 0  # nothing shared: world, 3 + 1 dups, reversed, subset, rotated
    # three dups, the world and the dup made after a free share one context; the
    # reversed split and the subset without the last rank have their own; a rotated
    # split of 2 ranks is the reversed one (shared), else a new group each cycle
    return (3, 4 + cycles) if np == 2 else (3 + cycles, 4)


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo,threads",
                         [p for p in params("single") if p.values[2] in (None, "nodes=2")][:4] +
                         [*params("multiple")][:1])
def test_channels_pooled_across_splits(flavour, np, topo, threads):
    """Defect 7: a split with a new group made and freed again and again costs one
    segment, not one per cycle; communicators over the same node processes share it."""
    env = {"MCOLL_FALLBACK": "error", "MCOLL_VERBOSE": "1"}
    if topo:
        env["MCOLL_TOPO"] = topo
    program = BUILD.bin(flavour, "mcoll-test-share")
    made = {}
    for cycles in (2, 12):
        result = run_job(mpiexec_argv(flavour, np, program, ["8", threads, str(cycles)]), env, timeout=240)
        check_passed(result, "test_share")
        built, shared, made[cycles], reused = report(result.stderr)
        assert (built, shared) == expected_contexts(np, threads, cycles), result.describe()
        if threads == "multiple":
            # Under MPI_THREAD_MULTIPLE no pooled channel is claimed (threads building
            # contexts at once may give two channels one id: context.c), so every
            # context over new processes' order makes one
            assert reused == 0, result.describe()
        elif built > 3 + 1:
            assert reused >= cycles - 1, result.describe()
    if threads != "multiple":
        assert made[2] == made[12], f"channels made with 2 and 12 cycles: {made}"
