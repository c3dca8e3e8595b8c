"""What the arguments of non-blocking collectives may do (tests/mpi/test_nbc_args.c),
compared line by line between a run without mcoll and one under it, on both MPIs:
datatypes and ops freed while a call is in flight, invalid arguments returned by the
MPI_I* call itself through the communicator's handler, intercommunicator calls, a user
op that needs a deep stack, erroneous buffers (MPI_IN_PLACE as a bcast buffer, the
send buffer as the receive buffer); an error found while a call runs, reported by its
wait through the call's communicator."""

import difflib

import pytest

import mpijob
from mpijob import mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
PROGRAM = "mcoll-test-nbc-args"
NP = 3  # unequal groups for the intercommunicator case


@pytest.mark.parametrize("flavour", [
    pytest.param(f, marks=[] if f in BUILD.flavours else [pytest.mark.skip(reason=f"build/{f} not built")])
    for f in mpijob.FLAVOURS])
def test_nbc_args_same_as_native(flavour):
    """Every case of test_nbc_args in one job (a crash stops the later ones: the diff
    shows where)."""
    program = BUILD.bin(flavour, PROGRAM)
    native = run_job(mpiexec_argv(flavour, NP, program, mcoll=False), {}, 120)
    assert native.returncode == 0 and "test_nbc_args: done" in native.stdout, native.describe()
    lines = [line for line in native.stdout.splitlines() if ": " in line and "skipped" not in line]
    assert len(lines) >= 10, native.stdout
    with_mcoll = run_job(mpiexec_argv(flavour, NP, program), {}, 120)
    diff = "\n".join(difflib.unified_diff(native.stdout.splitlines(), with_mcoll.stdout.splitlines(),
                                         "native", "with mcoll", lineterm=""))
    assert not diff, f"results differ from the native run:\n{diff}\n{with_mcoll.describe()}"
    assert with_mcoll.returncode == 0, with_mcoll.describe()


@pytest.mark.parametrize("flavour", [
    pytest.param(f, marks=[] if f in BUILD.flavours else [pytest.mark.skip(reason=f"build/{f} not built")])
    for f in mpijob.FLAVOURS])
def test_error_found_at_wait_goes_to_the_communicator(flavour):
    """A truncating MPI_Ibcast on a communicator with MPI_ERRORS_RETURN (MPI_COMM_WORLD's
    fatal): the readers get MPI_ERR_TRUNCATE, through that communicator, from the call
    or its wait. Natively Open MPI 4.1 raises it on MPI_COMM_WORLD at the wait (the job
    aborts) and MPICH 4.0 returns MPI_ERR_OTHER: mcoll says what happened, where the
    call asked."""
    result = run_job(mpiexec_argv(flavour, NP, BUILD.bin(flavour, PROGRAM), ["wait_truncate"]), {}, 120)
    assert result.returncode == 0, result.describe()
    assert ("wait_truncate ibcast root 4000 B readers 2000 B: MPI_SUCCESS"
            " (rank 1: MPI_ERR_TRUNCATE) (rank 2: MPI_ERR_TRUNCATE)") in result.stdout, result.describe()
