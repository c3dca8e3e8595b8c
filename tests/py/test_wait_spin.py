"""Waits past the spin on a node with a core per rank (src/shm/wait.c): they poll for
MCOLL_SPIN_US instead of yielding, since a yield hands the core to any runnable
process, even one at nice 19, for up to a scheduler tick: large gathers took 4 ms
instead of 0.1-0.5 ms per call while other jobs ran (bench/records/rooted). The
count of sched_yield calls (strace) tells the two apart whatever the machine's load:
the root reads 4 MiB per call (hundreds of microseconds, far past MCOLL_SPIN's polls)
while the other rank waits; every result is checked (mcoll-bench -c)."""

import contextlib
import os
import re
import shutil
import signal
import subprocess

import pytest

from mpijob import BASE_ENV, BUILD, flavour_param, mpiexec_argv, run_job, syscall_count

# asserts on timing or CPU use: run alone (tests/run.sh's serial phase)
pytestmark = pytest.mark.serial

JOB_TIMEOUT = 150
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
CALLS = 60
ARGS = ["-m", "latency", "-C", "gather", "-b", "4M", "-e", "4M", "-n", str(CALLS), "-w", "0", "-r", "1", "-c"]


def yields(flavour, tmp_path, extra):
    """sched_yield calls of both ranks of one job (strace -c per process)."""
    result, total = syscall_count(flavour, tmp_path, "sched_yield", BUILD.bin(flavour, "mcoll-bench"), ARGS,
                                  {**BASE_ENV, **extra}, JOB_TIMEOUT)
    assert re.search(r"^  gather +4194304 ", result.stdout, re.M), result.describe()
    return total


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_waits_poll_instead_of_yielding(flavour, tmp_path):
    # (10 s: also the waits a loaded machine stretches past the default's 20 ms poll)
    polled = yields(flavour, tmp_path, {"MCOLL_SPIN_US": "10000000"})
    yielded = yields(flavour, tmp_path, {"MCOLL_SPIN_US": "0"})
    # the other rank waits past the spin in every mcoll call when it may yield (how
    # often it yields in one wait depends on what else runs); while it polls, none
    # yields (a few yields come from setting up the node's segment)
    assert yielded >= CALLS, (polled, yielded)
    assert polled < CALLS // 4, (polled, yielded)


def autogroups_apply():
    """Linux's autogroups on, and this process in the root cpu cgroup (where they act)."""
    try:
        enabled = open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() == "1"
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return False
    v1 = [line.split(":", 2)[2] for line in lines if "cpu" in line.split(":", 2)[1].split(",")]
    v2 = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
    return enabled and (v1 or v2)[0] == "/"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_waits_sleep_soon_where_yields_are_futile(flavour):
    """MPICH's launcher starts each rank in a session of its own, so each is its own
    scheduler autogroup, and a yield only passes the core within the yielder's group:
    at 4 ranks on 2 cores beside other jobs a waiting rank kept its core for a slice
    (MPICH allreduce 1.4-1.8 ms a call with two CPU hogs beside). The node's ranks
    compare their autogroups at set-up; where they differ and the node is
    oversubscribed, waits sleep on a futex after MCOLL_YIELD_FUTILE_US (50 here; the
    default keeps MCOLL_YIELD_US, which wins on a quiet node). The report says so
    (rank 0), and every result is checked."""
    ranks = 4
    argv = mpiexec_argv(flavour, ranks, BUILD.bin(flavour, "mcoll-bench"),
                        ["-m", "latency", "-C", "barrier,allreduce,bcast", "-b", "8", "-e", "64", "-f", "8",
                         "-n", "50", "-w", "5", "-r", "1", "-c"])
    result = run_job(argv, {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_YIELD_FUTILE_US": "50"}, JOB_TIMEOUT)
    assert result.returncode == 0 and re.search(r"^  allreduce +64 ", result.stdout, re.M), result.describe()
    said = re.search(r"^mcoll: waits sleep after 50 us in \d+ node segments: ranks in different autogroups",
                     result.stderr, re.M)
    # (Open MPI starts its ranks in its own session; a machine with 4 cores is not
    # oversubscribed at 4 ranks)
    expected = flavour == "mpich" and (os.cpu_count() or 1) < ranks and autogroups_apply()
    assert bool(said) == bool(expected), result.describe()



@contextlib.contextmanager
def busy_loops(n, seconds):
    """n busy loops in sessions of their own (other jobs' tasks), for at most seconds."""
    procs = [subprocess.Popen(["timeout", str(seconds), "sh", "-c", "while :; do :; done"], start_new_session=True)
             for _ in range(n)]
    try:
        yield
    finally:
        # the whole session: killing timeout alone would leave its loop running
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_waits_sleep_once_yields_keep_the_core(flavour):
    """Where yields may be futile (above), a wait also sleeps once its yields have kept
    the core for MCOLL_YIELD_FUTILE_RUN_US in a row (no context switch of the thread)
    while more tasks are runnable than the node has ranks: beside other jobs a futile
    yield returns at once for a whole slice. Two busy loops beside make sure of the
    latter; with 1 us any wait whose first round of yields passed no core then sleeps
    early, and at 4 ranks on 2 cores many do. The report counts them (rank 0's
    process); every result is checked. Open MPI's ranks share a session: nothing to
    report there."""
    ranks = 4
    argv = mpiexec_argv(flavour, ranks, BUILD.bin(flavour, "mcoll-bench"),
                        ["-m", "latency", "-C", "barrier,allreduce,reduce", "-b", "8", "-e", "4K", "-f", "512",
                         "-n", "30", "-w", "3", "-r", "1", "-c"])
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_YIELD_FUTILE_US": "20000", "MCOLL_YIELD_FUTILE_RUN_US": "1"}
    with busy_loops(2, JOB_TIMEOUT):
        result = run_job(argv, env, JOB_TIMEOUT)
    assert result.returncode == 0 and re.search(r"^  reduce +4096 ", result.stdout, re.M), result.describe()
    said = re.search(r"^mcoll: waits sleep after 20000 us in \d+ node segments: ranks in different autogroups.*"
                     r"; or after 1 us of yields that kept it: (\d+) of (\d+) waits here$", result.stderr, re.M)
    expected = flavour == "mpich" and (os.cpu_count() or 1) < ranks and autogroups_apply()
    assert bool(said) == bool(expected), result.describe()
    if said:
        early, waits = int(said.group(1)), int(said.group(2))
        assert 0 < early <= waits, result.describe()
