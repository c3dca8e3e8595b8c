"""T-NBC across test hosts (scripts/testhosts.sh, as test_multihost.py): the host
MPI talks TCP between the hosts, and its progress (on the application's thread, the
progress thread or its own threads) sends from and receives near buffers that T-NBC
holds. An interposed libc call made from inside the host MPI must never wait for
T-NBC (what it would wait for may need that same progress); only the application's
own accesses may. test_tnbc's compute case: every collective T-NBC takes, 64 KiB to
1 MiB per block, clear the receive buffer, the call, compute, read the result, an
allreduce; both MPIs, 1 and 2 ranks per host, links shaped (1 Gbit/s, a deep queue)
and not."""

import subprocess

import pytest

import mpijob
from test_multihost import TESTHOSTS, flavour_param, hosts, run_on_hosts  # noqa: F401 (fixture)
from test_tnbc import ON, passed, tnbc_counts

BUILD = mpijob.find_build("build")


SHAPED = "tbf rate 1gbit burst 32kb latency 50ms"


@pytest.mark.full
@pytest.mark.hosts
@pytest.mark.parametrize("flavour,ranks", [flavour_param(f, r) for f in ("openmpi", "mpich")
                                           for r in ("1,1", "2,2")])
@pytest.mark.parametrize("shaped", [False, True], ids=["unshaped", "shaped"])
@pytest.mark.parametrize("variant", [{}, {"MCOLL_TNBC_CHUNK": "0", "MCOLL_TNBC_SENDS_LATER": "2"}],
                         ids=["default", "whole-recvs-later"])
def test_tnbc_compute_multihost(hosts, flavour, ranks, shaped, variant):
    if shaped:
        subprocess.run([TESTHOSTS, "up", "--qdisc", SHAPED, str(hosts)], check=True, capture_output=True,
                       text=True)
    try:
        result = run_on_hosts(flavour, ranks, BUILD.bin(flavour, "mcoll-test-tnbc"), ["compute"], {**ON, **variant},
                              timeout=150, finished=r"^test_tnbc: passed \(compute\)$")
        if not result.finalize_hang:
            passed(result, "compute")
            assert tnbc_counts(result.stderr)["protected"] > 0, result.stderr[-2000:]
        else:
            assert "test_tnbc: passed (compute)" in result.stdout, result.describe()
    finally:
        if shaped:
            subprocess.run([TESTHOSTS, "up", str(hosts)], check=True, capture_output=True, text=True)


@pytest.mark.full
@pytest.mark.hosts
@pytest.mark.parametrize("flavour,ranks", [flavour_param(f, r) for f in ("openmpi", "mpich")
                                           for r in ("1,1", "1,1,1")])
def test_tnbc_counts_the_ranks_of_all_hosts(hosts, flavour, ranks):
    """Test hosts are separate nodes (own /dev/shm and hostname) on one kernel: T-NBC
    counts their ranks together against the machine's cores (MCOLL_CORES=2 here,
    whatever the machine): 2 hosts x 1 rank run it, 3 stand down, and say so."""
    env = {k: v for k, v in ON.items() if k != "MCOLL_TNBC_CORES_SHARED"}
    result = run_on_hosts(flavour, ranks, BUILD.bin(flavour, "mcoll-test-tnbc"), ["colls"],
                          {**env, "MCOLL_CORES": "2"}, timeout=90,
                          finished=r"^test_tnbc: passed \(colls\)$")
    assert "test_tnbc: passed (colls)" in result.stdout, result.describe()
    n = ranks.count(",") + 1
    off = f"T-NBC is off: {n} ranks run on a machine of 2 cores" in result.stderr
    assert off == (n > 2), result.describe()
    if not result.finalize_hang:
        passed(result, "colls")
        counts = tnbc_counts(result.stderr)
        assert counts["active"] == (n <= 2) and (counts["protected"] > 0) == (n <= 2), counts
