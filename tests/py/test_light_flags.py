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

from mpijob import BASE_ENV, BUILD, flavour_param, syscall_count

JOB_TIMEOUT = 150
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
CALLS = 40
ARGS = ["-m", "latency", "-C", "gather", "-b", "4M", "-e", "4M", "-n", str(CALLS), "-w", "0", "-r", "1", "-c"]
SLEEP_AT_ONCE = {"MCOLL_SPIN_US": "0", "MCOLL_YIELD_US": "0"}


def membarriers(flavour, tmp_path, extra):
    """membarrier calls of both ranks of one job (strace -c per process)."""
    result, total = syscall_count(flavour, tmp_path, "membarrier", BUILD.bin(flavour, "mcoll-bench"), ARGS,
                                  {**BASE_ENV, **extra}, JOB_TIMEOUT)
    assert re.search(r"^  gather +4194304 ", result.stdout, re.M), result.describe()
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
