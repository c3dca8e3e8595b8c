"""Erroneous programs whose ranks disagree on a collective's size,
run by tests/mpi/test_mismatch.c on a communicator with MPI_ERRORS_RETURN.

The gather family (gather(v), scatter(v), allgather(v), alltoall(v)): a receiver
whose count is smaller than its sender's gets MPI_ERR_TRUNCATE, as natively, at
every algorithm edge (test_gather_family_mismatch_reported_as_natively); gatherv and
scatterv whose receiver expects more than it gets finish with no error
(test_v_forms_shorter_block_meets_its_peer).

bcast: the root sends more bytes than the others expect (natively MPI_ERR_TRUNCATE
on the others, MPI_SUCCESS at the root) or fewer (natively MPI_ERR_OTHER on
MPICH's readers, MPI_SUCCESS on Open MPI). Under mcoll every rank must get the
class the host returns natively -- compared with a native run where the host
itself finishes (2 ranks, small sizes: natively Open MPI hangs or crashes from
64 KiB, and at 4 ranks) -- nothing may be written past a buffer, and the
communicator must still work afterwards.

Reductions with different counts: no host MPI handles them well natively
(allreduce: MPICH returns MPI_ERR_TRUNCATE on the rank with the smaller count from
1 KiB and hangs at 8 B; Open MPI returns it at 2 ranks up to 1 KiB, hangs or
crashes otherwise). Under mcoll every rank must return -- never hang, abort or
write past a buffer -- with MPI_ERR_TRUNCATE on every rank that reads a peer whose
count differs (every rank of an allreduce or reduce_scatter_block, the root of a
reduce, ranks above 0 of a scan), also when the counts fall on both sides of an
algorithm threshold, so that the ranks run different algorithms (flat, HSRA,
single copy); and the communicator must still give right results afterwards
(shm/call.h)."""

import re

import pytest

import mpijob
from mpijob import BUILD, flavour_param, mpiexec_argv, run_job

JOB_TIMEOUT = 60


def flavour_params(*rest_lists, default=lambda *rest: True, both=lambda *rest: False):
    """The tuples of values that default() takes: with each flavour, in the default tier.
    The others, in the full tier: with each flavour where both() takes them (a native
    comparison), else once, the flavours alternating so that each still meets every
    value (mpijob.covering_flavours)."""
    runs = mpijob.covering_flavours(rest_lists, both=[r for r in rest_lists if default(*r) or both(*r)])
    return [flavour_param(f, *rest, full=not default(*rest)) for f, *rest in runs]


def run_mismatch(flavour, np, case, nbytes, mcoll, env=None):
    program = BUILD.bin(flavour, "mcoll-test-mismatch")
    args = [case, nbytes] + (["recheck"] if mcoll else [])
    result = run_job(mpiexec_argv(flavour, np, program, args, mcoll=mcoll),
                     dict({"MCOLL_FALLBACK": "error"} if mcoll else {}, **(env or {})), JOB_TIMEOUT,
                     expect_timeout=True)
    if result.seconds >= JOB_TIMEOUT:
        pytest.fail(f"{case} {nbytes} B hung ({'mcoll' if mcoll else 'native'}), killed after "
                    f"{JOB_TIMEOUT} s\n{result.describe()}")
    return result


def classes(result):
    """{rank: class name} and the ranks that wrote past their buffer."""
    got, overran = {}, []
    for m in re.finditer(r"^\S+ \d+: rank (\d+): (\S+)( \(wrote past its buffer\))?$", result.stdout, re.M):
        got[int(m.group(1))] = m.group(2)
        if m.group(3):
            overran.append(int(m.group(1)))
    return got, overran


def check_mcoll_run(result, np):
    got, overran = classes(result)
    assert result.returncode == 0 and "test_mismatch: done" in result.stdout, result.describe()
    assert len(got) == np, result.describe()
    assert not overran, f"ranks {overran} wrote past their buffers\n{result.describe()}"
    return got


def expected_bcast(flavour, np, case):
    reader = "MPI_ERR_TRUNCATE" if case == "bcast-longer" else \
        ("MPI_ERR_OTHER" if flavour == "mpich" else "MPI_SUCCESS")
    return {r: "MPI_SUCCESS" if r == 0 else reader for r in range(np)}


BCAST_CASES = [(np, case, nbytes) for np in (2, 4) for case in ("bcast-longer", "bcast-shorter")
               for nbytes in (8, 1024, 65536, 1 << 20)]


@pytest.mark.parametrize("flavour,np,case,nbytes", flavour_params(*BCAST_CASES, default=lambda np, c, b: np == 2))
def test_bcast_mismatch_reported_as_natively(flavour, np, case, nbytes):
    result = run_mismatch(flavour, np, case, nbytes, mcoll=True)
    got = check_mcoll_run(result, np)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert got == expected_bcast(flavour, np, case), result.describe()
    if np == 2 and nbytes <= 1024:  # where both hosts finish natively: the very same classes
        native = run_mismatch(flavour, np, case, nbytes, mcoll=False)
        native_got, _ = classes(native)
        assert native_got == got, f"native:\n{native.describe()}\nmcoll:\n{result.describe()}"


# Sizes on both sides of each edge of the bcast rules at 2 ranks (slot | pipeline at
# 513 B, pipeline | single copy at 5547 B, single copy | pipeline at 2 MiB): the
# root and the readers then run different engines, and the readers must follow the
# root's instead of waiting for flags that never come.
BCAST_EDGE_SIZES = ("400:800", "4000:8000", "1500000:3000000")


def bcast_edge_params():
    cases = []
    for param in flavour_params(*[(case, sizes) for case in ("bcast-longer", "bcast-shorter")
                                  for sizes in BCAST_EDGE_SIZES]):
        big = param.values[2] == BCAST_EDGE_SIZES[-1]
        cases.append(pytest.param(*param.values, marks=[*param.marks, *([pytest.mark.full] if big else [])],
                                  id=param.id))
    return cases


@pytest.mark.parametrize("flavour,case,sizes", bcast_edge_params())
def test_bcast_mismatch_across_algorithm_edges(flavour, case, sizes):
    result = run_mismatch(flavour, 2, case, sizes, mcoll=True)
    got = check_mcoll_run(result, 2)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert got == expected_bcast(flavour, 2, case), result.describe()


# Count pairs (bytes) on both sides of each threshold: 56-byte inline line, flat's
# RED_FLAT_MAX (1K, at 4 ranks with a core each), flat's slots (32K - 64) and
# RED_CMA_MIN (32K), RED_CMA_MAX (1M, single copy vs HSRA at 2 ranks).
RED_SIZES = ("8:16", "1024:2048", "16384:32768", "524288:2097152")
RED_CASES = ("allreduce-counts", "reduce-counts", "reduce-counts-root-big")
MORE_CASES = ("scan-counts", "exscan-counts", "reduce-scatter-block-counts")


def expected_truncated(case, np):
    """Ranks that read a peer whose count differs from theirs: they must report it."""
    if case.startswith("reduce-counts"):
        return {0}
    if case in ("scan-counts", "exscan-counts"):
        return set(range(1, np))
    return set(range(np))


def check_reduction_mismatch(flavour, np, case, sizes, env=None):
    result = run_mismatch(flavour, np, case, sizes, mcoll=True, env=env)
    got = check_mcoll_run(result, np)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert set(got.values()) <= {"MPI_SUCCESS", "MPI_ERR_TRUNCATE"}, result.describe()
    for r in expected_truncated(case, np):
        assert got[r] == "MPI_ERR_TRUNCATE", f"rank {r}\n{result.describe()}"


@pytest.mark.parametrize("flavour,np,case,sizes",
                         flavour_params(*[(np, case, sizes) for np in (2, 4) for case in RED_CASES
                                          for sizes in RED_SIZES],
                                        default=lambda np, c, s: np == 2 and s in ("8:16", "524288:2097152")))
def test_reduction_counts_mismatch_reported(flavour, np, case, sizes):
    check_reduction_mismatch(flavour, np, case, sizes)


# Each edge of the reduction rules at 2 ranks, straddled (allreduce flat | cma at
# 5649 B, cma | hsra at 1 MiB and 1.9 MiB; reduce flat | cma at 7815 B, cma | hsra at
# 2 MiB; scan, exscan and reduce_scatter flat | cma at 5341, 6108 and 9064 B): the
# call descriptors (shm/call.h) carry the engine, so these are reported, not hung.
RED_EDGE_CASES = [("allreduce-counts", "4000:8000"), ("allreduce-counts", "1000000:1500000"),
                  ("allreduce-counts", "1800000:2000000"), ("reduce-counts", "6000:9000"),
                  ("reduce-counts-root-big", "6000:9000"), ("reduce-counts", "1500000:3000000"),
                  ("scan-counts", "4000:8000"), ("exscan-counts", "5000:8000"),
                  ("reduce-scatter-block-counts", "8000:12000")]


@pytest.mark.full
@pytest.mark.parametrize("flavour,case,sizes", flavour_params(*RED_EDGE_CASES, default=lambda c, s: False))
def test_reduction_counts_mismatch_across_algorithm_edges(flavour, case, sizes):
    check_reduction_mismatch(flavour, 2, case, sizes)


# 4 ranks with a core each (MCOLL_CORES): flat up to 1K, HSRA above, so 1K vs 2K
# crosses RED_FLAT_MAX.
@pytest.mark.parametrize("flavour,case", flavour_params(*[(case,) for case in RED_CASES],
                                                     default=lambda c: c == "allreduce-counts"))
def test_reduction_counts_mismatch_flat_vs_hsra(flavour, case):
    check_reduction_mismatch(flavour, 4, case, "1024:2048", env={"MCOLL_CORES": "8"})


@pytest.mark.parametrize("flavour,np,case,sizes",
                         flavour_params(*[(np, case, sizes) for np in (2, 4) for case in MORE_CASES
                                          for sizes in ("8:16", "16384:32768", "524288:2097152")],
                                        default=lambda np, c, s: np == 2 and s == "16384:32768"))
def test_other_reductions_counts_mismatch_reported(flavour, np, case, sizes):
    check_reduction_mismatch(flavour, np, case, sizes)


# Non-blocking: the mismatched MPI_Iallreduce in flight between two matched
# MPI_Iallgathers, which on one node may run side by side with it (coll/beside.h):
# the allgathers are right, nothing is written past a buffer, the communicator works
# afterwards, and the allreduce reports the mismatch on every rank: from
# MPI_Iallreduce itself where the call found it before returning, else from the wait
# (MPI_ERR_TRUNCATE both, through the communicator: the host's generalized request,
# which would raise it on MPI_COMM_WORLD and MPICH wrap it as MPI_ERR_OTHER, completes
# without it).
@pytest.mark.parametrize("flavour,np,sizes",
                         flavour_params(*[(np, sizes) for np in (2, 3, 4) for sizes in ("8:16", "1024:2048")],
                                        default=lambda np, s: np == 3 and s == "8:16"))
def test_nonblocking_reduction_mismatch_beside(flavour, np, sizes):
    result = run_mismatch(flavour, np, "iallreduce-counts-beside", sizes, mcoll=True)
    got = check_mcoll_run(result, np)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert "beside: ok" in result.stdout, result.describe()
    assert all(cls == "MPI_ERR_TRUNCATE" for cls in got.values()), result.describe()


# Two fake nodes of 2 ranks (MCOLL_TOPO): the node of rank 0 disagrees inside, its
# leader still goes through the inter-node steps, so that nobody waits forever; the
# leaders' sizes differ too, and the host's point-to-point reports that (sizes where
# Open MPI's does natively: from 16 KiB its single-copy path overruns the receive
# buffer of a truncated message, with or without mcoll).
@pytest.mark.parametrize("flavour,case,sizes",
                         flavour_params(*[(case, sizes) for case in ("allreduce-counts", "reduce-counts",
                                                                      "reduce-counts-root-big", "scan-counts")
                                          for sizes in ("8:16", "1024:2048")],
                                        default=lambda c, s: c == "allreduce-counts" and s == "1024:2048"))
def test_reduction_counts_mismatch_across_fake_nodes(flavour, case, sizes):
    result = run_mismatch(flavour, 4, case, sizes, mcoll=True, env={"MCOLL_TOPO": "nodes=2"})
    got = check_mcoll_run(result, 4)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert set(got.values()) <= {"MPI_SUCCESS", "MPI_ERR_TRUNCATE"}, result.describe()
    assert got[0] == "MPI_ERR_TRUNCATE", result.describe()


# The gather family with a receiver whose count is smaller than what its sender
# gives (tests/mpi/test_mismatch.c: gather-longer ... alltoallv-longer), at sizes on
# both sides of each edge: the inline line (56 B), 2 ranks' alltoallv pair_inline (256 B),
# alltoall's pair_inline | direct | tiled | direct | pairwise at 57, 145, 9407 and
# 16650 B, area | single copy at
# 6.8-7.2 KiB (2 ranks) and 32/64 KiB (3 ranks and more). Natively the rank that
# receives the longer block reports MPI_ERR_TRUNCATE and the others MPI_SUCCESS
# (a shorter block is no error); under mcoll the same, never a hang, and nothing
# written past a buffer. MPICH's own allgather(v) natively misses it (its recursive
# doubling receives the rest of the buffer as one message; rank 0 gets MPI_ERR_OTHER
# at 3 ranks), so the native comparison leaves allgather(v) on MPICH out.
GATHER_FAMILY = ("gather-longer", "gatherv-longer", "scatter-longer", "scatterv-longer",
                 "allgather-longer", "allgatherv-longer", "alltoall-longer", "alltoallv-longer")
GATHER_FAMILY_SIZES = {2: ("40:80", "100:200", "200:300", "4000:8000", "8000:12000", "12000:20000"),
                       3: ("40:80", "20000:40000", "40000:80000")}


def expected_gather_family(case, np):
    """The ranks that receive a longer block than they expect: the root of a gather,
    the others elsewhere (rank 0 sends the longer blocks)."""
    truncated = {0} if case.startswith("gather") else set(range(1, np))
    return {r: "MPI_ERR_TRUNCATE" if r in truncated else "MPI_SUCCESS" for r in range(np)}


def gather_family_cheap(np, case, sizes):
    """The default tier's cases: one per collective kind, and gatherv and scatterv
    across the inline line at 2 ranks, where their rules start the slot protocol below
    it and the whole-area one above it (src/coll/move.h): the root and the other rank
    each choose from their own length, and must still meet."""
    return np == 2 and (sizes == "4000:8000" and case in ("gather-longer", "scatter-longer", "alltoall-longer")
                        or sizes == "40:80" and case in ("gatherv-longer", "scatterv-longer"))


def gather_family_native(np, case, sizes):
    """The cases compared with a native run: on each MPI (the hosts differ there)."""
    return np == 2 and sizes in ("40:80", "4000:8000")


@pytest.mark.parametrize("flavour,np,case,sizes",
                         flavour_params(*[(np, case, sizes) for np in GATHER_FAMILY_SIZES for case in GATHER_FAMILY
                                          for sizes in GATHER_FAMILY_SIZES[np]],
                                        default=gather_family_cheap, both=gather_family_native))
def test_gather_family_mismatch_reported_as_natively(flavour, np, case, sizes):
    result = run_mismatch(flavour, np, case, sizes, mcoll=True)
    got = check_mcoll_run(result, np)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert got == expected_gather_family(case, np), result.describe()
    if gather_family_native(np, case, sizes) and not (flavour == "mpich" and case.startswith("allgather")):
        native = run_mismatch(flavour, np, case, sizes, mcoll=False)
        native_got, _ = classes(native)
        assert native_got == got, f"native:\n{native.describe()}\nmcoll:\n{result.describe()}"


# The other way (tests/mpi/test_mismatch.c: gatherv-shorter, scatterv-shorter): the
# receiver expects more than its sender gives, across the same edges, so that the
# rank whose length says "whole area" (or single copy) meets a peer whose length says
# "one generation" (at 2 ranks from the adaptive choice's start, src/coll/move.h;
# beyond from the single-copy threshold). Natively no error; under mcoll neither, no
# hang, nothing written past a buffer, and the communicator still works.
SHORTER_SIZES = {2: ("40:80", "4000:8000", "100:200", "8000:12000"), 3: ("40:80", "20000:40000")}


@pytest.mark.parametrize("flavour,np,case,sizes",
                         flavour_params(*[(np, case, sizes) for np in SHORTER_SIZES
                                          for case in ("gatherv-shorter", "scatterv-shorter")
                                          for sizes in SHORTER_SIZES[np]],
                                        default=lambda np, case, sizes: np == 2 and sizes == "40:80"))
def test_v_forms_shorter_block_meets_its_peer(flavour, np, case, sizes):
    result = run_mismatch(flavour, np, case, sizes, mcoll=True)
    got = check_mcoll_run(result, np)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert got == {r: "MPI_SUCCESS" for r in range(np)}, result.describe()
    if np == 2 and sizes == "40:80":
        native = run_mismatch(flavour, np, case, sizes, mcoll=False)
        native_got, _ = classes(native)
        assert native_got == got, f"native:\n{native.describe()}\nmcoll:\n{result.describe()}"


# alltoallv beyond two ranks, each with a core (MCOLL_CORES): the rounds through the
# whole areas, where a block's path (slots or single copy) follows its length; the
# readers take the senders' lengths from their headers (a single copy of the reader's
# own length read past the sender's buffer at 20000:40000 and aborted).
@pytest.mark.parametrize("flavour,sizes", flavour_params(*[(sizes,) for sizes in ("100:200", "20000:40000")],
                                                      default=lambda s: s == "20000:40000"))
def test_alltoallv_mismatch_ranks_with_a_core(flavour, sizes):
    result = run_mismatch(flavour, 3, "alltoallv-longer", sizes, mcoll=True, env={"MCOLL_CORES": "8"})
    got = check_mcoll_run(result, 3)
    assert "recheck: ok" in result.stdout, f"the communicator is broken afterwards\n{result.describe()}"
    assert got == expected_gather_family("alltoallv-longer", 3), result.describe()
