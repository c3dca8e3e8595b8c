"""The non-blocking and persistent collectives (tests/mpi/test_nbc.c) against
test_coll's point-to-point reference: every collective in MPI_I* form and (MPI 4
only: MPICH) MPI_<Coll>_init form, several outstanding calls per communicator and
across communicators completed in rank-dependent orders by every Wait/Test call,
mixed with point-to-point requests and blocking collectives, starts in different
orders on different communicators, MPI_Request_free on active requests.

Under mcoll (bin/mcollrun) at 1, 2, 3, 4, 5 and 8 ranks on both MPIs, flat and with
a fake two-node hierarchy, MCOLL_PROGRESS_THREAD=0 and =1, MCOLL_FALLBACK=error; a
subset with the ASan build; once natively as a sanity check. test_nbc_heavy: larger
messages (-k heavy selects them, -k "not heavy" leaves them out). Every job has a
hard timeout (mpijob.run_job) and must leave no /dev/shm/mcoll-* file.
Set MCOLL_TEST_SEED to run with another seed than the one derived from each test's name.
"""

import re

import pytest

from mpijob import ASAN, BASE_ENV, BUILD, check_passed, flavour_param, mpiexec_argv, run_job, seed_for
JOB_TIMEOUT = 240
PROGRAM = "mcoll-test-nbc"


def nbc_args(flavour, np):
    """MPICH 4.0 spins without yielding, so each of the reference's point-to-point
    messages takes a time slice once ranks outnumber the 2 cores: fewer groups,
    communicators and bytes there as ranks grow (every collective still runs in
    both forms)."""
    if flavour == "openmpi" or np <= 2:
        return ["--groups", "16", "--disorder", "6"]
    if np <= 4:
        return ["--groups", "8", "--disorder", "3", "--max-bytes", "512K"]
    return ["--groups", "4", "--disorder", "2", "--comms", "world,reversed", "--max-bytes", "256K",
            "--free-active", "1"]


def topo_env(topo):
    return {"MCOLL_TOPO": topo} if topo and topo != "flat" else {}


def asan_env():
    """The ASan+UBSan build's library (leak checking off: both MPIs leak at exit on their own)."""
    return {"MCOLL_BUILD_DIR": str(ASAN.path),
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0",
            "UBSAN_OPTIONS": "print_stacktrace=1"}


def nbc_env(topo, progress):
    return {**BASE_ENV, **topo_env(topo), "MCOLL_PROGRESS_THREAD": str(progress)}


def check_summary(result, flavour):
    """The program's own verdict, and which forms ran: persistent on MPICH only
    (Open MPI 4.1's mpi.h is MPI 3.1)."""
    checks = check_passed(result, "test_nbc")
    assert checks > 0, result.describe()
    forms = re.search(r"^test_nbc: forms:([a-z ]*),", result.stdout, re.M)
    assert forms and "nonblocking" in forms.group(1), result.describe()
    if flavour == "mpich":
        assert "persistent" in forms.group(1), f"MPICH 4.0 is MPI 4.0: persistent forms must run\n{result.describe()}"
    else:
        assert re.search(r"persistent collectives skipped: mpi\.h is MPI 3\.", result.stdout), result.describe()
    return checks


# (flavour, np, topo, MCOLL_PROGRESS_THREAD): every rank count on both MPIs; each MPI
# sees flat and nodes=2, and both progress settings.
MATRIX = [
    ("openmpi", 1, "flat", 0), ("openmpi", 2, "nodes=2", 1), ("openmpi", 3, "flat", 1),
    ("openmpi", 4, "nodes=2", 0), ("openmpi", 5, "nodes=2", 1), ("openmpi", 8, "flat", 0),
    ("openmpi", 8, "nodes=2", 1),
    ("mpich", 1, "flat", 1), ("mpich", 2, "nodes=2", 0), ("mpich", 3, "nodes=2", 1),
    ("mpich", 4, "flat", 0), ("mpich", 5, "nodes=2", 0), ("mpich", 8, "nodes=2", 1),
]
DEFAULT_MATRIX = {("openmpi", 2, "nodes=2", 1), ("openmpi", 4, "nodes=2", 0),
                  ("mpich", 2, "nodes=2", 0), ("mpich", 3, "nodes=2", 1)}


@pytest.mark.parametrize("flavour,np,topo,progress", [flavour_param(f, n, t, p, full=(f, n, t, p) not in DEFAULT_MATRIX)
                                                      for f, n, t, p in MATRIX])
def test_nbc(request, flavour, np, topo, progress):
    program = BUILD.bin(flavour, PROGRAM)
    args = nbc_args(flavour, np) + ["--seed", seed_for(request)]
    result = run_job(mpiexec_argv(flavour, np, program, args), nbc_env(topo, progress), JOB_TIMEOUT)
    check_summary(result, flavour)


@pytest.mark.parametrize("flavour,np", [flavour_param(f, 2) for f in ("openmpi", "mpich")])
def test_nbc_handed_to_thread(request, flavour, np):
    """MCOLL_NBC_HANDOFF=1: every MPI_I* call goes to the progress thread before its
    first step (by default only those across nodes: the nodes=2 rows above). Each
    call then waits for the thread to wake: fewer groups (a loaded machine took
    2.7 min for the full set)."""
    program = BUILD.bin(flavour, PROGRAM)
    args = ["--groups", "4", "--disorder", "2", "--max-bytes", "256K", "--seed", seed_for(request)]
    env = {**nbc_env("flat", 1), "MCOLL_NBC_HANDOFF": "1"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_summary(result, flavour)


HEAVY = [("openmpi", 3, "nodes=2", 0), ("mpich", 2, "flat", 1)]


@pytest.mark.parametrize("flavour,np,topo,progress", [flavour_param(f, n, t, p, full=True) for f, n, t, p in HEAVY])
def test_nbc_heavy(request, flavour, np, topo, progress):
    """Messages up to 4 MiB, a third of the single calls above 1 MiB, more groups."""
    program = BUILD.bin(flavour, PROGRAM)
    args = ["--max-bytes", "4M", "--large", "30", "--groups", "12", "--disorder", "4",
            "--comms", "world,dup,reversed", "--seed", seed_for(request)]
    result = run_job(mpiexec_argv(flavour, np, program, args), nbc_env(topo, progress), JOB_TIMEOUT)
    check_summary(result, flavour)


ASAN_RUNS = [("openmpi", 3, "nodes=2", 1), ("mpich", 2, "nodes=2", 0)]


@pytest.mark.parametrize("flavour,np,topo,progress", [flavour_param(f, n, t, p, build=ASAN)
                                                      for f, n, t, p in ASAN_RUNS])
def test_nbc_asan(request, flavour, np, topo, progress):
    """The ASan+UBSan build (leak checking off: both MPIs leak at exit on their own)."""
    program = ASAN.bin(flavour, PROGRAM)
    args = nbc_args(flavour, np) + ["--seed", seed_for(request)]
    env = {**nbc_env(topo, progress), **asan_env()}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_summary(result, flavour)
    assert "runtime error" not in result.stderr and "AddressSanitizer" not in result.stderr, result.describe()


@pytest.mark.parametrize("flavour,np", [flavour_param("openmpi", 4), flavour_param("mpich", 3, full=True)])
def test_nbc_native(request, flavour, np):
    """Without mcoll: the program and its host-MPI workarounds hold on the plain MPI."""
    program = BUILD.bin(flavour, PROGRAM)
    args = nbc_args(flavour, np) + ["--seed", seed_for(request)]
    result = run_job(mpiexec_argv(flavour, np, program, args, mcoll=False), {}, JOB_TIMEOUT)
    check_summary(result, flavour)


PIECES = [("openmpi", 5, "nodes=3", 1, None), ("mpich", 3, "nodes=2", 0, None),
          ("openmpi", 3, "nodes=2", 0, "asan")]


@pytest.mark.parametrize("flavour,np,topo,progress,build", [
    flavour_param(f, n, t, p, b or "release", build=ASAN if b else BUILD, full=True) for f, n, t, p, b in PIECES])
def test_nbc_pieces_overlap(request, flavour, np, topo, progress, build):
    """Hierarchical calls in many pieces (MCOLL_INTER_PIECE=4 KiB): the node leader's
    inter-node steps run on a companion fiber nested in the task's fiber (hier.c),
    driven by the task's waits; bcast, allreduce, reduce, scan, exscan."""
    tree = ASAN if build == "asan" else BUILD
    program = tree.bin(flavour, PROGRAM)
    args = ["--colls", "bcast,allreduce,reduce,scan,exscan", "--large", "30", "--iters", "2",
            "--seed", seed_for(request)]
    env = {**nbc_env(topo, progress), "MCOLL_INTER_PIECE": "4096", "MCOLL_FALLBACK": "error"}
    if build == "asan":
        env.update(asan_env())
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_summary(result, flavour)
    assert "runtime error" not in result.stderr and "AddressSanitizer" not in result.stderr, result.describe()


SIDE_BY_SIDE = [("openmpi", 4, "nodes=4", 0, None), ("mpich", 3, "nodes=3", 1, None),
                ("openmpi", 3, "nodes=2", 1, None), ("mpich", 5, "nodes=3", 0, None),
                ("openmpi", 4, "nodes=4", 1, "asan"), ("mpich", 4, "nodes=4", 0, "window1"),
                ("openmpi", 4, "nodes=2", 1, "leaders"), ("mpich", 6, "nodes=3", 0, "leaders"),
                ("openmpi", 4, "flat", 0, "node"), ("mpich", 3, "flat", 1, "node"),
                ("mpich", 5, "flat", 1, "node"), ("openmpi", 8, "flat", 0, "node"),
                ("openmpi", 4, "flat", 1, "asan"), ("openmpi", 3, "flat", 0, "window1")]
DEFAULT_SIDE_BY_SIDE = {("openmpi", 4, "nodes=4", 0, None), ("mpich", 3, "flat", 1, "node")}
# The collectives whose small calls let later ones run beside them inside the node
# (coll/beside.h), at sizes that take their one-generation paths.
NODE_BESIDE = ["--colls", "bcast,gather,gatherv,scatter,scatterv,allgather,alltoall,alltoallv,"
               "allreduce,reduce,reduce_scatter_block,scan,exscan", "--max-bytes", "1K"]


@pytest.mark.parametrize("flavour,np,topo,progress,variant", [
    flavour_param(f, n, t, p, v or "release", build=ASAN if v == "asan" else BUILD,
                  full=(f, n, t, p, v) not in DEFAULT_SIDE_BY_SIDE)
    for f, n, t, p, v in SIDE_BY_SIDE])
def test_nbc_side_by_side(request, flavour, np, topo, progress, variant):
    """Several calls of one communicator in flight at once (task/task.h): a rank alone
    on its (fake) node runs a hierarchical call beside the earlier ones of its
    communicator once they are independent, with per-call tags between nodes; ranks
    that share a node (nodes=2 at 3 ranks, nodes=3 at 5) keep theirs in order in the
    same job, except a node leader whose call has only inter-node steps left
    ("leaders": reduce and gather, whose last node step is the fold up). On one node
    ("node"), a small call lets the later ones run once it has posted what it writes
    (bcast's source, gather's members, scatter's source, reduce's non-roots), or while
    it still reads (bcast's readers, allgather, alltoall(v), the flat reductions):
    coll/beside.h. Results checked as everywhere; rank 0's report must show calls
    side by side where it is alone on its node, leads it in reduce/gather, or runs
    the small node calls, and none with MCOLL_TASK_WINDOW=1."""
    tree = ASAN if variant == "asan" else BUILD
    program = tree.bin(flavour, PROGRAM)
    # MPICH from 5 ranks on 2 cores spins through each reference message (nbc_args):
    # half the groups there (each still several calls in flight at once)
    groups = "12" if flavour == "mpich" and np >= 5 else "24"
    args = ["--groups", groups, "--disorder", "2", "--max-outstanding", "12", "--max-bytes", "256K",
            "--seed", seed_for(request)]
    env = {**nbc_env(topo, progress), "MCOLL_VERBOSE": "1"}
    if variant == "window1":
        env["MCOLL_TASK_WINDOW"] = "1"
    if variant == "leaders":
        args += ["--colls", "reduce,gather,gatherv,allreduce,bcast"]
    if variant == "node":
        args += NODE_BESIDE
    if variant == "asan":
        env.update(asan_env())
    must_overlap = variant != "window1" and (topo == f"nodes={np}" or variant in ("leaders", "node"))
    # Whether a call finds an earlier one still in flight depends on timing: under a
    # heavy load a whole job can see none, so one that sees none runs again (twice).
    for attempt in range(3):
        result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
        check_summary(result, flavour)
        assert "runtime error" not in result.stderr and "AddressSanitizer" not in result.stderr, result.describe()
        beside = re.search(r"side by side=(\d+)", result.stderr)
        assert beside, result.describe()
        if not must_overlap or int(beside.group(1)) > 0:
            break
    if variant == "window1":
        assert int(beside.group(1)) == 0, result.describe()
    elif must_overlap:
        assert int(beside.group(1)) > 0, f"no call side by side in {attempt + 1} jobs\n" + result.describe()


REDUCTIONS = ["allreduce", "reduce", "reduce_scatter", "reduce_scatter_block", "scan", "exscan"]
ENGINES = [("mpich", 2, "hsra", 0), ("openmpi", 4, "hsra", 1), ("mpich", 4, "cma", 1),
           ("openmpi", 3, "cma", 0)]


@pytest.mark.parametrize("flavour,np,alg,progress", [flavour_param(f, n, a, p, full=n > 3) for f, n, a, p in ENGINES])
def test_nbc_engines_across_communicators(request, flavour, np, alg, progress):
    """Reductions of two communicators in flight at once, every one through a
    multi-generation node engine (HSRA, CMA) that keeps scratch across its waits: a
    task that waits there yields, and the other communicator's task runs the same
    engine on the same thread. Scratch per thread instead of per fiber gave wrong
    scan/exscan/user-op results and aliased MPI_Reduce_local buffers."""
    program = BUILD.bin(flavour, PROGRAM)
    args = ["--colls", ",".join(REDUCTIONS), "--comms", "world,dup", "--groups", "16",
            "--disorder", "2", "--max-outstanding", "4", "--max-bytes", "256K",
            "--seed", seed_for(request)]
    env = {**nbc_env("flat", progress), **{f"MCOLL_ALG_{c.upper()}": alg for c in REDUCTIONS}}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_summary(result, flavour)


LATE_COMPLETION = [("mpich", 2, 1), ("mpich", 3, 1), ("openmpi", 2, 1)]


@pytest.mark.parametrize("flavour,np,progress", [flavour_param(f, n, p, full=n > 2) for f, n, p in LATE_COMPLETION])
def test_nbc_late_completion(request, flavour, np, progress):
    """The progress thread completes a call while the application is in MPI_Wait*
    or MPI_Start: MCOLL_TEST_FINISH_DELAY_US widens the window between a task's end
    and its request's completion. A thread that saw no task pending while a
    persistent start's carrier was not yet started handed the host an inactive
    request: MPI_Waitany/Waitsome returned MPI_UNDEFINED without reporting it, or
    MPI_Start found it pending (MPICH failed 5 of 6 runs at 2 and 3 ranks before the
    fix). Open MPI 4.1 has no persistent collectives: there the MPI_I* requests
    complete late."""
    program = BUILD.bin(flavour, PROGRAM)
    args = ["--groups", "8", "--disorder", "2", "--max-outstanding", "12", "--max-bytes", "1K",
            "--starts", "4", "--seed", seed_for(request)]
    env = {**nbc_env("flat", progress), "MCOLL_TEST_FINISH_DELAY_US": "200"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_summary(result, flavour)



MEET_COLLS = ["barrier", "bcast", "reduce", "allreduce", "allgather", "allgatherv", "gather",
              "gatherv", "scatter", "scatterv", "alltoall", "alltoallv", "reduce_scatter",
              "reduce_scatter_block", "scan", "exscan"]


def meet_totals(result):
    totals = re.search(r"non-blocking calls=(\d+) finished at start=(\d+) \(no task: (\d+)\)",
                       result.stderr)
    assert totals, result.describe()
    return int(totals.group(1)), int(totals.group(3))


def callers_stack(result, coll):
    line = re.search(rf"^mcoll: {coll} calls=\d+ .*$", result.stderr, re.M)
    assert line, f"no report line for {coll}\n{result.describe()}"
    tried = re.search(r"on_callers_stack=(\d+)", line.group(0))
    return int(tried.group(1)) if tried else 0


def algorithm_counts(result, coll):
    """The report's calls per algorithm of coll (not the tries or fallbacks)."""
    line = re.search(rf"^mcoll: {coll} calls=\d+ (.*)$", result.stderr, re.M)
    assert line, f"no report line for {coll}\n{result.describe()}"
    return {k: v for k, v in re.findall(r"(\w+)=(\d+)", line.group(1))
            if k not in ("on_callers_stack", "fallback")}


@pytest.mark.parametrize("flavour,np", [flavour_param(f, n, full=n > 3) for f in ["openmpi", "mpich"] for n in (2, 3, 4)])
def test_nbc_try_and_task_run_one_algorithm(flavour, np):
    """One rank's MPI_Ibcast / MPI_Ireduce tries on its stack while another's is a task
    (mcoll-test-try-choice forces it): both must run the same algorithm. The oracle:
    no size class there reaches a round of the adaptive choice, so every call must
    run the rules' choice, and the calls per algorithm must equal a run with the
    adaptive choice off (a try once read a class that no blocking call had begun as
    keeping algorithm 0). Also: communicators that share a context start their first
    non-blocking calls side by side (their agreements once raced: MPI_ERR_TRUNCATE)."""
    program = BUILD.bin(flavour, "mcoll-test-try-choice")
    counts = {}
    for adapt in ("1", "0"):
        # (the intercommunicator's bcast goes to the host MPI by design)
        env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_ADAPT": adapt, "MCOLL_FALLBACK": "silent"}
        result = run_job(mpiexec_argv(flavour, np, program), env, JOB_TIMEOUT)
        assert result.returncode == 0 and re.search(r"^ok$", result.stdout, re.M), result.describe()
        counts[adapt] = {coll: algorithm_counts(result, coll) for coll in ("bcast", "reduce")}
    assert counts["1"] == counts["0"], counts


@pytest.mark.parametrize("flavour,progress", [flavour_param(f, p) for f, p in [("openmpi", 0), ("mpich", 1)]])
def test_nbc_meet_every_collective_checked(flavour, progress):
    """On one node an MPI_I* call (or persistent start) that every rank enters at once
    runs on the caller's stack as the blocking call (MCOLL_NBC_MEET), with no task:
    mcoll-bench's nbc mode with its check of every block's results (-c), 2 ranks,
    8 B-4 KiB. Every collective must run calls so (on_callers_stack in the report),
    most calls must need no task, and every request completes within the timeout."""
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-m", "nbc", "-C", "all", "-b", "8", "-e", "4K", "-f", "8", "-r", "1", "-N", "50", "-c"]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_PROGRESS_THREAD": str(progress)}
    result = run_job(mpiexec_argv(flavour, 2, program, args), env, JOB_TIMEOUT)
    assert result.returncode == 0 and "mcoll-bench: done" in result.stdout + result.stderr, result.describe()
    calls, direct = meet_totals(result)
    assert direct > calls // 2, f"calls={calls}, with no task={direct}\n{result.describe()}"
    for coll in MEET_COLLS:
        assert callers_stack(result, coll) > 0, f"no {coll} ran on the caller's stack\n{result.describe()}"


MEET = [("openmpi", 2, 1), ("mpich", 2, 0), ("mpich", 3, 1), ("openmpi", 3, 0)]


@pytest.mark.parametrize("flavour,np,progress", [flavour_param(f, n, p, full=n > 2) for f, n, p in MEET])
def test_nbc_meet_mixed_with_tasks(request, flavour, np, progress):
    """test_nbc's scenarios on one node (flat), where calls met on the caller's stack
    and calls run as tasks mix on the same communicators (one at a time, several
    outstanding, disorder, persistent starts, requests freed while active): every
    result checked against the reference, every request complete within the
    timeout, and some calls ran with no task."""
    program = BUILD.bin(flavour, PROGRAM)
    args = nbc_args(flavour, np) + ["--iters", "4", "--seed", seed_for(request)]
    env = {**nbc_env("flat", progress), "MCOLL_VERBOSE": "1"}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_summary(result, flavour)
    calls, direct = meet_totals(result)
    assert 0 < direct < calls, f"calls={calls}, with no task={direct}\n{result.describe()}"


def test_nbc_meet_off_makes_tasks():
    """MCOLL_NBC_MEET=0: only the collectives with a try of their own (barrier, bcast,
    reduce, allreduce, scan, exscan, gather(v), scatter(v)) run calls on the caller's
    stack."""
    flavour = "mpich"
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-m", "nbc", "-C", "gather,scatter,alltoall,allgather,reduce_scatter", "-b", "8",
            "-e", "64", "-f", "8", "-r", "1", "-N", "50", "-c"]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_NBC_MEET": "0"}
    result = run_job(mpiexec_argv(flavour, 2, program, args), env, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    for coll in ["alltoall", "allgather", "reduce_scatter"]:
        assert callers_stack(result, coll) == 0, result.describe()
    for coll in ["gather", "scatter"]:
        assert callers_stack(result, coll) > 0, result.describe()


FIRST_COLLS = ["bcast", "reduce", "scatter", "scatterv", "gather", "gatherv"]
# (flavour, np, root, MCOLL_NBC_MEET: 64 the default, 0 leaves the calls a try does not take to tasks)
FIRST = [("openmpi", 2, "0", 64), ("mpich", 2, "1", 64), ("openmpi", 2, "1", 0), ("mpich", 2, "0", 0),
         ("openmpi", 1, "0", 64), ("mpich", 1, "0", 0), ("openmpi", 3, "1", 64), ("mpich", 3, "0", 0),
         ("mpich", 4, "3", 64), ("openmpi", 5, "2", 0), ("openmpi", 8, "7", 64), ("mpich", 8, "5", 0)]


@pytest.mark.parametrize("flavour,np,root,meet", [flavour_param(f, n, r, m, full=n != 2 or m == 0)
                                                   for f, n, r, m in FIRST])
def test_nbc_first_tries_without_meeting(request, flavour, np, root, meet):
    """Bcast, reduce and scatter(v) try before the meeting (pmpi/wrap.h:
    mcoll__direct_first_of), gather(v) after it (mcoll__direct_of): a bcast or
    scatter root or a reduce or gather sender that need not wait runs its call at
    once, a reader or a reduce or gather root once its data is in, whatever the
    others do. mcoll-bench's nbc mode with every
    block's results checked (-c), sizes 8 B-4 KiB, several roots, many calls in a
    row: most calls need no task at 2 ranks; then test_nbc's scenarios (late ranks,
    several outstanding, persistent starts; sizes from 0, odd counts, in place,
    derived datatypes) on these collectives alone, every result checked against the
    point-to-point reference. MCOLL_NBC_MEET=0: the calls no try takes go to tasks,
    beside the tries of the other ranks. At 3 ranks and more on 2 cores few calls
    find the others in time: there only the results and the completions count; at
    1 rank no call tries."""
    program = BUILD.bin(flavour, "mcoll-bench")
    # (3 ranks on 2 cores: fewer calls; MPICH's ranks spin there, 77 s with 100)
    colls = FIRST_COLLS if np <= 4 else ["bcast", "scatter", "gatherv"]
    args = ["-m", "nbc", "-C", ",".join(colls), "-b", "8", "-e", "4K", "-f", "8", "-r", "2",
            "-N", "100" if np <= 2 else "10" if np <= 4 else "3", "-c", "-R", root]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_NBC_MEET": str(meet)}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    assert result.returncode == 0 and "mcoll-bench: done" in result.stdout + result.stderr, result.describe()
    calls, direct = meet_totals(result)
    if np == 2:  # (3 ranks on 2 cores: one is off its core, and its peers make tasks)
        assert direct > calls // 2, f"calls={calls}, with no task={direct}\n{result.describe()}"
        for coll in FIRST_COLLS:
            assert callers_stack(result, coll) > 0, f"no {coll} ran on the caller's stack\n{result.describe()}"
    if np == 1:
        for coll in FIRST_COLLS:
            assert callers_stack(result, coll) == 0, result.describe()
    program = BUILD.bin(flavour, PROGRAM)
    args = nbc_args(flavour, np) + ["--colls", ",".join(FIRST_COLLS), "--iters", "6",
                                    "--seed", seed_for(request)]
    env = {**nbc_env("flat", 0), "MCOLL_VERBOSE": "1", "MCOLL_NBC_MEET": str(meet)}
    result = run_job(mpiexec_argv(flavour, np, program, args), env, JOB_TIMEOUT)
    check_summary(result, flavour)
    calls, direct = meet_totals(result)
    assert calls > 0 and (np != 2 or direct > 0), f"calls={calls}, with no task={direct}\n{result.describe()}"
