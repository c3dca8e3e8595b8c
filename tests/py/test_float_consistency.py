"""Floating-point reductions give every rank the same bits.

tests/mpi/test_float_consistency.c sums floats and doubles of mixed magnitudes with
random signs (the order of the terms changes the result) from 1 to 1M elements:
allreduce, also in place, must leave the same bytes on every rank, and MPI_MAX over
signed zeros too; reduce, reduce_scatter(_block), scan and exscan must give the same
bytes when called twice, and every result must lie within rounding of the exact sum.
Run natively (the MPIs' own answer), under mcoll with its own choices, under the fake
hierarchies (inter-node recursive doubling, Rabenseifner, binomial), and with each
reduction algorithm forced on every reduction collective.
"""

import pytest

import mpijob
from mpijob import check_passed, mpiexec_argv, parse_verbose_report, run_job

BUILD = mpijob.find_build("build")
PROGRAM = "mcoll-test-float-consistency"
JOB_TIMEOUT = 300
# A round of the adaptive choice runs the candidates in turn, whose folds go in other
# orders: a float sum may round differently from one call to the next (the same bits
# on every rank at each call). Classes from 16 KiB start their round at the 3rd call, so
# the "called twice" checks keep the 160 calls' warm-up that every class had before.
BASE_ENV = {"MCOLL_FALLBACK": "error", "MCOLL_ADAPT_LONG": "0"}
REDUCTIONS = ("allreduce", "reduce", "reduce_scatter", "reduce_scatter_block", "scan", "exscan")
ALGORITHMS = ("flat", "hsra", "p2p", "cma")


def param(flavour, np, topo, *more, full=False):
    marks = [] if flavour in BUILD.flavours else [
        pytest.mark.skip(reason=f"build/{flavour}/lib/libmcoll.so not built")]
    marks += [mpijob.FULL] if full else []
    return pytest.param(flavour, np, topo, *more, marks=marks,
                        id="-".join(str(x) for x in (flavour, np, topo or "flat", *more)))


def run(flavour, np, topo, env=(), max_count=None):
    """Across fake nodes up to 300000 elements (2.3 MiB of doubles): the inter-node
    algorithms' regimes start far below it, and their traffic is the host's
    point-to-point (the flat runs keep 1M)."""
    args = []
    if max_count is None and topo:
        max_count = 300000
    if max_count:
        args += ["--max-count", max_count]
    env = {**BASE_ENV, **({"MCOLL_TOPO": topo} if topo else {}), **dict(env)}
    program = BUILD.bin(flavour, PROGRAM)
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_passed(result, program="test_float_consistency")
    return result


# Main 57f7bf2 failed every one of these from 3 ranks (flat folded from each rank's
# own input), and from 2 ranks with the signed zeros.
@pytest.mark.parametrize("flavour,np,topo", [
    *(param("openmpi", n, None, full=n != 3) for n in range(2, 9)),
    *(param("mpich", n, None, full=n != 3) for n in (2, 3, 4, 6, 8)),
])
def test_float_consistency(flavour, np, topo):
    run(flavour, np, topo)


# Across fake nodes the leaders' recursive doubling swapped operands between the
# two partners of a step (the signed zeros differed on main).
@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo", [
    param("openmpi", 2, "nodes=2"), param("openmpi", 4, "nodes=2"), param("openmpi", 5, "nodes=2"),
    param("openmpi", 3, "nodes=3"), param("openmpi", 6, "nodes=3"), param("openmpi", 7, "nodes=3"),
    param("openmpi", 4, "nodes=2,sockets=2"), param("openmpi", 8, "nodes=2,sockets=2"),
    param("openmpi", 6, "sockets=2"),
    param("mpich", 3, "nodes=3"), param("mpich", 4, "nodes=2,sockets=2"), param("mpich", 8, "nodes=2"),
])
def test_float_consistency_topo(flavour, np, topo):
    run(flavour, np, topo)


FORCED = [("openmpi", 3, None), ("openmpi", 8, None), ("openmpi", 5, "nodes=2"),
          ("openmpi", 6, "nodes=2,sockets=2"), ("openmpi", 7, "nodes=3"),
          ("mpich", 4, None), ("mpich", 4, "nodes=2")]


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo,alg", [
    param(f, n, t, alg) for f, n, t in FORCED for alg in ALGORITHMS])
def test_float_consistency_forced(flavour, np, topo, alg):
    """Up to 300000 elements (2.3 MiB of doubles): a forced algorithm runs at every
    size, so the largest vector adds time, not a regime (the unforced runs keep it)."""
    env = {f"MCOLL_ALG_{coll.upper()}": alg for coll in REDUCTIONS}
    result = run(flavour, np, topo, {**env, "MCOLL_VERBOSE": "1"}, max_count=300000)
    report = parse_verbose_report(result.stderr)
    for coll in ("allreduce", "reduce_scatter"):
        counts = report.get(coll, {})
        # cma is forced only where single copy works (else HSRA runs instead).
        ran = counts.get(alg, 0) + (counts.get("hsra", 0) if alg == "cma" else 0)
        assert ran > 0, f"forced {alg} never ran for {coll}: {counts}\n{result.describe()}"


def test_float_consistency_native():
    """The program itself against the host MPI alone (Open MPI; MPICH 4.0's own
    recursive doubling keeps a different signed zero on each partner)."""
    if "openmpi" not in BUILD.flavours:
        pytest.skip("build/openmpi not built")
    argv = mpiexec_argv("openmpi", 4, BUILD.bin("openmpi", PROGRAM), ["--max-count", 100003],
                        mcoll=False)
    check_passed(run_job(argv, {}, JOB_TIMEOUT), program="test_float_consistency")


ASAN = mpijob.find_build("build-asan")


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo,alg", [
    param("openmpi", 4, None, "flat"), param("openmpi", 5, "nodes=2", "p2p"),
    param("openmpi", 3, None, "cma"), param("mpich", 3, "nodes=3", "flat")])
def test_float_consistency_asan(flavour, np, topo, alg):
    """Under ASan/UBSan: the flat engine's reads of input 0 and of the own area, the
    doubling's traded buffers."""
    if flavour not in ASAN.flavours:
        pytest.skip(f"build-asan/{flavour} not built")
    env = {**BASE_ENV, **({"MCOLL_TOPO": topo} if topo else {}),
           **{f"MCOLL_ALG_{coll.upper()}": alg for coll in REDUCTIONS},
           "MCOLL_BUILD_DIR": str(ASAN.path),
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0",
           "UBSAN_OPTIONS": "print_stacktrace=1"}
    argv = mpiexec_argv(flavour, np, ASAN.bin(flavour, PROGRAM), ["--max-count", 100003])
    check_passed(run_job(argv, env, JOB_TIMEOUT), program="test_float_consistency")
