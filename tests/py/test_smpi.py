"""SMPI (MPIX_Smpi_* in mcoll.h, docs/threads.md#smpi-ownership-passing): ranks pass a
message's buffer instead of its bytes. Between thread ranks of one process the buffer
arrives at the address it was sent from; to other processes, and for process ranks
under libmcoll (both MPIs), the bytes are copied. Cannon's matrix multiply in both
variants (Sendrecv_replace, SMPI) is checked against a serial product."""

import pytest

import mpijob
from mpijob import BUILD, FULL, check_passed, run_job
from test_thread_ranks import FLAVOUR, flavoured, layout, threads_argv

JOB_TIMEOUT = 180


@pytest.mark.parametrize("flavour,threads,np", flavoured(
    [layout(4, 4), layout(2, 4), layout(1, 3), layout(3, 3, full=True), layout(3, 6, full=True),
     layout(15, 15, full=True)], openmpi_default=["2x2"]))
def test_smpi_as_thread_ranks(flavour, threads, np):
    """Same process: the sender's buffer itself; another process: a copy."""
    result = run_job(threads_argv(threads, np, "mcoll-test-smpi", [threads], flavour=flavour), None,
                     JOB_TIMEOUT)
    check_passed(result, "test_smpi")


@pytest.mark.parametrize("flavour,np", mpijob.flavour_params((2,)) + mpijob.flavour_params((3,), full=True))
def test_smpi_as_processes(flavour, np):
    """libmcoll's fallback: every message is a copy, the program runs unchanged."""
    result = run_job(mpijob.mpiexec_argv(flavour, np, BUILD.bin(flavour, "mcoll-test-smpi"), [0]),
                     None, JOB_TIMEOUT)
    check_passed(result, "test_smpi")


def test_smpi_needs_a_provider():
    """Without mcoll loaded the weak MPIX_Smpi_* are NULL: the program can tell."""
    result = run_job(mpijob.mpiexec_argv(FLAVOUR, 1, BUILD.bin(FLAVOUR, "mcoll-test-smpi"), [0],
                                         mcoll=False), None, JOB_TIMEOUT)
    assert result.returncode != 0 and "MPIX_Smpi_* not loaded" in result.stderr, result.describe()


def check_cannon(result, np, variants=("mpi", "smpi")):
    assert result.returncode == 0 and "verified" in result.stdout, result.describe()
    for variant in variants:
        assert f"ranks={np} {variant} " in result.stdout, result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured(
    [layout(4, 4), layout(2, 4), layout(1, 4, full=True), layout(9, 9, full=True),
     layout(8, 16, full=True)], openmpi_default=["2x2"]))
def test_cannon_as_thread_ranks(flavour, threads, np):
    result = run_job(threads_argv(threads, np, "mcoll-app-cannon", [48, "both", 2], flavour=flavour),
                     None, JOB_TIMEOUT)
    check_cannon(result, np)


@pytest.mark.parametrize("flavour,np", mpijob.flavour_params((4,)) + mpijob.flavour_params((1,), (9,), full=True))
def test_cannon_as_processes(flavour, np):
    result = run_job(mpijob.mpiexec_argv(flavour, np, BUILD.bin(flavour, "mcoll-app-cannon"),
                                         [36, "both", 2]), None, JOB_TIMEOUT)
    check_cannon(result, np)


def test_cannon_plain_mpi_without_mcoll():
    """The Sendrecv_replace variant is plain MPI: it runs under the host MPI alone."""
    result = run_job(mpijob.mpiexec_argv(FLAVOUR, 4, BUILD.bin(FLAVOUR, "mcoll-app-cannon"),
                                         [32, "mpi", 1], mcoll=False), None, JOB_TIMEOUT)
    check_cannon(result, 4, ("mpi",))
