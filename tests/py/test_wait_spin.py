"""Waits past the spin on a node with a core per rank (src/shm/wait.c): they poll for
MCOLL_SPIN_US instead of yielding, since a yield hands the core to any runnable
process, even one at nice 19, for up to a scheduler tick: large gathers took 4 ms
instead of 0.1-0.5 ms per call while other jobs ran (bench/records/rooted). The
count of sched_yield calls (strace) tells the two apart whatever the machine's load:
the root reads 4 MiB per call (hundreds of microseconds, far past MCOLL_SPIN's polls)
while the other rank waits; every result is checked (mcoll-bench -c)."""

import re
import shutil

import pytest

from mpijob import BASE_ENV, BUILD, flavour_param, syscall_count

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
