"""Running MPI jobs for the tests: a hard timeout on every job, no process left
behind, and no mcoll shared-memory file left behind."""

import dataclasses
import os
import re
import signal
import subprocess
import threading
import time
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MCOLLRUN = ROOT / "bin" / "mcollrun"
SHM = Path("/dev/shm")
FLAVOURS = ("openmpi", "mpich")


@dataclasses.dataclass
class Build:
    """One build directory (build/ or build-asan/) and the MPI flavours built in it."""

    name: str
    path: Path
    flavours: tuple

    def bin(self, flavour, program):
        return self.path / flavour / "bin" / program


def find_build(name):
    path = ROOT / name
    flavours = tuple(f for f in FLAVOURS if (path / f / "lib" / "libmcoll.so").exists())
    return Build(name, path, flavours)


BUILD = find_build("build")
ASAN = find_build("build-asan")
TSAN = find_build("build-tsan")
# An unintended fallback to the host MPI aborts the job.
BASE_ENV = {"MCOLL_FALLBACK": "error"}
# Tests of the rules' choice, which count the calls per algorithm: without the choice
# that adapts at run time (src/coll/adapt.c), which would time other algorithms.
RULES_ONLY = {"MCOLL_ADAPT": "0"}
# The full tier (tests/run.sh --full): sanitizer builds, test hosts, every rank count,
# topology and forced algorithm. Unmarked tests form the default tier.
FULL = pytest.mark.full


def flavour_param(flavour, *values, build=BUILD, skip=None, full=False, id=None):
    """A test parameter set whose first value is an MPI flavour: skipped when that
    flavour is not built in build (or with skip), in the full tier when full or when
    build is a sanitizer build."""
    full = full or build is not BUILD
    if flavour not in build.flavours:
        skip = f"{build.name}/{flavour}/lib/libmcoll.so not built"
    marks = [pytest.mark.skip(reason=skip)] if skip else []
    if full:
        marks.append(FULL)
    return pytest.param(flavour, *values, marks=marks,
                        id=id or "-".join(map(str, (flavour, *values))))


def flavour_params(*rest_lists, build=BUILD, full=False):
    """flavour_param for each flavour crossed with each tuple of further values."""
    return [flavour_param(f, *rest, build=build, full=full) for f in FLAVOURS for rest in rest_lists]


def covering_flavours(tuples, both=()):
    """[(flavour, *values)] for the full tier's wide matrices: each tuple of values
    once, with one flavour, instead of with every flavour. The flavour is chosen
    greedily so that each flavour still meets every value of every parameter (each
    (flavour, position, value) pair, pairwise coverage): the MPI matters for the host's
    part of a path, the values for mcoll's. Tuples in both (those that also run in the
    default tier, or compare with a native run) keep every flavour."""
    both = set(map(tuple, both))
    tuples = [tuple(t) for t in tuples]
    seen = {(f, i, v) for t in both for f in FLAVOURS for i, v in enumerate(t)}
    # tuples still to come that hold each value: a pair that no later tuple can give
    # weighs 1, one that many can give little
    left = {}
    for t in tuples:
        if t not in both:
            for iv in enumerate(t):
                left[iv] = left.get(iv, 0) + 1
    runs = {f: 0 for f in FLAVOURS}
    out = []
    for t in tuples:
        if t in both:
            out += [(f, *t) for f in FLAVOURS]
            continue
        new = {f: sum(1 / left[i, v] for i, v in enumerate(t) if (f, i, v) not in seen) for f in FLAVOURS}
        for iv in enumerate(t):
            left[iv] -= 1
        f = max(FLAVOURS, key=lambda f: (new[f], -runs[f]))
        seen.update((f, i, v) for i, v in enumerate(t))
        runs[f] += 1
        out.append((f, *t))
    # in the order of the flavours, then of the tuples (as the full products were)
    return sorted(out, key=lambda ft: FLAVOURS.index(ft[0]))


def seed_for(request):
    """The test's seed: MCOLL_TEST_SEED, or one derived from the test's name."""
    return int(os.environ.get("MCOLL_TEST_SEED") or zlib.crc32(request.node.name.encode()))


def topo_env(topo):
    """MCOLL_TOPO for a fake hierarchy ("nodes=2,sockets=2"); none for "flat"/None."""
    return {"MCOLL_TOPO": topo} if topo and topo != "flat" else {}


@dataclasses.dataclass
class Result:
    argv: list
    env: dict
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self):
        env = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))
        return (f"command: {env} {' '.join(map(str, self.argv))}\n"
                f"exit code {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout (last 3000 chars)\n{self.stdout[-3000:]}\n"
                f"--- stderr (last 6000 chars)\n{self.stderr[-6000:]}")


def mcoll_shm_files():
    return {p.name for p in SHM.glob("mcoll-*")}


def _creator_pid(name):
    """mcoll names its files mcoll-<creator pid>-..."""
    m = re.match(r"mcoll-(\d+)-", name)
    return int(m.group(1)) if m else None


class _PidSampler(threading.Thread):
    """Records every pid seen in the job's session while it runs, so that files left
    by this job can be told from those of jobs running beside it."""

    def __init__(self, sid):
        super().__init__(daemon=True)
        self.sid, self.pids, self.done = sid, {sid}, threading.Event()

    def run(self):
        while not self.done.wait(0.05):
            self.pids.update(_session_processes(self.sid))


def _session_processes(sid):
    """Live pids whose session is sid: the launcher's descendants, even those that
    moved to another process group (zombies waiting to be reaped do not count)."""
    pids = []
    # listdir, not Path.glob: glob stats each match, and a process that exits between
    # the listing and the stat raised ProcessLookupError out of the sampler thread
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # after "(comm)": state ppid pgrp session
            pids.append(int(name))
    return pids


def _wait_session_empty(sid, grace):
    """The job's processes still alive after grace seconds."""
    deadline = time.monotonic() + grace
    while True:
        pids = _session_processes(sid)
        if not pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.1)


def _kill_session(sid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _session_processes(sid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(1.0)


def mpiexec_argv(flavour, np, program, args=(), *, mcoll=True):
    """Under mcoll: bin/mcollrun; natively: the flavour's own mpiexec."""
    if mcoll:
        return [str(MCOLLRUN), "--mpi", flavour, "-np", str(np), str(program), *map(str, args)]
    launcher = [f"mpiexec.{flavour}", "-np", str(np)]
    if flavour == "openmpi":
        launcher[1:1] = ["--oversubscribe"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])
    return [*launcher, str(program), *map(str, args)]


def run_job(argv, env=None, timeout=300, expect_timeout=False):
    """Runs one job in its own session under a hard timeout; kills the whole session
    on timeout (and fails the test unless expect_timeout). Afterwards, fails if a
    process of the job or an mcoll-* file it created is left; both are removed.
    A file counts as the job's when its creator pid was one of the job's processes
    (other jobs may be running on the machine at the same time)."""
    extra = dict(env or {})
    # (the test-host set's name and subnet pass: scripts/testhosts.sh run needs them)
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("MCOLL_") or k.startswith("MCOLL_TESTHOSTS_")}
    full_env.update(extra)
    before = mcoll_shm_files()
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", start_new_session=True)
    sampler = _PidSampler(proc.pid)
    sampler.start()
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_session(proc.pid)
        stdout, stderr = proc.communicate()
    result = Result(argv, extra, proc.returncode, stdout, stderr, time.monotonic() - start)

    stragglers = _wait_session_empty(proc.pid, grace=5.0)
    if stragglers:
        _kill_session(proc.pid)
    sampler.done.set()
    sampler.join()
    leaked = sorted(f for f in mcoll_shm_files() - before if _creator_pid(f) in sampler.pids | {None})
    for name in leaked:
        try:
            (SHM / name).unlink()
        except FileNotFoundError:
            pass

    if timed_out and not expect_timeout:
        pytest.fail(f"job did not finish within {timeout} s (killed)\n{result.describe()}")
    if stragglers:
        pytest.fail(f"processes of the job still running after it ended: {stragglers}\n{result.describe()}")
    if leaked:
        pytest.fail(f"shared-memory files left in /dev/shm: {leaked}\n{result.describe()}")
    return result


def syscall_count(flavour, tmp_path, syscall, program, args, env, timeout):
    """Runs a 2-rank job with one strace per rank (a wrapper; its summary in
    per_rank.sh.<pid>); returns the job's result and both ranks' calls of syscall."""
    wrapper = tmp_path / "per_rank.sh"
    wrapper.write_text(f'#!/bin/sh\nexec strace -f -qq --seccomp-bpf -e trace={syscall} -c -o "$0.$$" "$@"\n')
    wrapper.chmod(0o755)
    result = run_job(mpiexec_argv(flavour, 2, wrapper, [program, *args]), env, timeout)
    assert result.returncode == 0, result.describe()
    total, files = 0, sorted(tmp_path.glob("per_rank.sh.*"))
    assert len(files) == 2, files
    row = re.compile(rf"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)(?:\s+\d+)?\s+{syscall}$", re.M)
    for f in files:
        m = row.search(f.read_text())
        total += int(m.group(1)) if m else 0
        f.unlink()
    return result, total


def client_env(prefix):
    """The environment of a client suite's script (tests/clients/): run_job drops
    MCOLL_* from it, so the script's own knobs (prefix...) and MCOLL_BUILD_DIR pass."""
    return {k: v for k, v in os.environ.items() if k.startswith(prefix) or k == "MCOLL_BUILD_DIR"}


def run_client(script, flavour, env, prepare_timeout, run_timeout):
    """A client suite's script for one flavour: --prepare (fetch and build; the test
    fails when that does), then the run, whose Result it returns."""
    prepared = run_job([str(script), "--prepare", flavour], env=env, timeout=prepare_timeout)
    if prepared.returncode != 0:
        pytest.fail(f"{script.name} --prepare {flavour} failed\n{prepared.describe()}")
    return run_job([str(script), flavour], env=env, timeout=run_timeout)


def check_passed(result, program="test_coll"):
    """The job exited 0 and the program reported zero errors."""
    summary = re.search(rf"^{program}: (\d+) checks, (\d+) errors$", result.stdout, re.M)
    if result.returncode != 0 or summary is None or summary.group(2) != "0":
        pytest.fail(f"{program} failed\n{result.describe()}")
    return int(summary.group(1))


def parse_verbose_report(stderr):
    """{coll: {"calls": n, "fallback": n, alg: n, ...}} from MCOLL_VERBOSE=1 output."""
    report = {}
    for line in stderr.splitlines():
        m = re.match(r"^mcoll: (\w+) calls=(\d+)((?: [\w-]+=\d+)*)\s*$", line)
        if m:
            counts = {"calls": int(m.group(2))}
            counts.update({k: int(v) for k, v in re.findall(r"([\w-]+)=(\d+)", m.group(3))})
            report[m.group(1)] = counts
    return report


def parse_inter_report(stderr):
    """{coll: {"calls": n, alg: n, ...}}: what ran between nodes ("<coll>.inter" lines)."""
    report = {}
    for m in re.finditer(r"^mcoll: (\w+)\.inter calls=(\d+)((?: \w+=\d+)*)$", stderr, re.M):
        counts = {"calls": int(m.group(2))}
        counts.update({k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(3))})
        report[m.group(1)] = counts
    return report


# The fallback reason of a forced algorithm whose restrictions do not hold (coll/registry.h).
FORCED_FALLBACK = "forced algorithm cannot run here, the normal choice ran"


def parse_forced_denied(stderr):
    """{(coll, alg): {need: n}} from MCOLL_VERBOSE=1's "forced ... not allowed" lines
    (coll is "<coll>.inter" for an algorithm between nodes)."""
    denied = {}
    for m in re.finditer(r"^mcoll: ([\w.]+) forced (\w+) not allowed: needs (\w+) \(.*\)=(\d+)$", stderr, re.M):
        denied.setdefault((m.group(1), m.group(2)), {})[m.group(3)] = int(m.group(4))
    return denied


def only_forced_fallbacks(result):
    """Fails unless every fallback in the MCOLL_VERBOSE report is a forced algorithm
    that could not run (its restrictions did not hold: the normal choice ran)."""
    reasons = set(re.findall(r'^mcoll: \w+ fallback "([^"]+)"=\d+$', result.stderr, re.M))
    if not reasons <= {FORCED_FALLBACK}:
        pytest.fail(f"fallbacks: {reasons}\n{result.describe()}")


def mcoll_restrictions(build, flavour):
    """{coll: {alg: set of restriction names}} as listed by mcoll-info (the registry's data);
    algorithms between nodes under "<coll>.inter"."""
    result = run_job([str(MCOLLRUN), "--mpi", flavour, "--build", str(build.path), "--info"], timeout=60)
    needs = {}
    for m in re.finditer(r"^  ([\w.]+)\s+(\w+)\s+needs=(\S+)$", result.stdout, re.M):
        needs.setdefault(m.group(1), {})[m.group(2)] = set() if m.group(3) == "-" else set(m.group(3).split(","))
    return needs


def mcoll_algorithms(build, flavour):
    """{coll: {alg: description}} as listed by mcoll-info (the registry): the list of
    algorithms in a node, then the list between nodes (as "<coll>.inter")."""
    result = run_job([str(MCOLLRUN), "--mpi", flavour, "--build", str(build.path), "--info"], timeout=60)
    algs = {}
    suffix = None  # inside a list: "" (in a node) or ".inter"
    coll = None
    for line in result.stdout.splitlines():
        if line.startswith("algorithms"):
            suffix = ".inter" if line.startswith("algorithms between nodes") else ""
            continue
        if suffix is None:
            continue
        if not line.strip():  # a list ends at the first blank line
            suffix = None
            continue
        m = re.match(r"^  (\w+)\s+(\w+)\s+(.*)$", line)
        if m:
            coll = m.group(1) + suffix
            algs.setdefault(coll, {})[m.group(2)] = m.group(3)
            continue
        m = re.match(r"^\s{4,}(\w+)\s+(.*)$", line)
        if m and coll:
            algs[coll][m.group(1)] = m.group(2)
    return algs
