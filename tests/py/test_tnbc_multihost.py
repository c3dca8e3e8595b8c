"""T-NBC across test hosts (scripts/testhosts.sh, as test_multihost.py): the host
MPI talks TCP between the hosts, and its progress on the application's thread writes
the blocks of an alltoall from the send buffer that T-NBC keeps read-only while they
go out. The interposed writev must not wait for those sends (only that progress
completes them): test_tnbc's compute case, 64 KiB to 1 MiB per block, then reading
the result and an allreduce, 1 rank per host, with links shaped and not."""

import subprocess

import pytest

import mpijob
from test_multihost import TESTHOSTS, flavour_param, hosts, run_on_hosts  # noqa: F401 (fixture)
from test_tnbc import ON, passed, tnbc_counts

BUILD = mpijob.find_build("build")


@pytest.mark.full
@pytest.mark.hosts
@pytest.mark.parametrize("flavour,ranks", [flavour_param("openmpi", "1,1")])
@pytest.mark.parametrize("shaped", [False, True], ids=["unshaped", "shaped"])
def test_tnbc_compute_multihost(hosts, flavour, ranks, shaped):
    if shaped:
        subprocess.run([TESTHOSTS, "up", "--qdisc", "tbf rate 1gbit burst 32kb latency 1ms", str(hosts)],
                       check=True, capture_output=True, text=True)
    try:
        for _ in range(3):
            result = run_on_hosts(flavour, ranks, BUILD.bin(flavour, "mcoll-test-tnbc"), ["compute"], ON,
                                  timeout=120)
            passed(result, "compute")
            assert tnbc_counts(result.stderr)["protected"] > 0, result.stderr[-2000:]
    finally:
        if shaped:
            subprocess.run([TESTHOSTS, "up", str(hosts)], check=True, capture_output=True, text=True)
