"""Flags published with plain release stores (MCOLL_LIGHT_FLAGS, src/shm/wait.c): a
rank about to sleep on a flag issues membarrier(GLOBAL_EXPEDITED) between counting
itself a sleeper and reading the flag, so that a writer that stored the flag without
a full barrier either sees the sleeper or is seen. With MCOLL_YIELD_US=0 and
MCOLL_SPIN_US=0 the waiting rank sleeps in every call; every result is checked
(mcoll-bench -c) with light flags on and off, and strace counts the membarrier
calls: one per sleep when on, only the set-up's query and registration when off."""

import re
import shutil

import pytest

from mpijob import BASE_ENV, BUILD, flavour_param, mpiexec_argv, run_job

JOB_TIMEOUT = 150
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
CALLS = 40
ARGS = ["-m", "latency", "-C", "gather", "-b", "4M", "-e", "4M", "-n", str(CALLS), "-w", "0", "-r", "1", "-c"]
SLEEP_AT_ONCE = {"MCOLL_SPIN_US": "0", "MCOLL_YIELD_US": "0"}


def membarriers(flavour, tmp_path, extra):
    """membarrier calls of both ranks of one job (strace -c per process)."""
    wrapper = tmp_path / "per_rank.sh"
    wrapper.write_text('#!/bin/sh\nexec strace -f -qq --seccomp-bpf -e trace=membarrier -c -o "$0.$$" "$@"\n')
    wrapper.chmod(0o755)
    program = BUILD.bin(flavour, "mcoll-bench")
    result = run_job(mpiexec_argv(flavour, 2, wrapper, [program, *ARGS]), {**BASE_ENV, **extra}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    assert re.search(r"^  gather +4194304 ", result.stdout, re.M), result.describe()
    total, files = 0, sorted(tmp_path.glob("per_rank.sh.*"))
    assert len(files) == 2, files
    for f in files:
        m = re.search(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)(?:\s+\d+)?\s+membarrier$", f.read_text(), re.M)
        total += int(m.group(1)) if m else 0
        f.unlink()
    return total


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_sleepers_fence_when_flags_are_light(flavour, tmp_path):
    light = membarriers(flavour, tmp_path, {**SLEEP_AT_ONCE, "MCOLL_LIGHT_FLAGS": "1"})
    full = membarriers(flavour, tmp_path, {**SLEEP_AT_ONCE, "MCOLL_LIGHT_FLAGS": "0"})
    if light <= 4:
        pytest.skip(f"membarrier(GLOBAL_EXPEDITED) not offered here ({light} calls)")
    # each rank queries and registers once; the waiting rank sleeps in every call
    assert full <= 4, (light, full)
    assert light >= CALLS // 2, (light, full)
