"""T-NBC (src/tnbc, issue 10): blocking alltoall/bcast/allgather/allreduce return
early with their receive buffers protected. tests/mpi/test_tnbc.c runs one hazard per
job and checks every received word against values each rank computes; here each case
runs on both MPIs with T-NBC on (and the report must show that buffers were really
protected, or really not, and that the interposed calls really waited), and as a
reference with T-NBC off and natively.

Only the release build: the sanitizer runtimes interpose free/realloc/read/... first,
so T-NBC's own interposition of them (the free and read hazards) is not reached."""

import re

import pytest

import mpijob
from mpijob import mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
JOB_TIMEOUT = 120
ON = {"MCOLL_TNBC": "1", "MCOLL_PROGRESS_THREAD": "1", "MCOLL_VERBOSE": "1",
      "MCOLL_FALLBACK": "error"}

# case: (buffers protected on rank 0, interposed calls waited on rank 0)
CASES = {
    "touch": (True, None),
    "late": (True, None),
    "free": (True, True),
    "realloc": (True, True),
    "munmap": (True, True),
    "next": (True, None),
    "read": (True, True),
    "thread": (True, None),
    "stack": (False, None),
    "shared": (False, None),
    "handler": (True, None),
    "fork": (True, True),
    "exit": (True, None),
    "noncontig": (False, None),
    "colls": (True, None),
    "alltoallv": (True, None),
}


def flavour_marks(flavour):
    if flavour in BUILD.flavours:
        return []
    return [pytest.mark.skip(reason=f"build/{flavour}/lib/libmcoll.so not built")]


def params(nps=(2, 3)):
    return [pytest.param(f, np, case, marks=flavour_marks(f), id=f"{f}-{np}-{case}")
            for f in mpijob.FLAVOURS for np in nps for case in CASES]


def passed(result, case):
    if result.returncode != 0 or f"test_tnbc: passed ({case})" not in result.stdout:
        pytest.fail(f"test_tnbc {case} failed\n{result.describe()}")


def tnbc_counts(stderr):
    m = re.search(r"^mcoll: tnbc active=(\d) calls=(\d+) protected=(\d+) faults=(\d+) waits=(\d+)$",
                  stderr, re.M)
    assert m, f"no T-NBC line in the report:\n{stderr[-3000:]}"
    return dict(zip(("active", "calls", "protected", "faults", "waits"), map(int, m.groups())))


@pytest.mark.parametrize("flavour,np,case", params())
def test_tnbc_hazard(flavour, np, case):
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    result = run_job(mpiexec_argv(flavour, np, program, [case]), ON, JOB_TIMEOUT)
    passed(result, case)
    counts = tnbc_counts(result.stderr)
    protected, waited = CASES[case]
    assert counts["active"] == 1 and counts["calls"] > 0, counts
    if protected:
        assert counts["protected"] > 0, counts
    else:
        assert counts["protected"] == 0, counts
    if waited:
        assert counts["waits"] > 0, counts


@pytest.mark.parametrize("flavour,np,case", params(nps=(2,)))
def test_tnbc_reference(flavour, np, case):
    """The same checks with T-NBC off and natively (the program is the reference)."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    passed(run_job(mpiexec_argv(flavour, np, program, [case]), {"MCOLL_TNBC": "0"}, JOB_TIMEOUT), case)
    passed(run_job(mpiexec_argv(flavour, np, program, [case], mcoll=False), {}, JOB_TIMEOUT), case)


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_needs_progress_thread(flavour):
    """Without a progress thread T-NBC stays off and MCOLL_VERBOSE says why."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    env = dict(ON, MCOLL_PROGRESS_THREAD="0")
    result = run_job(mpiexec_argv(flavour, 2, program, ["touch"]), env, JOB_TIMEOUT)
    passed(result, "touch")
    assert "T-NBC is off: no progress thread" in result.stderr, result.describe()
    assert tnbc_counts(result.stderr)["calls"] == 0
