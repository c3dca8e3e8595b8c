"""A small call's kept choice (src/coll/settled.h): on a communicator within one
node, a gather, reduce, allgather or alltoall of a size below the adaptive choice's reach keeps the
choice its first call made and skips the choice at the next calls of that size.
tests/mpi/test_settled.c checks every result across sizes, datatypes and ops of one
size, roots, MPI_IN_PLACE and communicators in turn, and counts what ran while
algorithms are forced and parameters set at run time."""

import re

import pytest

from mpijob import BASE_ENV, BUILD, flavour_param, mpiexec_argv, parse_verbose_report, run_job

JOB_TIMEOUT = 180
PROGRAM = "mcoll-test-settled"
# the phases of mode "switch" (tests/mpi/test_settled.c)
PLAIN, FORCED, AUTO, PARAM = 40, 30, 20, 10


@pytest.mark.parametrize("flavour,np,adapt", [flavour_param(f, n, a, full=n > 3 or (n > 2 and a == "0"))
                                              for f in ("openmpi", "mpich") for n in (2, 3, 4)
                                              for a in ("1", "0")])
def test_settled_results_follow_every_change(flavour, np, adapt):
    """Every result right; with MCOLL_ADAPT=0 every size up to 1 MiB keeps its choice."""
    env = {**BASE_ENV, "MCOLL_ADAPT": adapt}
    result = run_job(mpiexec_argv(flavour, np, BUILD.bin(flavour, PROGRAM)), env, JOB_TIMEOUT)
    assert result.returncode == 0 and re.search(r"^ok$", result.stdout, re.M), result.describe()


@pytest.mark.parametrize("flavour", [flavour_param("openmpi"), flavour_param("mpich")])
def test_settled_choice_follows_forced_and_set_params(flavour):
    """Calls of one settled size run what mcoll_set_algorithm forces, the rules' choice
    again after "auto", and what mcoll_set_param's thresholds then give: the counts
    per algorithm are exactly the phases' calls (a kept choice that outlived a change
    would count its calls under the old algorithm)."""
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1"}
    result = run_job(mpiexec_argv(flavour, 2, BUILD.bin(flavour, PROGRAM), ["switch"]), env, JOB_TIMEOUT)
    assert result.returncode == 0 and re.search(r"^ok$", result.stdout, re.M), result.describe()
    report = parse_verbose_report(result.stderr)
    total = PLAIN + FORCED + AUTO + PARAM
    reduce = report["reduce"]
    assert reduce["calls"] == total and reduce["hsra"] == FORCED + PARAM, reduce
    assert reduce["flat"] == PLAIN + AUTO, reduce
    gather = report["gather"]
    if "forced cma not allowed" in result.stderr or gather.get("fallback", 0):
        pytest.skip("no single copy here: " + str(gather))
    assert gather["calls"] == total and gather["cma"] == FORCED + PARAM, gather
    assert gather["area"] == PLAIN + AUTO, gather
    allgather = report["allgather"]
    assert allgather["calls"] == total and allgather["cma"] == FORCED + PARAM, allgather
    assert allgather["area"] == PLAIN + AUTO, allgather
    # (no parameter moves alltoall's choice at 8 B on two ranks: its lines)
    alltoall = report["alltoall"]
    assert alltoall["calls"] == total and alltoall["shm_direct"] == FORCED, alltoall
    assert alltoall["pair_inline"] == PLAIN + AUTO + PARAM, alltoall
