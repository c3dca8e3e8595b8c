"""Communicators with identical groups share one mcoll context (issue 8, defect 7):
interleaved calls over several dups stay correct, a freed dup leaves the others
working, a reordered split keeps its own context, and with MPI_THREAD_MULTIPLE
nothing is shared. The MCOLL_VERBOSE report counts contexts built and shared."""

import re

import pytest

import mpijob
from mpijob import check_passed, mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
CASES = [("openmpi", 2, None), ("openmpi", 3, None), ("openmpi", 5, "nodes=2"),
         ("openmpi", 4, "nodes=2,sockets=2"), ("mpich", 2, None), ("mpich", 4, "nodes=2")]


def contexts(stderr):
    m = re.search(r"^mcoll: contexts built=(\d+) shared=(\d+)$", stderr, re.M)
    assert m, f"no contexts line in the MCOLL_VERBOSE report:\n{stderr[-2000:]}"
    return int(m.group(1)), int(m.group(2))


def params(threads):
    for flavour, np, topo in CASES:
        marks = [] if flavour in BUILD.flavours else [pytest.mark.skip(reason=f"{flavour} not built")]
        yield pytest.param(flavour, np, topo, threads, marks=marks,
                           id=f"{flavour}-{np}-{topo or 'flat'}-{threads}")


@pytest.mark.parametrize("flavour,np,topo,threads",
                         [*params("single"), *[p for p in params("multiple")][:2]])
def test_share(flavour, np, topo, threads):
    env = {"MCOLL_FALLBACK": "error", "MCOLL_VERBOSE": "1"}
    if topo:
        env["MCOLL_TOPO"] = topo
    program = BUILD.bin(flavour, "mcoll-test-share")
    args = ["120"] + (["multiple"] if threads == "multiple" else [])
    result = run_job(mpiexec_argv(flavour, np, program, args), env, timeout=240)
    check_passed(result, "test_share")
    built, shared = contexts(result.stderr)
    if threads == "single":
        # three dups, the world and the dup made after a free share one context;
        # the reversed split has its own
        assert (built, shared) == (2, 4), result.describe()
    else:
        assert (built, shared) == (6, 0), result.describe()
