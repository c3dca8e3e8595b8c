"""T-NBC (src/tnbc): blocking alltoall/bcast/allgather/allreduce return
early with their receive buffers protected. tests/mpi/test_tnbc.c runs one hazard per
job and checks every received word against values each rank computes; here each case
runs on both MPIs with T-NBC on (and the report must show that buffers were really
protected, or really not, and that the interposed calls really waited), and as a
reference with T-NBC off and natively.

Only the release build: the sanitizer runtimes interpose free/realloc/read/... first,
so T-NBC's own interposition of them (the free and read hazards) is not reached."""

import re

import pytest

import mpijob
from mpijob import mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
JOB_TIMEOUT = 120
# (3 ranks on a 2-core machine: T-NBC would stand down without MCOLL_TNBC_CORES_SHARED)
ON = {"MCOLL_TNBC": "1", "MCOLL_PROGRESS_THREAD": "1", "MCOLL_VERBOSE": "1",
      "MCOLL_FALLBACK": "error", "MCOLL_TNBC_CORES_SHARED": "1"}

# case: (buffers protected on rank 0, interposed calls waited on rank 0)
CASES = {
    "touch": (True, None),
    "late": (True, None),
    "free": (True, True),
    "realloc": (True, True),
    "munmap": (True, True),
    "next": (True, None),
    "read": (True, True),
    "thread": (True, None),
    "stack": (False, None),
    "shared": (False, None),
    "handler": (True, None),
    "fork": (True, True),
    "exit": (True, None),
    "noncontig": (False, None),
    "colls": (True, None),
    "alltoallv": (True, None),
    "allgatherv": (True, None),
    "sigblock": (True, None),
    "syscalls": (True, None),
    "mprotect": (True, None),
    "compute": (True, None),
}


def flavour_marks(flavour):
    if flavour in BUILD.flavours:
        return []
    return [pytest.mark.skip(reason=f"build/{flavour}/lib/libmcoll.so not built")]


# The default tier's hazards (2 ranks, both MPIs); every case at 2 and 3 ranks in the
# full tier, each once with one MPI, the MPIs alternating so that each meets every case
# and rank count (mpijob.covering_flavours).
DEFAULT_CASES = ("touch", "free", "read", "thread", "colls", "alltoallv")


def params(nps=(2, 3)):
    default = [(np, case) for np in nps for case in CASES if np == 2 and case in DEFAULT_CASES]
    runs = mpijob.covering_flavours([(np, case) for np in nps for case in CASES], both=default)
    return [pytest.param(f, np, case, id=f"{f}-{np}-{case}",
                         marks=flavour_marks(f) + ([] if (np, case) in default else [mpijob.FULL]))
            for f, np, case in runs]


def passed(result, case):
    if result.returncode != 0 or f"test_tnbc: passed ({case})" not in result.stdout:
        pytest.fail(f"test_tnbc {case} failed\n{result.describe()}")


def tnbc_counts(stderr):
    m = re.search(r"^mcoll: tnbc active=(\d) calls=(\d+) protected=(\d+) faults=(\d+) waits=(\d+) "
                  r"host=(\d+)$", stderr, re.M)
    assert m, f"no T-NBC line in the report:\n{stderr[-3000:]}"
    return dict(zip(("active", "calls", "protected", "faults", "waits", "host"), map(int, m.groups())))


@pytest.mark.parametrize("flavour,np,case", params())
def test_tnbc_hazard(flavour, np, case):
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    result = run_job(mpiexec_argv(flavour, np, program, [case]), ON, JOB_TIMEOUT)
    passed(result, case)
    counts = tnbc_counts(result.stderr)
    protected, waited = CASES[case]
    assert counts["active"] == 1 and counts["calls"] > 0, counts
    if protected:
        assert counts["protected"] > 0, counts
    else:
        assert counts["protected"] == 0, counts
    if waited:
        assert counts["waits"] > 0, counts


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
@pytest.mark.parametrize("case", ["colls", "compute"])
def test_tnbc_sends_on_caller(flavour, case):
    """MCOLL_TNBC_SENDS_LATER=0: the alltoall's sends posted on the caller's thread
    before it returns (by default the progress thread posts them)."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    result = run_job(mpiexec_argv(flavour, 3, program, [case]), {**ON, "MCOLL_TNBC_SENDS_LATER": "0"},
                     JOB_TIMEOUT)
    passed(result, case)
    assert tnbc_counts(result.stderr)["calls"] > 0


STOOD_DOWN = re.compile(r"^mcoll: tnbc stood down: (\d+) ranks run on a machine of (\d+) cores "
                        r"\(MCOLL_TNBC_CORES_SHARED=1 runs it anyway\)$", re.M)


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_stands_down_where_cores_are_shared(flavour):
    """More ranks on a machine than it has cores (MCOLL_CORES=1 stands for a small
    machine): T-NBC stands down in the whole job, the report says why and how to force
    it; MCOLL_TNBC_CORES_SHARED=1 runs it there; at as many ranks as cores it runs."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    argv = mpiexec_argv(flavour, 2, program, ["colls"])
    default = {k: v for k, v in ON.items() if k != "MCOLL_TNBC_CORES_SHARED"}
    result = run_job(argv, {**default, "MCOLL_CORES": "1"}, JOB_TIMEOUT)
    passed(result, "colls")
    assert STOOD_DOWN.search(result.stderr).groups() == ("2", "1"), result.describe()
    assert "T-NBC is off: 2 ranks run on a machine of 1 cores" in result.stderr, result.describe()
    counts = tnbc_counts(result.stderr)
    assert counts["active"] == 0 and counts["calls"] == 0, counts
    for env in ({**default, "MCOLL_CORES": "1", "MCOLL_TNBC_CORES_SHARED": "1"},
                {**default, "MCOLL_CORES": "2"}):
        result = run_job(argv, env, JOB_TIMEOUT)
        passed(result, "colls")
        assert not STOOD_DOWN.search(result.stderr), result.describe()
        counts = tnbc_counts(result.stderr)
        assert counts["active"] == 1 and counts["protected"] > 0, (env, counts)


@pytest.mark.full
@pytest.mark.parametrize("flavour,np,case", params(nps=(2,)))
def test_tnbc_reference(flavour, np, case):
    """The same checks with T-NBC off and natively (the program is the reference)."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    passed(run_job(mpiexec_argv(flavour, np, program, [case]), {"MCOLL_TNBC": "0"}, JOB_TIMEOUT), case)
    passed(run_job(mpiexec_argv(flavour, np, program, [case], mcoll=False), {}, JOB_TIMEOUT), case)


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_needs_progress_thread(flavour):
    """Without a progress thread T-NBC stays off and MCOLL_VERBOSE says why."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    env = dict(ON, MCOLL_PROGRESS_THREAD="0")
    result = run_job(mpiexec_argv(flavour, 2, program, ["touch"]), env, JOB_TIMEOUT)
    passed(result, "touch")
    assert "T-NBC is off: no progress thread" in result.stderr, result.describe()
    assert tnbc_counts(result.stderr)["calls"] == 0


@pytest.mark.full
@pytest.mark.serial  # compares the calls' times
@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_bench_mode(flavour, tmp_path):
    """mcoll-bench -m tnbc: every side and scenario of both collectives in the JSON,
    with positive times, the overlap derived from them, the work alone timed in every
    round (its median is the work), and the model only on the T-NBC side."""
    import json
    out = tmp_path / "tnbc.json"
    program = BUILD.bin(flavour, "mcoll-bench")
    argv = mpiexec_argv(flavour, 2, program, ["-m", "tnbc", "-C", "alltoall,bcast", "-b", "128K",
                                              "-e", "128K", "-r", "3", "-o", out])
    result = run_job(argv, {"MCOLL_TNBC": "1", "MCOLL_PROGRESS_THREAD": "1", "MCOLL_TNBC_CORES_SHARED": "1"},
                     JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    doc = json.loads(out.read_text())
    assert doc["mode"] == "tnbc" and doc["tnbc_available"] is True and doc["nprocs"] == 2
    seen = {(r["coll"], r["scenario"], r["side"]) for r in doc["rows"]}
    assert seen == {(c, s, side) for c in ("alltoall", "bcast")
                    for s in ("call", "curc", "crc", "curc+crc")
                    for side in ("host", "tnbc_off", "tnbc_on")}
    for r in doc["rows"]:
        assert r["total_s"] > 0 and len(r["samples_s"]) == 3, r
        if r["scenario"] != "call":
            assert r["overlap_s"] == pytest.approx(r["tcomm_s"] + r["work_s"] - r["total_s"], abs=1e-6)
            work = sorted(r["work_samples_s"])
            assert len(work) == 3 and work[0] > 0 and r["work_s"] == pytest.approx(work[1], rel=1e-4), r
        else:
            assert r["work_samples_s"] == [], r
    # the call alone stops at its return, the work's rows when the data is in: its
    # fastest round beats their slowest (medians of 3 rounds swap on a busy host)
    samples = {(r["coll"], r["scenario"], r["side"]): r["samples_s"] for r in doc["rows"]}
    for c in ("alltoall", "bcast"):
        assert min(samples[(c, "call", "tnbc_on")]) < max(samples[(c, "curc", "tnbc_on")]), samples
        assert (r["model_s"] != 0) == (r["side"] == "tnbc_on" and r["scenario"] != "call"), r


@pytest.mark.full
@pytest.mark.parametrize("flavour,app,args", [
    pytest.param(f, app, args, marks=flavour_marks(f), id=f"{f}-{app}")
    for f in mpijob.FLAVOURS for app, args in (("ft-like", ["32", "2"]), ("is-like", ["16", "2"]))])
def test_tnbc_miniapps(flavour, app, args):
    """apps/ft_like.c and apps/is_like.c verify their own results, with T-NBC on
    (where their alltoall(v) are protected) and natively."""
    program = BUILD.bin(flavour, f"mcoll-app-{app}")
    on = run_job(mpiexec_argv(flavour, 2, program, args), ON, JOB_TIMEOUT)
    assert on.returncode == 0 and " verified" in on.stdout, on.describe()
    assert tnbc_counts(on.stderr)["protected"] > 0, on.stderr[-2000:]
    native = run_job(mpiexec_argv(flavour, 2, program, args, mcoll=False), {}, JOB_TIMEOUT)
    assert native.returncode == 0 and " verified" in native.stdout, native.describe()


@pytest.mark.full
@pytest.mark.parametrize("flavour,np", [pytest.param(f, np, marks=flavour_marks(f), id=f"{f}-{np}")
                                        for f in mpijob.FLAVOURS for np in (2, 3)])
def test_tnbc_openmp(flavour, np, tmp_path):
    """OpenMP threads (test_tnbc.c built with -fopenmp) read a received buffer that is
    still protected: every word checked, the checksum that of T-NBC off. Whether a
    thread gets there before the data depends on timing; under MCOLL_TNBC_TRACE the
    pages stay protected after the data is in, so every thread faults, and the
    handlers of the threads record every block exactly once."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    argv = mpiexec_argv(flavour, np, program, ["openmp", "--block", str(4 << 20)])
    omp = {"OMP_NUM_THREADS": "4"}

    def checksum(env):
        result = run_job(argv, dict(omp, **env), JOB_TIMEOUT)
        passed(result, "openmp")
        m = re.search(r"openmp threads (\d+) checksum ([0-9a-f]+)", result.stdout)
        assert m and int(m.group(1)) >= 2, result.describe()
        return m.group(2), result

    reference, _ = checksum({"MCOLL_TNBC": "0"})
    on, result = checksum(ON)
    assert on == reference
    counts = tnbc_counts(result.stderr)
    assert counts["protected"] == 3, counts
    trace = tmp_path / "trace"
    traced, result = checksum(dict(ON, MCOLL_TNBC_TRACE=str(trace)))
    assert traced == reference
    assert tnbc_counts(result.stderr)["faults"] >= 2 * np, result.stderr[-2000:]
    for r in range(np):
        line = [ln for ln in (tmp_path / f"trace.{r}").read_text().splitlines()
                if ln.startswith("site=") and " coll=alltoall " in ln]
        assert len(line) == 1, line
        touched = re.search(r"touched=(\S*)", line[0]).group(1)
        assert sorted(map(int, touched.split(","))) == list(range(np)), line



@pytest.mark.parametrize("flavour,case", [pytest.param(f, c, marks=flavour_marks(f), id=f"{f}-{c}")
                                          for f in mpijob.FLAVOURS
                                          for c in ("sigblock", "syscalls", "mprotect")])
def test_tnbc_hazard_traced(flavour, case, tmp_path):
    """The hazards whose data usually arrives before the program looks, under
    MCOLL_TNBC_TRACE (the pages stay protected after the data is in, so every look
    meets a protected page): a thread that blocks every signal reads the buffer;
    MPI_File_write_at, pwrite, sendmsg, open of a received path and pipe with its fd
    array in the buffer; the application's own mprotect(PROT_READ) holds."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    env = dict(ON, MCOLL_TNBC_TRACE=str(tmp_path / "trace"))
    result = run_job(mpiexec_argv(flavour, 2, program, [case]), env, JOB_TIMEOUT)
    passed(result, case)
    assert tnbc_counts(result.stderr)["protected"] > 0, result.stderr[-2000:]


def run_threads(flavour, threads, iters):
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    argv = mpiexec_argv(flavour, 2, program, ["threads", "--threads", threads, "--iters", iters])
    result = run_job(argv, ON, JOB_TIMEOUT)
    passed(result, "threads")
    counts = tnbc_counts(result.stderr)
    assert counts["protected"] > 0, counts


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_threads(flavour):
    """Six application threads (MPI_THREAD_MULTIPLE), each on its own duplicate of
    MPI_COMM_WORLD, blocking alltoalls and allreduces: a call settles only its own
    thread's pending calls (settling another thread's call, which needs the peer's
    call from the thread matching this one, deadlocked)."""
    run_threads(flavour, 6, 8)


@pytest.mark.full
@pytest.mark.parametrize("flavour,threads,run", [
    pytest.param(f, t, r, marks=flavour_marks(f), id=f"{f}-{t}-{r}")
    for f in mpijob.FLAVOURS for t in (2, 6) for r in range(5)])
def test_tnbc_threads_repeated(flavour, threads, run):
    """The same, repeated (two threads deadlocked in about half the runs)."""
    run_threads(flavour, threads, 20 if threads == 2 else 8)


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_early_return_split(flavour):
    """MCOLL_VERBOSE splits an early-returning alltoall's time before it returns into
    the edge exchange and the rest (where the early return goes, per call)."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    result = run_job(mpiexec_argv(flavour, 2, program, ["touch"]), ON, JOB_TIMEOUT)
    passed(result, "touch")
    m = re.search(r"^mcoll: tnbc alltoall early return: (\d+) calls, per call edge exchange="
                  r"([0-9.]+) ms protect\+post=([0-9.]+) ms$", result.stderr, re.M)
    assert m, result.describe()
    assert int(m.group(1)) > 0
    assert int(m.group(1)) <= tnbc_counts(result.stderr)["calls"]


TIMELINE = ("exchanged", "begun", "protected", "started", "returned", "sends_posted", "first_in",
            "all_in", "sends_done", "task_end", "settle", "settled")


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_timeline(flavour):
    """MCOLL_VERBOSE's timeline of the early-returning alltoalls (ms after entry, mean
    over the settled calls): the caller's steps in order up to its return, the task's
    sends and blocks after them, the settle last; and the caller's time off the CPU."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    result = run_job(mpiexec_argv(flavour, 2, program, ["compute"]), ON, JOB_TIMEOUT)
    passed(result, "compute")
    m = re.search(r"^mcoll: tnbc timeline, ms after entry \(mean of (\d+) calls\):(.*)$", result.stderr, re.M)
    assert m and int(m.group(1)) > 0, result.describe()
    at = {k: float(v) for k, v in re.findall(r" (\w+)=([0-9.]+)", m.group(2))}
    assert set(TIMELINE) <= set(at), at
    caller = [at[k] for k in ("exchanged", "begun", "protected", "started", "returned")]
    assert caller == sorted(caller), at
    assert at["first_in"] <= at["all_in"] <= at["task_end"] <= at["settled"], at
    assert at["returned"] <= at["settle"] <= at["settled"], at
    assert re.search(r"^mcoll: tnbc caller off-cpu between return and settle [0-9.]+ ms/call, "
                     r"fault waits [0-9.]+ ms/call$", result.stderr, re.M), result.describe()


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
@pytest.mark.parametrize("variant", [
    {"MCOLL_TNBC_CHUNK": "12293"},                                  # chunks, the last one short
    {"MCOLL_TNBC_CHUNK": "0", "MCOLL_TNBC_SENDS_LATER": "2"},       # one message a block, receives posted by the thread
    {"MCOLL_TNBC_RETURN_FIRST": "0"},
    {"MCOLL_TNBC_SENDS_FIRST": "200000"},                           # 4 chunks a destination early
    {"MCOLL_TNBC_SENDS_FIRST": "0", "MCOLL_TNBC_SENDS_LATER": "0"},  # every send in the task
], ids=["chunk", "whole-recvs-later", "no-return-first", "sends-first", "sends-in-task"])
@pytest.mark.parametrize("case", ["compute", "alltoallv", "touch"])
def test_tnbc_schedule_variants(flavour, variant, case):
    """The alltoall(v) schedule's variants: blocks as several messages
    (MCOLL_TNBC_CHUNK; a block is published when its last chunk is in), receives
    posted by the progress thread (MCOLL_TNBC_SENDS_LATER=2), the progress thread
    running before the caller has returned (MCOLL_TNBC_RETURN_FIRST=0), the first
    chunks of every send posted by the caller before it protects (SENDS_FIRST, the
    rest by the task) or none; every word checked, the buffers really protected."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    result = run_job(mpiexec_argv(flavour, 3, program, [case]), {**ON, **variant}, JOB_TIMEOUT)
    passed(result, case)
    assert tnbc_counts(result.stderr)["protected"] > 0, result.describe()


def subs_per_call(stderr):
    m = re.search(r"^mcoll: tnbc sub-messages per protected call=([0-9.]+)$", stderr, re.M)
    assert m, f"no sub-message line in the report:\n{stderr[-3000:]}"
    return float(m.group(1))


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
@pytest.mark.parametrize("case,publish", [("touch", "1"), ("alltoallv", "1"), ("alltoallv", "0")],
                         ids=["touch-chunks", "alltoallv-chunks", "alltoallv-blocks"])
def test_tnbc_chunk_publication(flavour, case, publish):
    """MCOLL_TNBC_PUBLISH_CHUNKS: each chunk of an alltoall(v) block is a sub-message
    of its own, written and made readable as it arrives. Chunks of 3000 bytes: their
    ends fall inside pages (a page shared by two chunks stays protected until both are
    in), and the init exchange's 4 KiB edges of each block span two chunks (touch
    overwrites its send buffer right after the return: the edges must win). Every word
    checked at 3 ranks; many sub-messages per call with chunks, one per block without."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    env = {**ON, "MCOLL_TNBC_CHUNK": "3000", "MCOLL_TNBC_PUBLISH_CHUNKS": publish}
    result = run_job(mpiexec_argv(flavour, 3, program, [case]), env, JOB_TIMEOUT)
    passed(result, case)
    assert tnbc_counts(result.stderr)["protected"] > 0, result.describe()
    subs = subs_per_call(result.stderr)
    if publish == "1":
        assert subs > 20, result.stderr[-2000:]
    else:
        assert subs <= 3, result.stderr[-2000:]


@pytest.mark.parametrize("flavour", [pytest.param(f, marks=flavour_marks(f)) for f in mpijob.FLAVOURS])
def test_tnbc_adapt_decides_once(flavour):
    """MCOLL_TNBC_ADAPT=N: the first 2N eligible alltoalls alternate T-NBC and the
    blocking call (N of each go T-NBC), then one agreement decides for the rest of the
    run: every later call goes the decided way, so the T-NBC calls number N (blocking
    chosen) or all but N (T-NBC chosen); the miniapp's results stay right either way.
    Without the parameter every call goes T-NBC (the baseline the switch changes)."""
    program = BUILD.bin(flavour, "mcoll-app-ft-like")
    iters, n = 12, 3
    result = run_job(mpiexec_argv(flavour, 2, program, ["32", str(iters)]),
                     {**ON, "MCOLL_TNBC_ADAPT": str(n)}, JOB_TIMEOUT)
    assert result.returncode == 0 and " verified" in result.stdout, result.describe()
    m = re.search(r"^mcoll: tnbc adapt alltoall (\d+) bytes: period with ([0-9.]+) ms, without "
                  r"([0-9.]+) ms \(this rank\) -> (T-NBC|blocking)$", result.stderr, re.M)
    assert m, result.describe()
    assert float(m.group(2)) > 0 and float(m.group(3)) > 0, m.group(0)
    calls = tnbc_counts(result.stderr)["calls"]
    assert calls == (iters - n if m.group(4) == "T-NBC" else n), (calls, m.group(0))
    plain = run_job(mpiexec_argv(flavour, 2, program, ["32", str(iters)]), ON, JOB_TIMEOUT)
    assert plain.returncode == 0 and " verified" in plain.stdout, plain.describe()
    assert tnbc_counts(plain.stderr)["calls"] == iters, plain.stderr[-2000:]
    assert "tnbc adapt" not in plain.stderr
