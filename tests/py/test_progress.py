"""A collective must let the host MPI progress: a rank waiting
inside an mcoll collective keeps the application's point-to-point moving, so a
rendezvous send to a receive posted before the collective completes instead of
deadlocking. tests/mpi/test_progress.c runs barrier, allreduce, bcast, reduce and
allgather (small and large) against messages of 512 B to 1 MiB.

A hang is caught by a short job timeout and reported with the case that hung
(the program's last "start" line)."""

import re

import pytest

import mpijob
from mpijob import check_passed, mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
JOB_TIMEOUT = 60
PENDING_TIMEOUT = 30


def params():
    cases = []
    for flavour in mpijob.FLAVOURS:
        skip = None if flavour in BUILD.flavours else f"build/{flavour}/lib/libmcoll.so not built"
        marks = [pytest.mark.skip(reason=skip)] if skip else []
        for np in (2, 4):
            for mode in ("plain", "late", "thread-multiple"):
                cases.append(pytest.param(flavour, np, mode, id=f"{flavour}-{np}-{mode}",
                                          marks=marks + ([mpijob.FULL] if np > 2 else [])))
    return cases


MODE_ARGS = {
    "plain": [],
    # The senders come 50 ms late, when the receivers already sleep on a futex.
    "late": ["--late-ms", "50"],
    "thread-multiple": ["--thread", "multiple"],
}


@pytest.mark.parametrize("flavour,np,mode", params())
def test_progress_during_collective(flavour, np, mode):
    program = BUILD.bin(flavour, "mcoll-test-progress")
    argv = mpiexec_argv(flavour, np, program, MODE_ARGS[mode])
    result = run_job(argv, {"MCOLL_FALLBACK": "error"}, JOB_TIMEOUT, expect_timeout=True)
    if result.seconds >= JOB_TIMEOUT:
        started = re.findall(r"^start (.*)$", result.stdout, re.M)
        case = started[-1] if started else "(before the first case)"
        pytest.fail(f"deadlock: the job hung in '{case}' and was killed after {JOB_TIMEOUT} s\n"
                    f"{result.describe()}")
    check_passed(result, "test_progress")


# A non-blocking collective in flight while its rank is blocked in a call that only
# the host MPI runs (MPI_Sendrecv_replace, MPI_Comm_dup, MPI_Comm_split,
# MPI_Win_fence), which the peer makes only after waiting for its own part of the
# collective: MPI's progress rule says it completes (it does natively); mcoll's
# progress thread, started when the call is left pending, moves it, also in programs
# of MPI_THREAD_SINGLE and FUNNELED. 2 ranks: the call of rank 0 needs rank 1's part.
def pending_params():
    cases = []
    for flavour in mpijob.FLAVOURS:
        skip = None if flavour in BUILD.flavours else f"build/{flavour}/lib/libmcoll.so not built"
        for thread in ("single", "funneled", "multiple"):
            for mcoll in (True, False):
                marks = [pytest.mark.skip(reason=skip)] if skip else []
                if not mcoll or thread == "multiple":
                    marks.append(pytest.mark.full)
                cases.append(pytest.param(flavour, thread, mcoll, marks=marks,
                                          id=f"{flavour}-{thread}-{'mcoll' if mcoll else 'native'}"))
    return cases


@pytest.mark.parametrize("flavour,thread,mcoll", pending_params())
def test_pending_call_progresses_in_host_calls(flavour, thread, mcoll):
    program = BUILD.bin(flavour, "mcoll-test-progress")
    argv = mpiexec_argv(flavour, 2, program, ["--thread", thread, "--pending", "all"], mcoll=mcoll)
    result = run_job(argv, {"MCOLL_FALLBACK": "error"}, PENDING_TIMEOUT, expect_timeout=True)
    if result.seconds >= PENDING_TIMEOUT:
        started = re.findall(r"^start (.*)$", result.stdout, re.M)
        case = started[-1] if started else "(before the first case)"
        pytest.fail(f"hung in '{case}' and was killed after {PENDING_TIMEOUT} s\n{result.describe()}")
    check_passed(result, "test_progress")
