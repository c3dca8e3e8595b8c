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

from mpijob import BASE_ENV, BUILD, flavour_param, mpiexec_argv, run_job

JOB_TIMEOUT = 150
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
CALLS = 60
ARGS = ["-m", "latency", "-C", "gather", "-b", "4M", "-e", "4M", "-n", str(CALLS), "-w", "0", "-r", "1", "-c"]


def yields(flavour, tmp_path, extra):
    """sched_yield calls of both ranks of one job (strace -c per process)."""
    # one strace per rank (a wrapper), its summary in per_rank.sh.<pid>
    wrapper = tmp_path / "per_rank.sh"
    wrapper.write_text('#!/bin/sh\nexec strace -f -qq --seccomp-bpf -e trace=sched_yield -c -o "$0.$$" "$@"\n')
    wrapper.chmod(0o755)
    program = BUILD.bin(flavour, "mcoll-bench")
    result = run_job(mpiexec_argv(flavour, 2, wrapper, [program, *ARGS]), {**BASE_ENV, **extra}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    assert re.search(r"^  gather +4194304 ", result.stdout, re.M), result.describe()
    total, files = 0, sorted(tmp_path.glob("per_rank.sh.*"))
    assert len(files) == 2, files
    for f in files:
        m = re.search(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)(?:\s+\d+)?\s+sched_yield$", f.read_text(), re.M)
        total += int(m.group(1)) if m else 0
        f.unlink()
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
