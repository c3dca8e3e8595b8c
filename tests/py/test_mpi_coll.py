"""The MPI correctness programs (tests/mpi/) run with mcoll, over both MPI flavours,
1-8 ranks and fake hierarchies, every registered algorithm forced, the linked
build, the ASan build, invalid arguments and a killed rank.

Every job runs with MCOLL_FALLBACK=error (an unintended fallback aborts it), under a
hard timeout, and must leave no /dev/shm/mcoll-* file. Set MCOLL_TEST_SEED to run
test_coll with another seed than the one derived from each test's name.
"""

import difflib
import functools
import re

import pytest

import mpijob
from mpijob import (ASAN, BASE_ENV, BUILD, check_passed, flavour_param, mpiexec_argv,
                    parse_verbose_report, run_job, seed_for, topo_env)

JOB_TIMEOUT = 300


def coll_args(flavour, np):
    """MPICH 4.0 (ch4:ucx) spins without yielding, so its point-to-point messages --
    the reference's traffic -- take milliseconds each once ranks outnumber cores
    (no MPICH setting makes it yield): fewer cases there as ranks grow."""
    if flavour == "openmpi" or np <= 2:
        return ["--quick"]
    if np <= 4:
        return ["--quick", "--iters", "1", "--burst", "40"]
    return ["--quick", "--iters", "1", "--burst", "20", "--churn", "2", "--max-bytes", "2M"]


ALL_COLLS = ("barrier", "bcast", "reduce", "allreduce", "allgather", "allgatherv", "gather",
             "gatherv", "scatter", "scatterv", "alltoall", "alltoallv", "alltoallw",
             "reduce_scatter", "reduce_scatter_block", "scan", "exscan")


# Each fake hierarchy under both MPIs; every rank count 1-8 under Open MPI, most of
# them under MPICH (slow when oversubscribed, see coll_args).
MATRIX = [
    ("openmpi", 1, None), ("openmpi", 2, None), ("openmpi", 2, "sockets=2"),
    ("openmpi", 3, "nodes=3"), ("openmpi", 3, "nodes=2"), ("openmpi", 4, None),
    ("openmpi", 4, "nodes=2,sockets=2"), ("openmpi", 5, "nodes=2"), ("openmpi", 5, "sockets=2"),
    ("openmpi", 6, "nodes=3"), ("openmpi", 6, "nodes=2,sockets=2"), ("openmpi", 7, None),
    ("openmpi", 7, "nodes=2,sockets=2"), ("openmpi", 8, None), ("openmpi", 8, "nodes=2"),
    ("openmpi", 8, "nodes=3"),
    ("mpich", 1, None), ("mpich", 2, "nodes=2"), ("mpich", 3, "sockets=2"), ("mpich", 3, "nodes=3"),
    ("mpich", 4, "nodes=2,sockets=2"), ("mpich", 5, None), ("mpich", 6, "nodes=3"),
    ("mpich", 7, "sockets=2"), ("mpich", 8, "nodes=2"),
]
# The default tier: every rank count 1-8, each fake hierarchy, both MPIs.
DEFAULT_MATRIX = {("openmpi", 1, None), ("openmpi", 2, None), ("openmpi", 3, "nodes=3"),
                  ("openmpi", 4, "nodes=2,sockets=2"), ("openmpi", 5, "sockets=2"),
                  ("openmpi", 6, "nodes=2,sockets=2"), ("openmpi", 7, None), ("openmpi", 8, "nodes=3"),
                  ("mpich", 1, None), ("mpich", 2, "nodes=2"), ("mpich", 3, "sockets=2"),
                  ("mpich", 5, None), ("mpich", 8, "nodes=2")}


@pytest.mark.parametrize("flavour,np,topo", [flavour_param(f, n, t or "flat", full=(f, n, t) not in DEFAULT_MATRIX)
                                             for f, n, t in MATRIX])
def test_coll(request, flavour, np, topo):
    topo = None if topo == "flat" else topo
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, np) + ["--seed", seed_for(request)]
    result = run_job(mpiexec_argv(flavour, np, program, args), {**BASE_ENV, **topo_env(topo)}, JOB_TIMEOUT)
    check_passed(result)


LARGE = [("openmpi", 3, "nodes=2"), ("mpich", 2, None)]


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo", [flavour_param(f, n, t or "flat") for f, n, t in LARGE])
def test_coll_large_messages(request, flavour, np, topo):
    """Half of the cases between 1 and 8 MiB (the other runs stop at 1 MiB)."""
    topo = None if topo == "flat" else topo
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = ["--iters", "1", "--max-bytes", "8M", "--large", "50", "--burst", "0", "--churn", "0",
            "--comms", "world,reversed", "--seed", seed_for(request)]
    result = run_job(mpiexec_argv(flavour, np, program, args), {**BASE_ENV, **topo_env(topo)}, JOB_TIMEOUT)
    check_passed(result)


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo", [flavour_param(f, n, t or "flat") for f, n, t in
                                              [("openmpi", 3, None), ("mpich", 3, "nodes=2")]])
def test_reduce_split_single_copy(request, flavour, np, topo):
    """reduce by single copy with the work split among ranks at every size
    (MCOLL_RED_SPLIT_MIN=1; by default only from 512K)."""
    topo = None if topo == "flat" else topo
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, np) + ["--colls", "reduce", "--seed", seed_for(request)]
    # a non-commutative reduce over communicators whose nodes are not in rank order
    # cannot run cma: a reported fallback to the normal choice (p2p)
    env = {**BASE_ENV, **topo_env(topo), "MCOLL_ALG_REDUCE": "cma", "MCOLL_RED_SPLIT_MIN": "1",
           "MCOLL_FALLBACK": "warn", "MCOLL_VERBOSE": "1"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    mpijob.only_forced_fallbacks(result)


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo", [flavour_param(f, n, t or "flat") for f, n, t in
                                              [("openmpi", 5, None), ("mpich", 4, "sockets=2")]])
def test_coll_as_if_enough_cores(request, flavour, np, topo):
    """The decisions for a node with a core per rank (this machine has 2): HSRA for
    mid-size reductions, scatter's single-copy readers in turns, long spins."""
    topo = None if topo == "flat" else topo
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, np) + ["--seed", seed_for(request)]
    env = {**BASE_ENV, **topo_env(topo), "MCOLL_CORES": "64"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_passed(result)


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo", [flavour_param(f, n, t) for f, n, t in
                                              [("openmpi", 5, "nodes=3"), ("mpich", 3, "nodes=2")]])
def test_coll_pieces_overlap(request, flavour, np, topo):
    """Hierarchical bcast/allreduce/reduce/scan/exscan in many pieces
    (MCOLL_INTER_PIECE=4 KiB): every rank of a node runs up(i+1) before down(i) and
    the leader's inter-node steps run on a companion fiber beside them (hier.c); the
    same with MCOLL_INTER_OVERLAP=0 (one step after the other)."""
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, np) + ["--colls", "bcast,allreduce,reduce,scan,exscan",
                                     "--seed", seed_for(request)]
    for overlap in ("1", "0"):
        env = {**BASE_ENV, **topo_env(topo), "MCOLL_INTER_PIECE": "4096", "MCOLL_INTER_OVERLAP": overlap,
               "MCOLL_FALLBACK": "error"}
        result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
        check_passed(result)


@functools.lru_cache(maxsize=None)
def registered_algorithms(flavour):
    """(coll, alg, reason to skip or None) from mcoll-info's restrictions (the
    registry's data); bcast's two at least. An algorithm that needs one block size for
    every rank ("uniform": only alltoall's calls have it) is listed but skipped for
    the v/w forms: test_descriptors checks that forcing it there is a reported fallback."""
    found = {"bcast": {"shm_pipeline": set(), "cma": {"cma"}}}
    if flavour in BUILD.flavours:
        # pytest.fail (a BaseException) too: a broken mcoll-info becomes one failing
        # case instead of silently fewer cases or a collection error of the whole file
        try:
            listed = mpijob.mcoll_restrictions(BUILD, flavour)
        except BaseException as e:  # noqa: B036
            return [("mcoll-info", "unreadable", None, str(e)[:2000])]
        if len(listed) < len(ALL_COLLS):
            return [("mcoll-info", "unreadable", None, f"{len(listed)} collectives listed: {listed}")]
        for coll, algs in listed.items():
            found.setdefault(coll, {}).update(algs)
    pairs = []
    for coll, algs in sorted(found.items()):
        for alg, needs in sorted(algs.items()):
            skip = f"registry: {alg} needs uniform blocks" if "uniform" in needs and coll != "alltoall" else None
            if coll.endswith(".inter") and len(algs) == 1:
                skip = "the only algorithm between nodes: every multi-node test runs it"
            pairs.append((coll, alg, skip, None))
    return pairs


FORCED = [("openmpi", 5, None), ("mpich", 3, "nodes=2")]
# Algorithms between nodes ("<coll>.inter", forced by MCOLL_ALG_<COLL>_INTER): on
# fake nodes, three of them for Open MPI (uneven: 2+2+1).
FORCED_INTER = {"openmpi": (5, "nodes=3"), "mpich": (3, "nodes=2")}
# Algorithms only for nodes of two ranks (forced elsewhere they give way): run at 2
# ranks, where they are chosen (MPICH's nodes=2 at 3 ranks has a node of two already).
TWO_RANK_ALGS = {"pair_inline"}


def forced_rounds(flavour):
    """The registered algorithms of a flavour in jobs: job k forces the k-th algorithm of
    every collective at once (one MCOLL_ALG_<COLL> each, test_coll checking every
    collective), the algorithms between nodes in jobs of their own, the two-rank ones at
    2 ranks. Every (collective, algorithm) runs as before, in about 10 jobs instead of
    90 (starting a job took most of each one's time). [(np, topo, level, ((coll, alg),
    ...), broken)] and the skipped ones as [(coll, alg, skip)]."""
    np, topo = next((n, t) for f, n, t in FORCED if f == flavour)
    groups, skipped = {}, []
    for coll, alg, skip, broken in registered_algorithms(flavour):
        if broken:
            return [(np, topo, "", ((coll, alg),), broken)], []
        if skip:
            skipped.append((coll, alg, skip))
            continue
        coll, _, level = coll.partition(".")
        if level:
            where = FORCED_INTER[flavour]
        elif alg in TWO_RANK_ALGS and topo is None:
            where = (2, topo)
        else:
            where = (np, topo)
        groups.setdefault((*where, level), {}).setdefault(coll, []).append(alg)
    rounds = []
    for (n, t, level), by_coll in groups.items():
        for k in range(max(map(len, by_coll.values()))):
            rounds.append((n, t, level, tuple((c, algs[k]) for c, algs in sorted(by_coll.items()) if k < len(algs)),
                           None))
    return rounds, skipped


def forced_params():
    params = []
    for flavour, _, _ in FORCED:
        rounds, skipped = forced_rounds(flavour)
        for k, (n, t, level, forced, broken) in enumerate(rounds):
            params.append(flavour_param(flavour, n, t or "flat", level, forced, broken,
                                        id=f"{flavour}-{n}-{t or 'flat'}-{level or 'node'}-{k}"))
        params += [flavour_param(flavour, 0, "-", "", ((coll, alg),), None, skip=skip, id=f"{flavour}-{coll}-{alg}")
                   for coll, alg, skip in skipped]
    return params


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo,level,forced,broken", forced_params())
def test_coll_forced_algorithm(request, flavour, np, topo, level, forced, broken):
    if broken:
        pytest.fail(f"the registry could not be read from mcoll-info: {broken}")
    topo = None if topo == "flat" else topo
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, np) + ["--colls", ",".join(coll for coll, _ in forced), "--seed", seed_for(request)]
    if flavour == "mpich":  # several runs of every collective: keep MPICH's short
        args += ["--burst", "20", "--churn", "1", "--comms", "world,evenodd,reversed"]
    # Calls where a forced algorithm's restrictions do not hold (a bcast larger than
    # a slot for shm_slot, say) are reported fallbacks to the normal choice: warn, and
    # check below that no other fallback happened.
    suffix = "_INTER" if level else ""
    env = {**BASE_ENV, **topo_env(topo), **{f"MCOLL_ALG_{coll.upper()}{suffix}": alg for coll, alg in forced},
           "MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "warn"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    for coll, alg in forced:
        if level:
            counts = mpijob.parse_inter_report(result.stderr).get(coll, {})
            denied = mpijob.parse_forced_denied(result.stderr).get((coll + ".inter", alg), {})
            # what ran between nodes: the forced one, or (reported) the normal choice
            assert counts.get(alg, 0) > 0 and counts[alg] + sum(denied.values()) == counts["calls"], (
                f"forced {alg} between nodes for {coll}: {counts}, denied {denied}\n{result.describe()}")
        else:
            counts = parse_verbose_report(result.stderr).get(coll, {})
            assert counts.get(alg, 0) > 0, f"forced {alg} never ran for {coll}: {counts}\n{result.describe()}"
    mpijob.only_forced_fallbacks(result)


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_first_arrival_leads(flavour):
    """The CP bcast (first_arrival, docs/architecture.md): with rank 0 -- local rank 0 of the node
    that does not hold the root (2 fake nodes, root 2) -- 10 ms late before every call,
    its node's first rank to arrive (rank 1) leads: rank 0's report counts most
    first_arrival calls as led by another rank than local rank 0, and none for the fixed
    leader (binomial), which the arrival mode alternates with it."""
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-m", "arrival", "-D", "late:0:10000", "-R", "2", "-b", "8", "-e", "64", "-f", "8",
            "-r", "3", "-n", "10"]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_TOPO": "nodes=2"}
    result = run_job(mpiexec_argv(flavour, 4, program, args), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    inter = mpijob.parse_inter_report(result.stderr).get("bcast", {})
    first, fixed = inter.get("first_arrival", 0), inter.get("binomial", 0)
    assert first > 0 and fixed > 0, f"{inter}\n{result.describe()}"
    # rank 0 arrives first after an untimed warm-up call or when a barrier left it ahead,
    # and on 2 cores when the others wait longer than its delay for a time slice (with
    # 2 ms, MPICH at 4 ranks under a loaded CI once found it first in 84 of 90 calls:
    # hence 10 ms, several time slices); a fixed leader would give none
    assert first * 0.25 <= inter.get("other_leader", 0) <= first, f"{inter}\n{result.describe()}"


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_first_arrival_root_node_does_not_wait_for_other_nodes(flavour):
    """The CP bcast's root publishes to its own node before it waits for the other
    nodes' announcements (src/coll/bcast/bcast.c inter_step): with both ranks of the
    other (fake) node 300 ms late before each call, the root's node-mate finishes its
    bcast at once (0.0 ms here; 417 ms when the root published after the
    announcements, issue 24 part 6, bench/records/net6/), and every byte is right."""
    program = BUILD.bin(flavour, "mcoll-test-first-arrival")
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_TOPO": "nodes=2",
           "MCOLL_ALG_BCAST_INTER": "first_arrival"}
    result = run_job(mpiexec_argv(flavour, 4, program, []), env, JOB_TIMEOUT)
    assert result.returncode == 0 and "ok" in result.stdout.split(), result.describe()
    mate_ms = float(re.search(r"^mate_ms (\S+)", result.stdout, re.M).group(1))
    assert mate_ms < 100, result.describe()
    inter = mpijob.parse_inter_report(result.stderr).get("bcast", {})
    assert inter.get("first_arrival", 0) == inter.get("calls", -1) > 0, f"{inter}\n{result.describe()}"


def test_info_lists_algorithms():
    for flavour in BUILD.flavours:
        algs = mpijob.mcoll_algorithms(BUILD, flavour)
        assert "bcast" in algs and {"shm_pipeline", "cma"} <= set(algs["bcast"]), algs
        assert "barrier" in algs, algs
    if not BUILD.flavours:
        pytest.skip("build/: no flavour built")


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_verbose_report(request, flavour):
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, 4) + ["--seed", seed_for(request)]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_TOPO": "nodes=2"}
    result = run_job(mpiexec_argv(flavour, 4, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    report = parse_verbose_report(result.stderr)
    for coll in ALL_COLLS:
        counts = report.get(coll)
        assert counts, f"no '{coll} calls=' line in the report\n{result.describe()}"
        algs = {k: v for k, v in counts.items() if k not in ("calls", "fallback", "passthrough")}
        assert counts["calls"] > 0 and sum(algs.values()) > 0, f"{coll}: no mcoll algorithm ran: {counts}"
        assert counts["fallback"] == 0, f"{coll}: fallbacks: {counts}"
    fallbacks = {c: n["fallback"] for c, n in report.items() if n.get("fallback")}
    assert not fallbacks, f"fallbacks: {fallbacks}\n{result.describe()}"


@pytest.mark.parametrize("flavour", [flavour_param(f, skip=None if f == "mpich" else
                                                   "Open MPI 4.1 is MPI 3.1: no _c functions")
                                     for f in mpijob.FLAVOURS])
def test_large_count_api(request, flavour):
    """Every call through the MPI-4 large-count API (MPI_Bcast_c, ...), as mpi4py on
    MPICH makes them: checked against the reference, and mcoll ran them all."""
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, 3) + ["--count-api", "100", "--seed", seed_for(request)]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_TOPO": "nodes=2"}
    result = run_job(mpiexec_argv(flavour, 3, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    report = parse_verbose_report(result.stderr)
    for coll in ALL_COLLS:
        counts = report.get(coll, {})
        algs = sum(v for k, v in counts.items() if k not in ("calls", "fallback", "passthrough"))
        assert counts.get("calls", 0) > 0 and algs == counts["calls"], (
            f"{coll}: not every call ran in mcoll: {counts}\n{result.describe()}")


@pytest.mark.parametrize("flavour", [flavour_param(f, skip=None if f == "mpich" else
                                                   "Open MPI 4.1 is MPI 3.1: no _c functions")
                                     for f in mpijob.FLAVOURS])
@pytest.mark.parametrize("mcoll", [True, False], ids=["mcoll", "native"])
def test_large_count_v_far_displacements(flavour, mcoll):
    """MPI_Gatherv_c, MPI_Scatterv_c, MPI_Allgatherv_c and MPI_Alltoallv_c where only
    rank 0 places its blocks above INT_MAX (2 ranks, 64 B blocks in a 4 GiB
    MAP_NORESERVE buffer): every rank must go the same way, and under mcoll that is
    mcoll's (the far rank through a packed copy)."""
    program = BUILD.bin(flavour, "mcoll-test-large-displs")
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1"} if mcoll else {}
    result = run_job(mpiexec_argv(flavour, 2, program, mcoll=mcoll), env, 60)
    check_passed(result, "test_large_displs")
    if mcoll:
        report = parse_verbose_report(result.stderr)
        for coll in ("gatherv", "scatterv", "allgatherv", "alltoallv"):
            counts = report.get(coll, {})
            algs = sum(v for k, v in counts.items() if k not in ("calls", "fallback", "passthrough"))
            assert counts.get("calls", 0) == 2 and algs == 2, f"{coll}: {counts}\n{result.describe()}"


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_linked_build(request, flavour):
    """mcoll linked with -lmcoll ahead of the MPI, started by the plain mpiexec."""
    program = BUILD.bin(flavour, "mcoll-test-coll-linked")
    args = coll_args(flavour, 3) + ["--seed", seed_for(request)]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1"}
    result = run_job(mpiexec_argv(flavour, 3, program, args, mcoll=False), env, JOB_TIMEOUT)
    check_passed(result)
    bcast = parse_verbose_report(result.stderr).get("bcast", {})
    algs = sum(v for k, v in bcast.items() if k not in ("calls", "fallback", "passthrough"))
    assert algs > 0, f"mcoll did not take over bcast in the linked build: {bcast}\n{result.describe()}"


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_disabled_passes_through(request, flavour):
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, 3) + ["--seed", seed_for(request)]
    env = {**BASE_ENV, "MCOLL_DISABLE": "1", "MCOLL_VERBOSE": "1", "MCOLL_TOPO": "nodes=2"}
    result = run_job(mpiexec_argv(flavour, 3, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    ran = {c: n for c, n in parse_verbose_report(result.stderr).items()
           if any(v for k, v in n.items() if k not in ("calls", "fallback", "passthrough"))}
    assert not ran, f"MCOLL_DISABLE=1 but mcoll algorithms ran: {ran}"


ASAN_RUNS = [("openmpi", 4, "nodes=2"), ("mpich", 3, "sockets=2")]


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,topo", [flavour_param(f, n, t, build=ASAN) for f, n, t in ASAN_RUNS])
def test_coll_asan(request, flavour, np, topo):
    """The ASan+UBSan build; leak checking off: both MPIs leak at exit on their own.
    verify_asan_link_order=0: bin/mcollrun preloads libubsan ahead of libasan."""
    program = ASAN.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, np) + ["--seed", seed_for(request)]
    env = {**BASE_ENV, **topo_env(topo), "MCOLL_BUILD_DIR": str(ASAN.path),
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    assert "runtime error" not in result.stderr and "AddressSanitizer" not in result.stderr, result.describe()


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_errors_same_as_native(flavour):
    """Invalid arguments reach the error handler with the same class as without mcoll."""
    program = BUILD.bin(flavour, "mcoll-test-errors")
    native = run_job(mpiexec_argv(flavour, 3, program, mcoll=False), {}, 120)
    with_mcoll = run_job(mpiexec_argv(flavour, 3, program), {**BASE_ENV, "MCOLL_TOPO": "nodes=2"}, 120)
    assert native.returncode == 0 and "test_errors: done" in native.stdout, native.describe()
    cases = [line for line in native.stdout.splitlines() if ": " in line and "skipped" not in line]
    assert cases and not [c for c in cases if c.endswith("MPI_SUCCESS")], native.stdout
    assert with_mcoll.returncode == 0, with_mcoll.describe()
    diff = "\n".join(difflib.unified_diff(native.stdout.splitlines(), with_mcoll.stdout.splitlines(),
                                         "native", "with mcoll", lineterm=""))
    assert not diff, f"error classes differ from the native run:\n{diff}\n{with_mcoll.describe()}"


KILL_RUNS = [("openmpi", None, 20, {}), ("openmpi", "nodes=2", 37, {}),
             ("openmpi", None, 45, {"MCOLL_ALG_BCAST": "cma"}), ("mpich", None, 20, {}),
             ("mpich", "nodes=2", 37, {})]


@pytest.mark.parametrize("flavour,topo,kill_after,extra", [
    pytest.param(f, t, k, e, id=f"{f}-{t or 'flat'}-after{k}{''.join('-' + v for v in e.values())}",
                 marks=([] if f in BUILD.flavours else [pytest.mark.skip(reason=f"build/{f} not built")])
                 + ([mpijob.FULL] if t or e else []))
    for f, t, k, e in KILL_RUNS])
def test_killed_rank(flavour, topo, kill_after, extra):
    """A rank SIGKILLed in a bcast loop: the job ends within 30 s with an error and
    leaves no shared-memory file (run_job checks the files and stray processes)."""
    program = BUILD.bin(flavour, "mcoll-test-kill")
    result = run_job(mpiexec_argv(flavour, 4, program, [kill_after]),
                     {**BASE_ENV, **topo_env(topo), **extra}, timeout=30, expect_timeout=True)
    assert result.seconds < 30, f"the job did not end within 30 s after the kill\n{result.describe()}"
    assert result.returncode != 0, result.describe()
    assert re.search(r"kills itself after iteration", result.stderr), result.describe()


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_mixed_blocks_recorded(request, flavour):
    """A v-collective whose blocks take different paths in the node (some through the
    areas, some by single copy, with the thresholds lowered so that random counts
    straddle them) is recorded as mixed, its blocks per path, and every call once."""
    program = BUILD.bin(flavour, "mcoll-test-coll")
    colls = ("allgatherv", "gatherv", "scatterv")
    args = ["--colls", ",".join(colls), "--iters", "30", "--comms", "world",
            "--seed", seed_for(request)]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_ALLGATHER_CMA_MIN": "256",
           "MCOLL_GATHER_CMA_MIN": "256", "MCOLL_SCATTER_CMA_MIN": "256",
           "MCOLL_PAIR_CMA_MIN": "256"}
    result = run_job(mpiexec_argv(flavour, 3, program, args), env, JOB_TIMEOUT)
    check_passed(result)
    report = parse_verbose_report(result.stderr)
    for coll in colls:
        counts = report.get(coll, {})
        assert counts.get("calls"), f"no report for {coll}\n{result.describe()}"
        paths = counts.get("area", 0) + counts.get("cma", 0) + counts.get("slot", 0)
        assert counts["calls"] == paths + counts.get("mixed", 0), counts
        if counts.get("mixed"):
            blocks = re.search(rf"^mcoll: {coll} mixed blocks: area=(\d+) cma=(\d+)( slot=\d+)?$", result.stderr, re.M)
            assert blocks and int(blocks.group(1)) > 0 and int(blocks.group(2)) > 0, result.describe()
    assert any(report[c].get("mixed") for c in colls), (
        f"no call mixed paths: {report}\n{result.describe()}")


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in mpijob.FLAVOURS])
def test_bcast_between_nodes_sharing_cores_takes_the_tree(flavour):
    """Nodes on one kernel with more ranks than cores (test hosts, fake nodes): a bcast
    of 64 KiB between 4 nodes runs the binomial tree, whose 2 dependent steps beat
    scatter-allgather's 5 when each step waits for a core (bench/records/net8/), except
    under Open MPI, where nodes of 1 rank take first_arrival (bench/records/net16/); with
    cores enough the built-in rules' scatter-allgather again (MCOLL_CORES: 2, then 64)."""
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-C", "bcast", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1", "-r", "1", "-c"]
    shared = "first_arrival" if flavour == "openmpi" else "binomial"
    for cores, alg in (("2", shared), ("64", "scatter_allgather")):
        env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_TOPO": "nodes=4", "MCOLL_CORES": cores}
        result = run_job(mpiexec_argv(flavour, 4, program, args), env, JOB_TIMEOUT)
        assert result.returncode == 0, result.describe()
        inter = mpijob.parse_inter_report(result.stderr).get("bcast", {})
        assert inter.get(alg, 0) == inter.get("calls", -1) > 0, f"{cores} {inter}\n{result.describe()}"
