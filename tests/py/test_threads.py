"""Issue 9, part 8: under MPI_THREAD_MULTIPLE, threads run blocking and non-blocking
collectives at the same time, each on a communicator of its own
(tests/mpi/test_threads.c checks every result), with and without the progress
thread, and under ThreadSanitizer (no data race in mcoll's code)."""

import pytest

import mpijob
from mpijob import mpiexec_argv, run_job
from test_resources import mcoll_data_races

BUILD = mpijob.find_build("build")
TSAN = mpijob.find_build("build-tsan")
PROGRAM = "mcoll-test-threads"
JOB_TIMEOUT = 120


def check_done(result):
    assert result.returncode == 0 and "test_threads: done" in result.stdout, result.describe()


def flavours():
    return [pytest.param(f, marks=[] if f in BUILD.flavours else
                         [pytest.mark.skip(reason=f"build/{f} not built")]) for f in mpijob.FLAVOURS]


@pytest.mark.parametrize("progress_thread", ["0", "1"])
@pytest.mark.parametrize("np", [2, pytest.param(3, marks=mpijob.FULL)])
@pytest.mark.parametrize("flavour", flavours())
def test_threads_collectives(flavour, np, progress_thread):
    argv = mpiexec_argv(flavour, np, BUILD.bin(flavour, PROGRAM), [3, 30])
    result = run_job(argv, {"MCOLL_FALLBACK": "error", "MCOLL_PROGRESS_THREAD": progress_thread,
                            "MCOLL_VERBOSE": "1"}, JOB_TIMEOUT)
    check_done(result)
    # Every allreduce ran in mcoll, the non-blocking ones as tasks.
    calls = mpijob.parse_verbose_report(result.stderr)
    assert calls["allreduce"]["fallback"] == 0, result.describe()
    assert "non-blocking calls=" in result.stderr, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_threads_fresh_world_after_threads(flavour):
    """Threads build their communicators' contexts at the same time; then the main
    thread's first collective on MPI_COMM_WORLD builds its context. Before, it could
    claim a pooled channel by an id that two agreements had given to two channels of
    a process, a different channel on each rank: the allreduce hung (1 run in 7-15).
    Now programs under MPI_THREAD_MULTIPLE take new channels; ten runs in a row."""
    argv = mpiexec_argv(flavour, 3, BUILD.bin(flavour, PROGRAM), [3, 10])
    for _ in range(10):
        result = run_job(argv, {"MCOLL_FALLBACK": "error", "MCOLL_PROGRESS_THREAD": "1"}, 60)
        check_done(result)


@pytest.mark.full
@pytest.mark.parametrize("flavour", [
    pytest.param(f, marks=[pytest.mark.skip(reason="MPICH 4.0 (ch4:ucx) crashes under TSan")] if f == "mpich"
                 else [] if f in TSAN.flavours else
                 [pytest.mark.skip(reason=f"build-tsan/{f} not built (scripts/setup.sh --tsan)")])
    for f in mpijob.FLAVOURS])
def test_threads_tsan(flavour, tmp_path):
    log = tmp_path / "tsan"
    argv = [str(mpijob.MCOLLRUN), "--mpi", flavour, "--build", str(TSAN.path), "-np", "2",
            str(BUILD.bin(flavour, PROGRAM)), "3", "6"]
    result = run_job(argv, {"MCOLL_FALLBACK": "error", "MCOLL_PROGRESS_THREAD": "1",
                            # (the longest history: fewer accesses without a stack)
                            "TSAN_OPTIONS": f"halt_on_error=0 exitcode=0 history_size=7 log_path={log}"},
                     JOB_TIMEOUT)
    check_done(result)
    races = mcoll_data_races(log)
    assert not races, f"{len(races)} data races in mcoll:\n\n" + "\n\n".join(races[:3])
