"""What the arguments of non-blocking collectives may do (tests/mpi/test_nbc_args.c),
compared line by line between a run without mcoll and one under it, on both MPIs:
datatypes and ops freed while a call is in flight, invalid arguments returned by the
MPI_I* call itself through the communicator's handler, intercommunicator calls, a user
op that needs a deep stack, erroneous buffers (MPI_IN_PLACE as a bcast buffer, the
send buffer as the receive buffer)."""

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
