"""Cold start: the first calls on a fresh communicator take no
page faults in mcoll's segment, so they run at the speed of warm calls.
tests/mpi/test_coldstart.c counts each rank's minor faults (getrusage) over the first
100 calls of bcast, reductions, allgather, gather, scatter and alltoall after a
communicator's set-up, and checks the results. Before shm/prefault.c: 50-1600 faults
per case and rank (one to sixteen per call, each 1-3 µs)."""

import pytest

from mpijob import BASE_ENV, BUILD, check_passed, flavour_param, mpiexec_argv, run_job

JOB_TIMEOUT = 180


@pytest.mark.parametrize("flavour,np", [flavour_param("openmpi", 2), flavour_param("openmpi", 4, full=True),
                                        flavour_param("mpich", 2), flavour_param("mpich", 4, full=True)])
def test_first_calls_take_no_page_faults(flavour, np):
    program = BUILD.bin(flavour, "mcoll-test-coldstart")
    result = run_job(mpiexec_argv(flavour, np, program), BASE_ENV, JOB_TIMEOUT)
    assert check_passed(result, "test_coldstart") == 34


@pytest.mark.parametrize("flavour", [flavour_param("openmpi"), flavour_param("mpich", full=True)])
def test_faults_counted_without_prefault(flavour):
    """MCOLL_SHM_PREFAULT=0 brings the faults back: the test can see them."""
    program = BUILD.bin(flavour, "mcoll-test-coldstart")
    result = run_job(mpiexec_argv(flavour, 2, program), {**BASE_ENV, "MCOLL_SHM_PREFAULT": "0"},
                     JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    assert "page faults" in result.stdout
    assert "<- too many" in result.stdout
    assert "test_coldstart: 34 checks, 0 errors" not in result.stdout
