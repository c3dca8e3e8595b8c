"""Thread ranks (mcollrun --threads T, docs/threads.md): unmodified MPI programs run
as N/T processes of T thread ranks over the host MPI, on MPICH and on Open MPI. The
suite's correctness programs (collectives blocking, and on MPICH non-blocking and
persistent; datatypes, point-to-point, groups on MPICH) at 1-2 processes x 1-4 threads
and 1 x 3 (more in the full tier), a program built with the MPI's own compiler wrapper,
the per-rank process state, a library with mutable globals, the refusals, a call the
runtime lacks stopping the job with its name, and the Fortran bindings."""

import os
import re
import shutil
import subprocess

import pytest

import mpijob
from mpijob import BUILD, FULL, check_passed, run_job, seed_for
from test_fortran import BINDINGS, programs  # noqa: F401 (the fixture that builds them)

JOB_TIMEOUT = 180
FLAVOUR = "mpich"  # (the flavour of the tests that run on one MPI only)


def threads_built(flavour):
    return (BUILD.path / flavour / "bin" / "mcoll-threads").exists()


THREADS_BUILT = threads_built(FLAVOUR)
needs_threads = pytest.mark.skipif(not THREADS_BUILT, reason="build/mpich/bin/mcoll-threads not built")


def threads_argv(threads, np, program, args=(), flavour=FLAVOUR, extra=()):
    path = program if "/" in str(program) else BUILD.bin(flavour, program)
    return [str(mpijob.MCOLLRUN), "--mpi", flavour, "--threads", str(threads), *extra,
            "-np", str(np), str(path), *map(str, args)]


def layout(threads, np, full=False):
    return pytest.param(threads, np, id=f"{np // threads}x{threads}", marks=[FULL] if full else [])


def flavoured(layouts, openmpi_default=None):
    """(flavour, threads, np) for each MPI and layout: skipped where mcoll-threads is not
    built. Open MPI starts slower: in the default tier it runs only the layouts of
    openmpi_default (ids such as "2x2"; None: all of the default tier's). The layouts
    only in the full tier run on one MPI each, the MPIs alternating
    (mpijob.covering_flavours)."""
    params = []
    runs = mpijob.covering_flavours([(p.id,) for p in layouts],
                                    both=[(p.id,) for p in layouts if FULL not in p.marks])
    for flavour in mpijob.FLAVOURS:
        skip = [] if threads_built(flavour) else \
            [pytest.mark.skip(reason=f"build/{flavour}/bin/mcoll-threads not built")]
        for p in layouts:
            if (flavour, p.id) not in runs:
                continue
            full = FULL in p.marks or (flavour == "openmpi" and openmpi_default is not None
                                       and p.id not in openmpi_default)
            params.append(pytest.param(flavour, *p.values, id=f"{flavour}-{p.id}",
                                       marks=[*skip, *([FULL] if full else [])]))
    return params


def flavours():
    return flavoured([pytest.param(id="any")])


# (threads per process, ranks): processes x threads
LAYOUTS = [layout(2, 2), layout(2, 4), layout(4, 4), layout(1, 2, full=True),
           layout(3, 6, full=True), layout(4, 8, full=True), layout(8, 8, full=True),
           layout(15, 15, full=True), layout(15, 30, full=True)]
# (two processes of 15: the collectives and point-to-point run it; the rest do not)
BELOW_30 = [p for p in LAYOUTS if p.id != "2x15"]


@pytest.mark.parametrize("flavour,threads,np", flavoured(LAYOUTS, openmpi_default=["2x2"]))
def test_coll_as_thread_ranks(flavour, threads, np, tmp_path):
    """Every blocking collective on world, split and dup communicators, checked against
    point-to-point; no patched program copy left behind."""
    result = run_job(threads_argv(threads, np, "mcoll-test-coll", ["--quick", "--count-api", "0"],
                                  flavour=flavour), {"TMPDIR": str(tmp_path)}, JOB_TIMEOUT)
    check_passed(result)
    assert list(tmp_path.iterdir()) == [], result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured(LAYOUTS, openmpi_default=["2x2", "1x4"]))
def test_p2p_as_thread_ranks(flavour, threads, np):
    result = run_job(threads_argv(threads, np, "mcoll-test-p2p", flavour=flavour), None, JOB_TIMEOUT)
    check_passed(result, "test_p2p")


# Every wait of the runtime goes to sleep at once, and only a wake-up ends the sleep
# (its timeout, the safety net, is 30 s): one event that loses its wake-up stalls the job
# for 30 s. Inside one process only (messages through the host MPI wake nobody).
SLEEPING_WAITS = {"MCOLL_THREADS_SPIN": "0", "MCOLL_THREADS_SPIN_US": "0",
                  "MCOLL_THREADS_YIELD_US": "0", "MCOLL_THREADS_SLEEP_US": "30000000"}
SLEEP_TIMEOUT_S = 30


@pytest.mark.parametrize("flavour,threads,np",
                         flavoured([layout(2, 2), layout(4, 4), layout(1, 2), layout(2, 4),
                                    layout(1, 3, full=True), layout(8, 8, full=True)],
                                   openmpi_default=["2x2", "2x1"]))
@pytest.mark.parametrize("program,args,summary", [
    ("mcoll-test-p2p", ["--max-bytes", "65536"], "test_p2p"),
    ("mcoll-test-coll", ["--quick", "--count-api", "0"], "test_coll")], ids=["p2p", "coll"])
def test_sleeping_waits_are_woken(flavour, threads, np, program, args, summary):
    """Point-to-point (a storm of small any-source messages, probes, Waitany, Testall)
    and every blocking collective with each wait asleep on the futex: all complete,
    correct, in less time than one lost wake-up would cost. Across processes of the node
    (2x1, 2x2, 3x1) the wake-ups cross too: a message in a ring, a slot or block freed,
    a large send read."""
    result = run_job(threads_argv(threads, np, program, args, flavour=flavour), SLEEPING_WAITS,
                     JOB_TIMEOUT)
    check_passed(result, summary)
    assert result.seconds < SLEEP_TIMEOUT_S, result.describe()


# Messages per rank pair of test_p2p's sections: eager 2 directions x 2 phases x 88
# messages x (tag, source, count, bytes, and the byte past it on the unexpected phase)
# = 1584 checks; split 8 messages x 3 checks = 24 (half the pairs' ranks receive);
# overflow 100 messages x 4 checks, 2 for the truncated one, 2 at the sender = 404.
SECTION_CHECKS = {"eager": 1584, "split": 24, "overflow": 404}
# Messages a rank takes from the other process's ring, at least: eager 2 x 88, split 8/2.
SECTION_RING_MESSAGES = {"eager": 176, "split": 4}


@pytest.mark.parametrize("flavour,threads,np",
                         flavoured([layout(2, 2), layout(4, 4), layout(2, 4), layout(1, 2)],
                                   openmpi_default=["1x2", "2x1"]))
@pytest.mark.parametrize("section", ["eager", "split"])
def test_rings_and_split_copy(flavour, threads, np, section):
    """The rings between thread ranks: messages of 0 B to 128 KiB+1 around the slot
    (480 B), inline (1440 B over 3 slots), eager and split (16 KiB) limits and the split's
    whole chunks (128 KiB), 88 in a row per direction (more than a ring holds, the rest
    through the overflow queue), received late and by pre-posted any-source any-tag receives, in
    order with every byte checked; large messages of odd sizes (128 KiB+1 to 2 MiB-5)
    copied by receiver and sender together, the bytes past them untouched. With one
    process of 2 ranks (a core each) the senders copy chunks of the split messages. With
    two processes of 1 rank the same through the node's shared rings, the sender's queue
    behind a full ring, and single copy (src/threads/node_copy.c)."""
    result = run_job(threads_argv(threads, np, "mcoll-test-p2p", ["--only", section],
                                  flavour=flavour), {"MCOLL_THREADS_STATS": "1"}, JOB_TIMEOUT)
    checks = check_passed(result, "test_p2p")
    assert checks == SECTION_CHECKS[section] * (np // 2), result.describe()
    split = [tuple(map(int, m)) for m in
             re.findall(r"(\d+) messages split, (\d+) chunks copied by senders", result.stderr)]
    assert len(split) == np // threads, result.describe()
    if section == "split" and threads == 2 and np == 2:
        # 8 messages of 2-32 chunks: the waiting senders take a share of the chunks
        assert split[0][0] == 8 and split[0][1] > 0, result.describe()
    if threads == 1:  # (each message read from the sender, or inline in the node's ring)
        rings = [int(n) for n in re.findall(r"(\d+) through the node's rings", result.stderr)]
        assert len(rings) == np and min(rings) >= SECTION_RING_MESSAGES[section], result.describe()


@pytest.mark.parametrize("flavour,threads,np",
                         flavoured([layout(2, 2), layout(4, 4), layout(2, 4), layout(1, 2)],
                                   openmpi_default=["1x2", "2x1"]))
def test_full_ring_sends_do_not_wait(flavour, threads, np):
    """A rank Isends 61 messages (0 B to 20 KiB, more than its ring holds) to a rank that
    stays out of MPI: the sends return at once (in under half the receiver's absence),
    those up to the inline limit complete at once; the receiver then gets them in order
    across the ring and the overflow queue (every other one by any source, any tag),
    every byte checked, MPI_ERR_TRUNCATE for the one too large for its receive, and
    later messages through the ring again (test_p2p --only overflow). Between two
    processes (2x1) the queue behind a full ring is the sender's."""
    result = run_job(threads_argv(threads, np, "mcoll-test-p2p", ["--only", "overflow"],
                                  flavour=flavour), {}, JOB_TIMEOUT)
    assert check_passed(result, "test_p2p") == SECTION_CHECKS["overflow"] * (np // 2), \
        result.describe()


IDLE_REPORT = re.compile(r"idle: rank (\d+) waited ([\d.]+) ms, used ([\d.]+) ms")


@pytest.mark.parametrize("flavour,threads,np",
                         flavoured([layout(1, 2), layout(2, 4)], openmpi_default=["2x1"]))
def test_waits_between_processes_sleep(flavour, threads, np):
    """Where every message between the job's processes takes the node's rings, a rank
    that waits long for another process (a barrier while rank 0 sleeps 400 ms) leaves
    its core: past its spin and yield windows it sleeps until woken, and uses under a
    quarter of its wait in CPU (yielding throughout, as before, it used 55-99%)."""
    result = run_job(threads_argv(threads, np, "mcoll-test-p2p", ["--only", "idle"],
                                  flavour=flavour), {}, JOB_TIMEOUT)
    check_passed(result, "test_p2p")
    reports = [(int(r), float(w), float(u)) for r, w, u in IDLE_REPORT.findall(result.stderr)]
    assert sorted(r for r, _, _ in reports) == list(range(1, np)), result.describe()
    for rank, waited, used in reports:
        assert used < 0.25 * waited, (rank, waited, used, result.describe())


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 2), layout(4, 4)]))
def test_rings_with_sleeping_waits(flavour, threads, np):
    """Full rings with every wait asleep: the receiver is woken when a slot fills or a
    message overflows, a blocking sender when its message is copied."""
    result = run_job(threads_argv(threads, np, "mcoll-test-p2p", ["--only", "eager"],
                                  flavour=flavour), SLEEPING_WAITS, JOB_TIMEOUT)
    assert check_passed(result, "test_p2p") == SECTION_CHECKS["eager"] * (np // 2)
    assert result.seconds < SLEEP_TIMEOUT_S, result.describe()


def test_p2p_as_processes():
    """The point-to-point program is plain MPI: it passes under the host MPI too."""
    result = run_job(mpijob.mpiexec_argv(FLAVOUR, 3, BUILD.bin(FLAVOUR, "mcoll-test-p2p"), mcoll=False),
                     None, JOB_TIMEOUT)
    check_passed(result, "test_p2p")


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 4), layout(4, 4, full=True)]))
def test_datatypes_as_thread_ranks(flavour, threads, np):
    result = run_job(threads_argv(threads, np, "mcoll-test-datatypes", flavour=flavour), None,
                     JOB_TIMEOUT)
    # (test_datatypes.py's count of the layouts case: 15 n^2 + 8 n + 26 n)
    checks = 15 * np * np + 34 * np
    assert result.returncode == 0 and f"test_datatypes: {checks} checks, 0 errors" in result.stdout, \
        result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 4), layout(1, 3, full=True)]))
@pytest.mark.parametrize("program,args,summary", [
    ("mcoll-test-p2p", [], "test_p2p"),
    ("mcoll-test-coll", ["--quick", "--count-api", "0"], "test_coll"),
    ("mcoll-test-nbc", ["--groups", "2", "--max-bytes", "64K", "--seed", "7"], "test_nbc")],
    ids=["p2p", "coll", "nbc"])
def test_host_path_between_processes(flavour, threads, np, program, args, summary):
    """Without the node's rings (MCOLL_THREADS_NODE_RINGS=0) messages between processes
    cross the host MPI, as between nodes (envelope and bytes, one host message up to
    2 KiB, single copy from 64 KiB): the programs pass, and nothing went through a ring."""
    result = run_job(threads_argv(threads, np, program, args, flavour=flavour),
                     {"MCOLL_THREADS_NODE_RINGS": "0", "MCOLL_THREADS_STATS": "1"}, JOB_TIMEOUT)
    assert check_passed(result, summary) > 0
    rings = [int(n) for n in re.findall(r"(\d+) through the node's rings", result.stderr)]
    assert len(rings) == np // threads and not any(rings), result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 4)]))
@pytest.mark.parametrize("program,args,summary", [
    ("mcoll-test-p2p", [], "test_p2p"),
    ("mcoll-test-coll", ["--quick", "--count-api", "0"], "test_coll"),
    ("mcoll-test-groups", [], "test_groups"),
    ("mcoll-test-datatypes", [], "test_datatypes"),
    ("mcoll-test-nbc", ["--groups", "2", "--max-bytes", "64K", "--seed", "7"], "test_nbc")],
    ids=["p2p", "coll", "groups", "datatypes", "nbc"])
def test_node_copy_every_message(flavour, threads, np, program, args, summary):
    """Between processes of one node a message from MCOLL_THREADS_NODE_COPY bytes is read
    by its receiver from the sender's buffer (src/threads/node_copy.c) and only a
    reference to it crosses, in the node's ring (through the host MPI without the
    rings); at 1 byte every non-empty message goes so: any-source
    and probes, truncation, Mprobe/Mrecv, cancelled receives, a freed active send, derived
    types, the collectives' schedules. Each process counts the messages it read."""
    result = run_job(threads_argv(threads, np, program, args, flavour=flavour),
                     {"MCOLL_THREADS_NODE_COPY": "1", "MCOLL_THREADS_STATS": "1"}, JOB_TIMEOUT)
    assert check_passed(result, summary) > 0
    read = [int(n) for n in re.findall(r"(\d+) read from other processes", result.stderr)]
    assert len(read) == np // threads and all(n > 0 for n in read), result.describe()


# Odd numbers of ranks too, for the non-blocking collectives and the groups.
ODD_LAYOUTS = [layout(3, 3), layout(1, 3, full=True), layout(5, 5, full=True)]


def nbc_thread_args(np):
    """Fewer outstanding groups, communicators and bytes as ranks outnumber the cores
    (every waiting rank spins): every collective still runs in both forms."""
    if np <= 4:
        return ["--groups", "4", "--disorder", "2", "--max-bytes", "256K"]
    return ["--groups", "2", "--disorder", "2", "--comms", "world,reversed", "--max-bytes", "64K",
            "--free-active", "1"]


@pytest.mark.parametrize("flavour,threads,np", flavoured(BELOW_30 + ODD_LAYOUTS, openmpi_default=["2x2"]))
def test_nbc_as_thread_ranks(request, flavour, threads, np):
    """Every collective's MPI_I* and persistent (MPI_<Coll>_init + MPI_Start(all)) forms,
    checked against test_coll's point-to-point reference (tests/mpi/test_nbc.c): several
    outstanding on one and on several communicators, started in different orders on
    different communicators, completed in rank-dependent orders by Wait, Test loops,
    Waitall, Waitany, Waitsome, Testall, Testany and Testsome, mixed with point-to-point
    requests and blocking collectives; MPI_Request_free of an active one is rejected."""
    args = nbc_thread_args(np) + ["--seed", seed_for(request)]
    result = run_job(threads_argv(threads, np, "mcoll-test-nbc", args, flavour=flavour), None, JOB_TIMEOUT)
    assert check_passed(result, "test_nbc") > 0
    # Open MPI 4.1's mpi.h is MPI 3.1: the persistent forms (MPIX_) run in test_persistent.
    forms = "nonblocking" if flavour == "openmpi" else "nonblocking persistent"
    assert re.search(rf"^test_nbc: forms: {forms},", result.stdout, re.M), result.describe()
    assert re.search(r"accepted 0, rejected [1-9]", result.stdout), result.describe()


@pytest.mark.parametrize("case", ["progress-test", "progress-testall", "progress-testany",
                                  "progress-testsome", "progress-get_status", "order",
                                  "freed-comm"])
@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 2), layout(1, 2, full=True),
                                                          layout(3, 3, full=True)]))
def test_persistent_as_thread_ranks(case, flavour, threads, np):
    """Persistent collectives where they differ from MPI_I* calls (tests/mpi/
    test_persistent.c): a test call on a started barrier lets a large message through;
    they match in the order of their initialisation whatever the order of the starts;
    their communicator may be freed before they start."""
    result = run_job(threads_argv(threads, np, "mcoll-test-persistent", ["--deadline", "20", case],
                                  flavour=flavour),
                     None, JOB_TIMEOUT)
    assert re.search(rf"^{case}: done$", result.stdout, re.M), result.describe()
    check_passed(result, "test_persistent")


def test_persistent_truncate_as_thread_ranks():
    """A persistent bcast whose root sends more than the others expect: MPI_Wait returns
    MPI_ERR_TRUNCATE on the others."""
    result = run_job(threads_argv(3, 3, "mcoll-test-persistent", ["--deadline", "20", "truncate"]),
                     None, JOB_TIMEOUT)
    assert re.search(r"^truncate: wait: MPI_SUCCESS \(rank 1: MPI_ERR_TRUNCATE\) "
                     r"\(rank 2: MPI_ERR_TRUNCATE\)$", result.stdout, re.M), result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured(BELOW_30 + ODD_LAYOUTS, openmpi_default=["2x2"]))
def test_groups_as_thread_ranks(flavour, threads, np):
    """Groups (MPI_Comm_group, MPI_Group_incl/excl/range_incl/range_excl/translate_ranks/
    compare/union/intersection/difference/free), MPI_Comm_create (one group, and disjoint
    groups) and MPI_Comm_create_group called by a group's members only, MPI_Cancel of
    posted (and persistent) receives, MPI_Mprobe/Improbe + MPI_Mrecv/Imrecv
    (tests/mpi/test_groups.c)."""
    result = run_job(threads_argv(threads, np, "mcoll-test-groups", flavour=flavour), None, JOB_TIMEOUT)
    assert check_passed(result, "test_groups") > 0


@pytest.mark.parametrize("flavour,threads,np", flavoured(
    [layout(2, 2), layout(4, 4), layout(2, 4), layout(3, 3, full=True), layout(8, 8, full=True),
     layout(15, 15, full=True)], openmpi_default=["1x2", "1x4"]))
def test_thread_coll_as_thread_ranks(flavour, threads, np):
    """The in-process collectives (src/threads/coll_local.c: ranks read and write each
    other's buffers) at their edges: in place, non-commutative reductions split into
    segments, empty reduce_scatter blocks, strided types on one side, on communicators
    inside one process and across processes (tests/mpi/test_thread_coll.c); 300
    communicators alive at once, whose eager slots stay within their budget; and the
    thread ranks together may use every CPU (Open MPI binds a lone process to one core
    unless told not to), each bound to one of its own when the node's ranks fit."""
    result = run_job(threads_argv(threads, np, "mcoll-test-thread-coll", flavour=flavour), None,
                     JOB_TIMEOUT)
    assert check_passed(result, "test_thread_coll") > 0
    cpus = re.search(r"^test_thread_coll: cpus (\d+), per rank (\d+)$", result.stdout, re.M)
    available = len(os.sched_getaffinity(0))
    assert cpus, result.describe()
    assert int(cpus.group(1)) == min(np, available), result.describe()
    assert int(cpus.group(2)) == (1 if np <= available else available), result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured(
    [layout(3, 3), layout(4, 4, full=True), layout(8, 8, full=True)], openmpi_default=["1x3"]))
@pytest.mark.parametrize("fold", ["each", "segments"])
def test_eager_allreduce_folds(flavour, threads, np, fold):
    """The other folds of the eager allreduce (MCOLL_THREADS_EAGER_ALLREDUCE; the tests
    above run the default, the last rank to arrive folding for all): every rank folding
    every slot, and each rank a segment of them. A non-commutative user operation at
    counts below the ranks' and odd ones (1, 5, 255 elements of 16 bytes), in place and
    not, the result checked at every rank (tests/mpi/test_thread_coll.c)."""
    result = run_job(threads_argv(threads, np, "mcoll-test-thread-coll", flavour=flavour),
                     {"MCOLL_THREADS_EAGER_ALLREDUCE": fold}, JOB_TIMEOUT)
    assert check_passed(result, "test_thread_coll") > 0


@pytest.mark.parametrize("flavour,threads,np", flavoured(
    [layout(2, 4), layout(3, 6, full=True), layout(2, 6), layout(2, 8, full=True),
     layout(2, 10, full=True)]))
def test_thread_coll_two_levels(flavour, threads, np):
    """Communicators across processes take two levels (src/threads/coll_hier.c: in place
    among a process's thread ranks, messages among one leader per process) for barrier,
    bcast (pipelined in 64 KiB segments from 128 KiB), reduce, allreduce, allgather(v),
    gather(v), scatter(v), alltoall(v,w), and scan and exscan where each process's ranks
    are consecutive: the same program at 2x2 and 3x2 on both MPIs, 2x3, 4x2 and 5x2 on
    one each (the MPI carries only the leaders' messages; from 3 processes the
    leaders' step of reduce, gather(v), scatter(v) and of an allreduce over a number of
    processes that is not a power of two is a binomial tree; from 4 it has depth 2 and
    gatherv/scatterv forward sizes), checked against the inputs' formulas
    (non-commutative reductions at every root, which keep process order in two trees and
    fall back to the message path where processes interleave; a commutative user
    operation and sums, which do not; in place; every root; uneven and empty v blocks;
    strided types; poisoned outputs and gaps), on world, halves, reversed, uneven (world
    without rank 1) and interleaved (also without the last rank) communicators. On the
    same communicators the MPI_I* forms (two in flight with a blocking two-level bcast
    between post and wait; non-commutative iallreduce, ireduce at every root, iscan,
    iexscan; ibcast, igather, iscatter from every root; iallgather, ialltoall, ibarrier)
    and a persistent allreduce and bcast started twice (MPICH: MPI_*_init, Open MPI:
    MPIX_*_init), which keep the message schedules across processes.
    MCOLL_THREADS_HIER=4 makes every collective and size take two levels (an
    oversubscribed node keeps the messages for some by default) and rank 0 of each such
    communicator name its layout, and each collective the first time it takes two levels
    there."""
    result = run_job(threads_argv(threads, np, "mcoll-test-thread-coll", flavour=flavour),
                     {"MCOLL_THREADS_HIER": "4", "MCOLL_THREADS_BCAST_SEGMENT": "65536"}, JOB_TIMEOUT)
    assert check_passed(result, "test_thread_coll") > 0
    procs = np // threads
    lines = re.findall(r"^mcoll threads: two levels: (\d+) ranks in (\d+) processes \(([\d ]+)\), "
                       r"(contiguous|interleaved)$", result.stderr, re.M)
    seen = {(int(n), int(p), tuple(map(int, sizes.split())), how) for n, p, sizes, how in lines}
    even = tuple([threads] * procs)
    assert (np, procs, even, "contiguous") in seen, result.describe()  # world, reversed
    assert (np, procs, even, "interleaved") in seen, result.describe()
    without_first = tuple([threads - 1] + [threads] * (procs - 1))
    without_last = tuple([threads] * (procs - 1) + [threads - 1])
    assert (np - 1, procs, without_first, "contiguous") in seen, result.describe()
    assert (np - 1, procs, without_last, "interleaved") in seen, result.describe()
    took = set(re.findall(r"^mcoll threads: two-level (\w+) on (\d+) ranks$", result.stderr, re.M))
    for coll in ("barrier", "bcast", "reduce", "allreduce", "allgather", "allgatherv", "gather",
                 "scatter", "gatherv", "scatterv", "alltoall", "alltoallv", "alltoallw", "scan",
                 "exscan"):
        assert (coll, str(np)) in took and (coll, str(np - 1)) in took, (coll, result.describe())


def test_thread_coll_as_processes():
    """The program is plain MPI: it passes under the host MPI too (Open MPI: at 3 ranks
    on 2 cores MPICH spins through the program's sleeps, ten times as long)."""
    result = run_job(mpijob.mpiexec_argv("openmpi", 3, BUILD.bin("openmpi", "mcoll-test-thread-coll"),
                                         mcoll=False), None, JOB_TIMEOUT)
    check_passed(result, "test_thread_coll")


@pytest.mark.parametrize("np", [1, 3])
def test_groups_as_processes(np):
    """The groups program is plain MPI: it passes under the host MPI too."""
    result = run_job(mpijob.mpiexec_argv(FLAVOUR, np, BUILD.bin(FLAVOUR, "mcoll-test-groups"),
                                         mcoll=False), None, JOB_TIMEOUT)
    check_passed(result, "test_groups")


@pytest.mark.parametrize("case", ["touch", "late", "next", "stack", "noncontig", "colls",
                                  "alltoallv"])
def test_tnbc_programs_as_thread_ranks(case):
    """The T-NBC hazard programs' legal cases (tests/mpi/test_tnbc.c: buffers read early,
    late, reused, on the stack, non-contiguous) complete with the right bytes."""
    result = run_job(threads_argv(2, 4, "mcoll-test-tnbc", [case]), None, JOB_TIMEOUT)
    assert result.returncode == 0 and f"test_tnbc: passed ({case})" in result.stdout, \
        result.describe()


@pytest.mark.parametrize("binding", list(BINDINGS))
@pytest.mark.parametrize("flavour", flavours())
def test_fortran_as_thread_ranks(programs, flavour, binding):  # noqa: F811
    """Fortran programs (mpif.h, use mpi, use mpi_f08): the MPI's Fortran library loads in
    each namespace and calls the stand-in (Open MPI's through MPI_*_f2c/_c2f)."""
    if (flavour, binding) not in programs:
        pytest.skip(f"no mpif90.{flavour} (gfortran)")
    result = run_job(threads_argv(2, 4, programs[flavour, binding], flavour=flavour), None, JOB_TIMEOUT)
    check_passed(result, "test_fortran")


FORTRAN_ATTR = """program attr
  use mpi
  implicit none
  integer :: ierr
  integer(kind=MPI_ADDRESS_KIND) :: value
  logical :: flag
  call MPI_Init(ierr)
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, value, flag, ierr)
  print *, 'tag_ub', value, flag
  call MPI_Finalize(ierr)
end program
"""


@pytest.mark.parametrize("flavour", flavours())
def test_missing_fortran_call_is_named(flavour, tmp_path):
    """A Fortran call whose path the runtime lacks (attributes: MPICH's MPII_Comm_get_attr,
    Open MPI's ompi_attr_get_aint) stops the job naming it; nothing faults on the way
    out (a rank's Fortran runtime reports faults with handlers of its own)."""
    compiler = shutil.which(f"mpif90.{flavour}")
    if not compiler:
        pytest.skip(f"no mpif90.{flavour} (gfortran)")
    (tmp_path / "attr.f90").write_text(FORTRAN_ATTR)
    subprocess.run([compiler, "-o", tmp_path / "attr", tmp_path / "attr.f90"], check=True)
    result = run_job(threads_argv(2, 4, tmp_path / "attr", flavour=flavour), None, JOB_TIMEOUT)
    assert result.returncode != 0, result.describe()
    assert re.search(r"called (MPII_Comm_get_attr|ompi_attr_get_aint).*, which thread ranks do "
                     r"not implement", result.stderr), result.describe()
    assert "SIGSEGV" not in result.stderr and "Segmentation" not in result.stderr, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_rank_state(flavour):
    """Each rank has its own globals, constructors, argv/getopt, environ, stdout buffer
    and atexit handlers (exit() after MPI_Finalize ends that rank only); the ranks of a
    process share the pid, the cwd and the signal handlers."""
    threads, np = 2, 4
    result = run_job(threads_argv(threads, np, "mcoll-test-rank-state", ["-t", "tagged", "-v"],
                                  flavour=flavour), None, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    states = {int(m.group(1)): m.group(0) for m in
              re.finditer(r"^state rank (\d+): .*$", result.stdout, re.M)}
    assert sorted(states) == list(range(np)), result.describe()
    pids = {}
    for rank, line in states.items():
        fields = dict(re.findall(r"([\w-]+) (\S+)", line.split(": ", 1)[1]))
        assert fields["counter"] == "1" and fields["constructed"] == "1", line
        assert fields["buffer"] == f"rank-{rank}", line
        assert fields["tag"] == "tagged" and fields["verbose"] == "1" and fields["argc"] == "4", line
        assert fields["env"] == "1", line
        assert fields["float"] == f"{2.5 * (rank + 1):.3f}", line
        assert fields["signal-shared"] == "1" and fields["cwd-shared"] == "1", line
        pids.setdefault(rank // threads, set()).add(fields["pid"])
    assert all(len(p) == 1 for p in pids.values()) and len(set.union(*pids.values())) == np // threads
    for rank in range(np):
        assert f"atexit rank {rank} counter 1" in result.stdout, result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(3, 6), layout(15, 15, full=True)]))
def test_library_globals(flavour, threads, np):
    """A linked library's mutable globals are per rank."""
    result = run_job(threads_argv(threads, np, "mcoll-test-lib-globals", flavour=flavour), None,
                     JOB_TIMEOUT)
    assert result.returncode == 0 and "test_lib_globals: 0 errors" in result.stdout, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_missing_call_is_named(flavour, odd_programs, tmp_path):
    """A call the runtime lacks (here MPI_Win_fence) stops the job with its name; the
    aborted job leaves no program copy behind."""
    result = run_job(threads_argv(2, 4, odd_program(odd_programs, "missing", flavour), flavour=flavour),
                     {"TMPDIR": str(tmp_path)},
                     JOB_TIMEOUT)
    assert list(tmp_path.iterdir()) == [], result.describe()
    assert result.returncode != 0, result.describe()
    assert re.search(r"called MPI_Win_fence, which thread ranks do not implement", result.stderr), \
        result.describe()
    assert "Segmentation" not in result.stderr, result.describe()


# Rank 0 caps its address space, then sends small messages to rank 1, which stays out of
# MPI, until the overflow queue's copies no longer fit.
FLOOD = r"""#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "VmSize: %ld kB", &kib) == 1)
        break;
    fclose(f);
    struct rlimit lim = {.rlim_cur = (rlim_t)(kib + 64 * 1024) * 1024, .rlim_max = RLIM_INFINITY};
    setrlimit(RLIMIT_AS, &lim);
    static char buf[1000];
    memset(buf, 7, sizeof buf);
    for (long i = 0; i < 100000000; i++) {
      MPI_Request q;
      MPI_Isend(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD, &q);
      MPI_Request_free(&q);
    }
    printf("flood: every message sent\n");
  } else {
    sleep(100);
  }
  MPI_Finalize();
  return 0;
}
"""


@pytest.fixture(scope="module")
def odd_programs(tmp_path_factory):
    """Per MPI: a static program, a non-PIE MPI program, the point-to-point program
    built by the MPI's own compiler wrapper (as a user builds theirs), and one that
    calls what thread ranks lack."""
    folder = tmp_path_factory.mktemp("threads-programs")
    (folder / "plain.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["cc", "-static", "-o", folder / "static", folder / "plain.c"], check=True)
    source = mpijob.ROOT / "tests" / "mpi" / "test_p2p.c"
    (folder / "missing.c").write_text(
        "#include <mpi.h>\nint main(int argc, char **argv) {\n  MPI_Init(&argc, &argv);\n"
        "  MPI_Win_fence(0, MPI_WIN_NULL);\n  MPI_Finalize();\n  return 0;\n}\n")
    (folder / "flood.c").write_text(FLOOD)
    for flavour in mpijob.FLAVOURS:
        if shutil.which(f"mpicc.{flavour}"):
            subprocess.run([f"mpicc.{flavour}", "-o", folder / f"flood.{flavour}", folder / "flood.c"],
                           check=True)
            subprocess.run([f"mpicc.{flavour}", "-no-pie", "-fno-pie", "-o", folder / f"nopie.{flavour}",
                            source], check=True)
            subprocess.run([f"mpicc.{flavour}", "-o", folder / f"wrapped.{flavour}", source], check=True)
            subprocess.run([f"mpicc.{flavour}", "-o", folder / f"missing.{flavour}", folder / "missing.c"],
                           check=True)
    return folder


@pytest.mark.parametrize("flavour", flavours())
def test_out_of_memory_stops_the_job(odd_programs, flavour):
    """A message copy the runtime cannot allocate (here a full ring's overflow queue
    under a capped address space) stops the job with MPI_ERR_NO_MEM and where, not a
    crash."""
    argv = threads_argv(2, 2, odd_program(odd_programs, "flood", flavour), flavour=flavour)
    result = run_job(argv, None, 90)
    assert result.returncode != 0, result.describe()
    assert re.search(r"mcoll threads: out of memory \(MPI_ERR_NO_MEM\): \d+ bytes in \w+",
                     result.stderr), result.describe()
    assert "every message sent" not in result.stdout, result.describe()
    assert "Segmentation" not in result.stderr, result.describe()
    assert result.seconds < 60, result.describe()


def test_runtime_allocations_are_checked():
    """The collectives' and groups' allocations go through the runtime's checked
    allocators (fatal.c: out of memory stops the job with MPI_ERR_NO_MEM and where),
    never a bare malloc whose NULL a later line would dereference."""
    bare = re.compile(r"(?<![\w.])(malloc|calloc|realloc|aligned_alloc)\s*\(")
    folder = mpijob.ROOT / "src" / "threads"
    found = []
    for path in sorted(folder.glob("coll*.c")) + [folder / "groups.c", folder / "eager_slots.c"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if bare.search(line.split("//")[0]):
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("flavour", flavours())
def test_allocation_failure_in_a_collective_stops_the_job(flavour):
    """A real shortage's path: with MCOLL_THREADS_FAIL_ALLOC_IN=allgatherv_messages
    (fatal.c's hook) every checked allocation of MPI_Allgatherv's message algorithm (the
    one across processes with MCOLL_THREADS_HIER=0, whatever the cores) fails as malloc's
    NULL would. The job must stop at once with MPI_ERR_NO_MEM and the function named,
    not crash or hang, and leave nothing in /dev/shm (run_job checks); without the hook
    the same job passes."""
    argv = threads_argv(2, 4, "mcoll-test-coll", ["--quick", "--count-api", "0"], flavour=flavour)
    result = run_job(argv, {"MCOLL_THREADS_FAIL_ALLOC_IN": "allgatherv_messages",
                            "MCOLL_THREADS_HIER": "0"}, JOB_TIMEOUT)
    assert result.returncode != 0, result.describe()
    assert "mcoll threads: out of memory (MPI_ERR_NO_MEM): " in result.stderr, result.describe()
    assert re.search(r"out of memory \(MPI_ERR_NO_MEM\): \d+ bytes in allgatherv_messages$",
                     result.stderr, re.M), result.describe()
    assert "Segmentation fault" not in result.stderr + result.stdout, result.describe()
    check_passed(run_job(argv, {"MCOLL_THREADS_FAIL_ALLOC_IN": "no_such_function"}, JOB_TIMEOUT))


def odd_program(folder, name, flavour):
    path = folder / (name if name == "static" else f"{name}.{flavour}")
    if not path.exists():
        pytest.skip(f"mpicc.{flavour} not installed")
    return path


@pytest.mark.parametrize("flavour", flavours())
@pytest.mark.parametrize("program,threads,np,reason", [
    ("static", 2, 2, "statically linked"),
    ("nopie", 2, 2, "not position-independent"),
    ("mcoll-test-p2p", 16, 16, "from 1 to 15 thread ranks"),
    ("mcoll-test-p2p", 3, 4, "does not divide"),
])
def test_refusals(odd_programs, flavour, program, threads, np, reason):
    path = program if program.startswith("mcoll-") else odd_program(odd_programs, program, flavour)
    result = run_job(threads_argv(threads, np, path, flavour=flavour), None, 60)
    assert result.returncode == 2 and reason in result.stderr, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_fallback_to_processes(odd_programs, flavour):
    """--threads-fallback runs a program that cannot be thread ranks as processes."""
    argv = threads_argv(2, 2, odd_program(odd_programs, "nopie", flavour), flavour=flavour,
                        extra=["--threads-fallback"])
    result = run_job(argv, None, JOB_TIMEOUT)
    check_passed(result, "test_p2p")
    assert "running as processes" in result.stderr, result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 4), layout(4, 8, full=True)]))
def test_wrapper_built_program(odd_programs, flavour, threads, np):
    """A program built by mpicc.<flavour> itself runs as thread ranks."""
    argv = threads_argv(threads, np, odd_program(odd_programs, "wrapped", flavour), flavour=flavour)
    check_passed(run_job(argv, None, JOB_TIMEOUT), "test_p2p")


from test_multihost import TESTHOSTS, hosts  # noqa: E402,F401 (the fixture: test hosts up)


@needs_threads
@pytest.mark.full
@pytest.mark.hosts
@pytest.mark.parametrize("program,args,summary", [
    ("mcoll-test-p2p", [], "test_p2p"),
    ("mcoll-test-coll", ["--quick", "--count-api", "0"], "test_coll"),
])
def test_across_test_hosts(hosts, program, args, summary):  # noqa: F811
    """2 test hosts (network namespaces, TCP between them) x 1 process x 2 thread ranks:
    messages between hosts go through the host MPI with their envelopes. MPICH over
    UCX's TCP may hang in MPI_Finalize (see test_multihost.run_on_hosts): a job killed
    at the timeout counts when the program printed its verdict."""
    threads = 2
    placement = subprocess.run([str(TESTHOSTS), "launcher-args", FLAVOUR, "1,1"], check=True,
                               capture_output=True, text=True).stdout.split("\n")[:-1]
    at = placement.index("-np") + 1
    placement[at] = str(int(placement[at]) * threads)
    argv = [str(mpijob.MCOLLRUN), "--mpi", FLAVOUR, "--threads", str(threads), *placement,
            str(BUILD.bin(FLAVOUR, program)), *args]
    # (run_job drops MCOLL_* variables: the rsh agent needs the test-host set's)
    env = {k: v for k, v in os.environ.items() if k.startswith("MCOLL_TESTHOSTS_")}
    result = run_job(argv, env, 120, expect_timeout=True)
    assert re.search(rf"^{summary}: \d+ checks, 0 errors$", result.stdout, re.M), result.describe()
