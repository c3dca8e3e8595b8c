"""Datatypes mcoll must not take for plain bytes, datatypes and payloads beyond
INT_MAX bytes, and erroneous op/type pairs of the reductions,
with tests/mpi/test_datatypes.c.

Every job runs under a hard timeout with MCOLL_FALLBACK=error: none of these cases
may fall back to the host MPI (the erroneous op/type pairs are invalid arguments,
passed on without counting as a fallback).

The two BIG-MEMORY tests (test_bigmem_*) run at 2 ranks only: ~4.1 GiB (bcast of a
2 GiB type) and ~8.2 GiB at peak (gather of 2 x 2050 MiB, the sender's packed copy
included); they are skipped when the machine has less than 12 GiB available.
"""

import difflib

import pytest

import mpijob
from mpijob import ASAN, BASE_ENV, BUILD, check_passed, flavour_param, mpiexec_argv, run_job

PROGRAM = "mcoll-test-datatypes"
CHECKED = "test_datatypes"


def run_case(flavour, np, case, env=None, timeout=120, build=BUILD):
    argv = mpiexec_argv(flavour, np, build.bin(flavour, PROGRAM), [case])
    extra = {}
    if build is not BUILD:  # as test_mpi_coll.py's ASan runs
        extra = {"MCOLL_BUILD_DIR": str(build.path),
                 "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0",
                 "UBSAN_OPTIONS": "print_stacktrace=1"}
    result = run_job(argv, {**BASE_ENV, **extra, **(env or {})}, timeout)
    return result, check_passed(result, CHECKED)


LAYOUT_RUNS = [flavour_param(f, np, topo, full=(np, topo) not in ((2, ""), (4, "nodes=2")))
               for f in mpijob.FLAVOURS for np, topo in ((2, ""), (3, ""), (4, ""), (4, "nodes=2"))]


@pytest.mark.parametrize("flavour,np,topo", LAYOUT_RUNS)
def test_reordered_and_overlapping_typemaps(flavour, np, topo):
    """A struct with its two ints swapped (true extent = size) and an indexed type
    reading one int twice, against plain MPI_INT on the other side: bcast both ways,
    gather, allgather, scatter and alltoall give what the typemaps say; then 24 bcasts
    (blocking and MPI_Ibcast, every root) with a strided vector on the root's side or
    on the others', where the caller's-stack try and the meeting meet."""
    env = {"MCOLL_TOPO": topo} if topo else {}
    _, checks = run_case(flavour, np, "layouts", env)
    assert checks == 15 * np * np + 8 * np + 26 * np


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_dense_derived_types_move_without_packing(flavour):
    """The layout walk: derived types whose data is plain bytes in order (contiguous,
    gap-free vectors, in-order indexed, dup, nested, resized, packed struct) are not
    packed; reordered, overlapping, gapped ones are (PMPI_Pack calls counted)."""
    _, checks = run_case(flavour, 2, "zerocopy")
    assert checks == 13


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
@pytest.mark.parametrize("alg", ["", "cma"])
def test_bcast_mpi_bottom_absolute_struct(flavour, alg):
    """MPI_Bcast(MPI_BOTTOM, 1, struct of absolute addresses): MPICH's MPI_Pack
    refuses a null input buffer, mcoll must not abort."""
    env = {"MCOLL_ALG_BCAST": alg} if alg else {}
    run_case(flavour, 3, "bottom", env)


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param(f, build=ASAN) for f in mpijob.FLAVOURS])
def test_layouts_asan(flavour):
    """The layout walk and the packing helpers under ASan/UBSan (type references
    from MPI_Type_get_contents freed, no overflow)."""
    for case in ("layouts", "bottom"):
        result, _ = run_case(flavour, 3, case, build=ASAN)
        assert "runtime error" not in result.stderr and "AddressSanitizer" not in result.stderr, \
            result.describe()


@pytest.mark.parametrize("flavour,topo", [flavour_param(f, t) for f in mpijob.FLAVOURS
                                          for t in ("", "nodes=2")])
def test_op_type_errors_same_as_native(flavour, topo):
    """MPI_BAND/MPI_BOR on MPI_DOUBLE, MPI_SUM on a derived contiguous type and on
    MPI_2INT, MPI_BXOR on MPI_FLOAT, MPI_MAXLOC on MPI_INT in reduce, allreduce,
    reduce_scatter(_block), scan and exscan: every rank gets the host MPI's error
    class (MPI_ERRORS_RETURN), none aborts, and the communicator still works."""
    program = BUILD.bin(flavour, PROGRAM)
    native = run_job(mpiexec_argv(flavour, 3, program, ["ops"], mcoll=False), {}, 120)
    check_passed(native, CHECKED)
    cases = [line for line in native.stdout.splitlines() if " class " in line]
    assert len(cases) == 36 and not [c for c in cases if "class 0" in c], native.stdout
    env = {"MCOLL_TOPO": topo} if topo else {}
    with_mcoll, _ = run_case(flavour, 3, "ops", env)
    diff = "\n".join(difflib.unified_diff(native.stdout.splitlines(), with_mcoll.stdout.splitlines(),
                                         "native", "with mcoll", lineterm=""))
    assert not diff, f"error classes differ from the native run:\n{diff}\n{with_mcoll.describe()}"


def enough_memory(gib):
    with open("/proc/meminfo") as f:
        info = dict(line.split(":", 1) for line in f)
    return int(info["MemAvailable"].split()[0]) >= gib * (1 << 20)


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_bigmem_bcast_type_beyond_int_max(flavour):
    """BIG MEMORY (2 ranks, ~4.1 GiB): bcast of one MPI_Type_contiguous of
    2^28 + 2^17 doubles (2 GiB + 1 MiB, MPI_Type_size says MPI_UNDEFINED)."""
    if not enough_memory(12):
        pytest.skip("less than 12 GiB available")
    run_case(flavour, 2, "bigtype", timeout=180)


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_bigmem_gather_packed_payload_beyond_int_max(flavour):
    """BIG MEMORY (2 ranks, ~8.2 GiB at peak): gather of 2 x an hvector of 1025 MiB
    per rank (2050 MiB to pack, beyond MPI_Pack's int size) to a root in place."""
    if not enough_memory(12):
        pytest.skip("less than 12 GiB available")
    run_case(flavour, 2, "bigpack", timeout=240)
