"""Node segments and per-communicator state: a small /dev/shm,
the memory and context ids that live communicators cost,
a rank killed inside the segment set-up, ranks that disagree on the segment layout,
out-of-bounds parameters, and threads that each use their own communicator at once.

Every job runs under a hard timeout and must leave no /dev/shm/mcoll-* file
(mpijob.run_job). The program is tests/mpi/test_resources.c.
"""

import os
import re
import shutil
import subprocess

import pytest

import mpijob
from mpijob import check_passed, mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
TSAN = mpijob.find_build("build-tsan")
PROGRAM = "mcoll-test-resources"
JOB_TIMEOUT = 240


def flavours(build=BUILD):
    return [pytest.param(f, marks=[] if f in build.flavours else
                         [pytest.mark.skip(reason=f"{build.name}/{f} not built")]) for f in mpijob.FLAVOURS]


def can_mount_private_tmpfs():
    """A private mount namespace with its own small /dev/shm (root, unshare -m)."""
    if os.getuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.parametrize("share", ["0", "1"])
@pytest.mark.parametrize("flavour", flavours())
def test_small_dev_shm_falls_back_instead_of_sigbus(flavour, share):
    """Defect 6: 8 ranks in a 64 MiB /dev/shm, six live dups each running a 512 KiB-per-
    rank allgather and a 2 MiB allreduce. On main the 2nd-4th communicator died of
    SIGBUS; now a segment that cannot be reserved means the host MPI for that
    communicator, agreed by all ranks, and every result is right. With
    MCOLL_SHARE_CONTEXT=0 each dup needs a segment of its own and space runs out;
    by default the dups share the world's context and all of them run on mcoll."""
    if not can_mount_private_tmpfs():
        pytest.skip("cannot mount a private tmpfs on /dev/shm (needs root and unshare -m)")
    argv = mpiexec_argv(flavour, 8, BUILD.bin(flavour, PROGRAM), ["full", 6])
    script = "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec \"$@\""
    result = run_job(["unshare", "-m", "sh", "-c", script, "sh", *argv],
                     {"MCOLL_FALLBACK": "silent", "MCOLL_VERBOSE": "1", "MCOLL_SHARE_CONTEXT": share},
                     JOB_TIMEOUT)
    assert check_passed(result, "test_resources") == 6 * 8 * 2, result.describe()
    if share == "0":
        assert "No space left on device" in result.stderr, result.describe()
    elif flavour == "openmpi":  # MPICH's own shared memory leaves no room for a segment
        assert "No space left on device" not in result.stderr, result.describe()
        m = re.search(r"^mcoll: contexts built=(\d+) shared=(\d+) ", result.stderr, re.M)
        assert m and int(m.group(2)) >= 5, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_rank_killed_in_segment_setup_leaves_no_file(flavour):
    """Defect 8: the node's second rank is SIGKILLed after the leader created the
    segment file and before the set-up ends. On main the leader waited in an
    allreduce until the launcher killed it, and the file stayed in /dev/shm; now no
    name outlives the leader's own creation step (run_job fails on a leftover)."""
    result = run_job(mpiexec_argv(flavour, 2, BUILD.bin(flavour, PROGRAM), ["killsetup"]),
                     {"MCOLL_FALLBACK": "error"}, timeout=60, expect_timeout=True)
    assert "killed inside the segment set-up" in result.stderr, result.describe()
    assert result.returncode != 0 and result.seconds < 60, result.describe()


@pytest.mark.parametrize("flavour", flavours())
@pytest.mark.parametrize("var,first,others", [("MCOLL_SHM_AREA", "1M", "4M"),
                                              ("MCOLL_SHM_CHUNK", "16K", "64K")])
def test_ranks_disagreeing_on_the_layout_fall_back(flavour, var, first, others):
    """Defect 8: rank 0 runs with another MCOLL_SHM_AREA / MCOLL_SHM_CHUNK than its
    node peers. On main: a hang or SIGBUS / EFAULT; now every rank sees the
    disagreement, the communicator goes to the host MPI, and the results are right."""
    argv = mpiexec_argv(flavour, 3, BUILD.bin(flavour, PROGRAM), ["layout", var, first, others])
    result = run_job(argv, {"MCOLL_FALLBACK": "silent", "MCOLL_VERBOSE": "1"}, JOB_TIMEOUT)
    check_passed(result, "test_resources")
    assert re.search(r"not usable: ranks of this node disagree", result.stderr), result.describe()


@pytest.mark.parametrize("flavour", flavours())
@pytest.mark.parametrize("var,value", [("MCOLL_SHM_AREA", "0"), ("MCOLL_SHM_AREA", "100G"),
                                       ("MCOLL_SHM_AREA", "1000"), ("MCOLL_SHM_CHUNK", "64G")])
def test_out_of_bounds_segment_parameters(flavour, var, value):
    """Defect 8: MCOLL_SHM_AREA=0 crashed (SIGFPE) and 100G was taken; now a clear
    message and the default, and mcoll runs (MCOLL_FALLBACK=error: no fallback)."""
    argv = mpiexec_argv(flavour, 2, BUILD.bin(flavour, PROGRAM), ["basic"])
    result = run_job(argv, {"MCOLL_FALLBACK": "error", var: value}, JOB_TIMEOUT)
    check_passed(result, "test_resources")
    assert re.search(rf"{var}=\d+ is out of bounds .* using the default", result.stderr), result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_threads_each_with_own_communicator(flavour):
    """Defect 9: MPI_THREAD_MULTIPLE, four threads each running collectives on their
    own communicator from its first call on (lazy set-up of config, algorithm table,
    context keyval and segments all at once). A stress test; see test_threads_tsan."""
    argv = mpiexec_argv(flavour, 2, BUILD.bin(flavour, PROGRAM), ["threads", 4, 10])
    result = run_job(argv, {"MCOLL_FALLBACK": "error"}, JOB_TIMEOUT)
    check_passed(result, "test_resources")


def _first_frame_lib(stack):
    frames = re.findall(r"#\d+ (\S+) \S+ \((\S+?)\+", stack)
    libs = [lib for _, lib in frames if not lib.startswith("libtsan")]
    return libs[0] if libs else ""


def mcoll_data_races(log_prefix):
    """TSan data-race reports where both accesses are mcoll's own code: the first frame
    outside the TSan runtime of each stack is in libmcoll (the uninstrumented MPI's
    internals give false positives: TSan cannot see their atomics, e.g. Open MPI's
    progress in one thread unpacking a message into another thread's buffer). Each
    access's own stack only: an access whose stack TSan could not restore is not
    attributed (its section goes on with the threads' creation stacks, which for a
    fiber are mcoll's; such a write of the host's into a task's buffer was counted)."""
    races = []
    for path in log_prefix.parent.glob(log_prefix.name + "*"):
        for report in path.read_text(errors="replace").split("=================="):
            if "WARNING: ThreadSanitizer: data race" not in report:
                continue
            accesses = [a.strip().split("\n\n")[0]
                        for a in report.split("Location is")[0].split("Previous ")]
            if all(_first_frame_lib(a).startswith("libmcoll") for a in accesses[:2]):
                races.append(report.strip())
    return races


@pytest.mark.full
@pytest.mark.parametrize("flavour", [
    pytest.param(f, marks=[pytest.mark.skip(reason="MPICH 4.0 (ch4:ucx) crashes under TSan")] if f == "mpich"
                 else [] if f in TSAN.flavours else
                 [pytest.mark.skip(reason=f"build-tsan/{f} not built (scripts/setup.sh --tsan)")])
    for f in mpijob.FLAVOURS])
def test_threads_tsan(flavour, tmp_path):
    """Defect 9 under ThreadSanitizer: libmcoll built with -fsanitize=thread (build-tsan),
    the same threaded program; no data race may be reported in mcoll's code. On main
    TSan reports the lazy MCOLL_ALG_* table (mcoll__alg_forced)."""
    log = tmp_path / "tsan"
    argv = [str(mpijob.MCOLLRUN), "--mpi", flavour, "--build", str(TSAN.path), "-np", "2",
            str(BUILD.bin(flavour, PROGRAM)), "threads", "4", "3"]
    result = run_job(argv, {"MCOLL_FALLBACK": "error",
                            "TSAN_OPTIONS": f"halt_on_error=0 exitcode=0 log_path={log}"}, JOB_TIMEOUT)
    check_passed(result, "test_resources")
    races = mcoll_data_races(log)
    assert not races, f"{len(races)} data races in mcoll:\n\n" + "\n\n".join(races[:3])


@pytest.mark.parametrize("mode", ["live", "splitlive"])
@pytest.mark.parametrize("flavour", flavours())
def test_memory_per_communicator(flavour, mode):
    """Defect 7: 300 live communicators (dups, or splits that reverse the ranks: a new
    group over the same processes) each used once cost at most 64 KiB of RSS per
    rank each (on 57f7bf2: ~1 MiB)."""
    result = run_job(mpiexec_argv(flavour, 4, BUILD.bin(flavour, PROGRAM), [mode, "300"]),
                     {"MCOLL_FALLBACK": "error"}, JOB_TIMEOUT)
    check_passed(result, "test_resources")
    m = re.search(r"(\d+) live communicators, RSS (-?\d+) KiB per communicator", result.stdout)
    assert m and int(m.group(1)) == 300, result.describe()
    assert int(m.group(2)) <= 64, result.describe()


@pytest.mark.skipif("mpich" not in BUILD.flavours, reason="build/mpich not built")
def test_no_context_id_exhaustion_before_the_host():
    """Defect 7: MPICH has 2048 context ids. Live splits (new groups) under mcoll
    reach as many communicators as natively (on 57f7bf2: 512), and mcoll runs the
    allreduce on every one of them. (Once the ids are gone, a communicator that
    needs a new segment falls back: its set-up needs a node communicator.)"""
    counts = {}
    for mcoll in (False, True):
        result = run_job(mpiexec_argv("mpich", 2, BUILD.bin("mpich", PROGRAM), ["splitmaxlive"], mcoll=mcoll),
                         {"MCOLL_VERBOSE": "1"} if mcoll else {}, JOB_TIMEOUT)
        check_passed(result, "test_resources")
        m = re.search(r"(\d+) live communicators", result.stdout)
        assert m, result.describe()
        counts[mcoll] = int(m.group(1))
        if mcoll:
            m = re.search(r"^mcoll: allreduce calls=(\d+) .* fallback=(\d+)$", result.stderr, re.M)
            assert m and int(m.group(1)) >= counts[True] and m.group(2) == "0", result.describe()
    assert counts[True] >= counts[False] - 2, counts
