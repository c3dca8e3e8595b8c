"""Smoke tests of mcoll-bench's cold, latency, nbc and idle modes (-m cold, -m latency,
-m nbc, -m idle) at 2 ranks with tiny counts: the JSON and the table have the structure
that bench/run.sh and tools/py/mcoll_report.py rely on, with positive times on both
sides and the derived numbers (overlap, medians) consistent with the measured ones."""

import json
import re
import math

import pytest

from mpijob import mpiexec_argv, run_job
from mpijob import BASE_ENV, BUILD, flavour_param

# asserts on timing or CPU use: run alone (tests/run.sh's serial phase)
pytestmark = pytest.mark.serial

JOB_TIMEOUT = 180
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
SWEEP = ["-C", "barrier,bcast,allreduce", "-b", "8", "-e", "4K", "-f", "16", "-r", "3", "-c"]


def run_bench(flavour, tmp_path, mode_args, env=None):
    out = tmp_path / "bench.json"
    program = BUILD.bin(flavour, "mcoll-bench")
    result = run_job(mpiexec_argv(flavour, 2, program, [*SWEEP, *mode_args, "-o", out]),
                     {**BASE_ENV, **(env or {})}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["complete"] is True and doc["mcoll_loaded"] is True
    rows = [(r["coll"], r["bytes"]) for r in doc["results"]]
    assert rows == [("barrier", 0), ("bcast", 8), ("bcast", 128), ("bcast", 2048),
                    ("allreduce", 8), ("allreduce", 128), ("allreduce", 2048)]
    return doc, result.stdout


def positive(value):
    return value is not None and math.isfinite(value) and value > 0


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cold_mode(flavour, tmp_path):
    doc, stdout = run_bench(flavour, tmp_path, ["-m", "cold", "-K", "5"])
    assert doc["mode"] == "cold" and doc["cold_calls"] == 5
    assert "# mode cold" in stdout and "setup_n" in stdout and "warm_m" in stdout
    for r in doc["results"]:
        assert r["cold_calls"] == 5
        for side in ("native", "mcoll"):
            for key in ("setup", "first", "first10", "warm"):
                assert positive(r[f"{side}_{key}_us"]), (r["coll"], r["bytes"], side, key)
            assert positive(r[f"{side}_us"])
            per_call = r[f"{side}_per_call_us"]
            assert len(per_call) == 5 and all(positive(t) for t in per_call)
            assert r[f"{side}_first_us"] == per_call[0]
            assert len(r[f"{side}_samples_us"]) == 3
            # the medians of calls 1..N lie within the calls' range
            assert min(per_call) <= r[f"{side}_us"] <= max(per_call)
        assert r["ratio"] == pytest.approx(r["native_us"] / r["mcoll_us"], rel=1e-3)
    # mcoll's set-up (its context, on the first barrier) costs more than the host's
    # barrier: the set-up column does see it
    barrier = doc["results"][0]
    assert barrier["mcoll_setup_us"] > barrier["mcoll_warm_us"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_latency_mode(flavour, tmp_path):
    doc, stdout = run_bench(flavour, tmp_path, ["-m", "latency", "-n", "20", "-w", "2"])
    assert doc["mode"] == "latency"
    assert "# mode latency" in stdout and "native_us" in stdout and "mcoll_us" in stdout
    for r in doc["results"]:
        assert r["iters"] == 20 and r["warmup"] == 2
        assert positive(r["native_us"]) and positive(r["mcoll_us"])
        assert len(r["native_samples_us"]) == 3 and len(r["mcoll_samples_us"]) == 3
        assert all(positive(t) for t in r["native_samples_us"] + r["mcoll_samples_us"])
        assert "cold_calls" not in r


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_forced_sweep(flavour, tmp_path):
    """-F: each round's blocks (native, the default, every forced algorithm) run in a
    shuffled order; every one is timed in every round and checked (-c)."""
    # (a forced algorithm that cannot run for a row falls back to the choice: not an error)
    doc, stdout = run_bench(flavour, tmp_path, ["-m", "latency", "-n", "10", "-w", "1", "-F"],
                            {"MCOLL_FALLBACK": "silent"})
    assert "def/best" in stdout
    for r in doc["results"]:
        forced = r["forced_us"]
        assert forced and all(positive(t) for t in forced.values()), (r["coll"], r["bytes"])
        assert r["best_forced_alg"] in forced
        assert r["best_forced_us"] == min(forced.values())
        assert len(r["native_samples_us"]) == 3 and len(r["mcoll_samples_us"]) == 3
        assert positive(r["native_us"]) and positive(r["mcoll_us"])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_nbc_mode(flavour, tmp_path):
    doc, stdout = run_bench(flavour, tmp_path, ["-m", "nbc", "-n", "20", "-w", "2"],
                            {"MCOLL_PROGRESS_THREAD": "0"})
    assert doc["mode"] == "nbc" and doc["progress_thread"] == "0"
    # persistent collectives: MPICH 4.0's MPI 4 calls, Open MPI 4.1's MPIX_ extension
    assert doc["persistent"] is True
    assert "# mode nbc, MCOLL_PROGRESS_THREAD=0" in stdout and "ovl_m%" in stdout
    for r in doc["results"]:
        assert r["iters"] == 20 and r["warmup"] == 2
        for side in ("native", "mcoll"):
            keys = ["blocking", "post_wait", "compute", "total", "compute_in"]
            if doc["persistent"]:
                keys.append("start_wait")
            else:
                assert f"{side}_start_wait_us" not in r
            for key in keys:
                assert positive(r[f"{side}_{key}_us"]), (r["coll"], r["bytes"], side, key)
            # the row's time is post + wait; overlap follows from the medians
            assert r[f"{side}_us"] == r[f"{side}_post_wait_us"]
            # no progress thread (MCOLL_PROGRESS_THREAD=0): no CPU share of one
            assert f"{side}_progress_cpu_pct" not in r
            total, pure = r[f"{side}_total_us"], r[f"{side}_post_wait_us"]
            for key, loop in (("overlap_pct", "compute_us"), ("overlap_osu_pct", "compute_in_us")):
                want = 100 * (1 - (total - r[f"{side}_{loop}"]) / pure)
                assert r[f"{side}_{key}"] == pytest.approx(want, rel=1e-3, abs=0.05)
            # post, the loop, wait: never shorter than the loop inside it
            assert total >= r[f"{side}_compute_in_us"] * 0.999
            assert len(r[f"{side}_samples_us"]) == 3
        assert r["ratio"] == pytest.approx(r["native_us"] / r["mcoll_us"], rel=1e-3)


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_idle_mode(flavour, tmp_path):
    out = tmp_path / "idle.json"
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-m", "idle", "-I", "0.5", "-r", "3", "-W", "200000", "-o", out]
    result = run_job(mpiexec_argv(flavour, 2, program, args),
                     {**BASE_ENV, "MCOLL_PROGRESS_THREAD": "1"}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["mode"] == "idle" and doc["progress_thread"] == "1" and doc["results"] == []
    assert doc["mcoll_loaded"] is True and doc["complete"] is True
    idle = doc["idle"]
    assert idle["seconds"] == 0.5 and idle["compute_work"] == 200000
    assert len(idle["cpu_seconds"]) == 2 and len(idle["cpu_pct"]) == 2
    # asleep: the process used far less than a core, and at least nothing negative
    assert all(0 <= t < 0.5 for t in idle["cpu_seconds"])
    assert idle["max_cpu_pct"] == pytest.approx(max(idle["cpu_pct"]), rel=1e-3)
    assert all(0 <= p <= c + 1e-3 for p, c in zip(idle["background_cpu_pct"], idle["cpu_pct"]))
    samples = idle["compute_samples_ms"]
    assert len(samples) == 3 and all(positive(t) for t in samples)
    assert idle["compute_ms"] == sorted(samples)[1]
    assert "# mode idle, MCOLL_PROGRESS_THREAD=1" in result.stdout
    assert "compute_ms median" in result.stdout


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param("mpich")])
def test_nbc_mode_without_persistent_block(flavour, tmp_path):
    doc, _ = run_bench(flavour, tmp_path, ["-m", "nbc", "-P", "-n", "10", "-w", "1"])
    assert doc["persistent"] is False  # MPICH has them, -P leaves them out
    for r in doc["results"]:
        assert "mcoll_start_wait_us" not in r and "native_start_wait_us" not in r
        assert positive(r["mcoll_post_wait_us"]) and positive(r["native_blocking_us"])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_nbc_mode_persistent_scatter_at_three_ranks(flavour, tmp_path):
    """MPICH 4.0's own persistent scatter fails at 3 ranks or more ("Invalid
    communicator" at its MPI_Wait, natively too): the nbc mode leaves the host's side of
    that block out there instead of ending the job. mcoll's side, and Open MPI's host
    side, still time it; every result checked (-c)."""
    out = tmp_path / "bench.json"
    args = ["-m", "nbc", "-C", "scatter,gather", "-b", "8", "-e", "64", "-f", "8", "-r", "1",
            "-n", "10", "-w", "1", "-c", "-o", out]
    result = run_job(mpiexec_argv(flavour, 3, BUILD.bin(flavour, "mcoll-bench"), args), BASE_ENV, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["complete"] is True and len(doc["results"]) == 4
    for r in doc["results"]:
        assert positive(r["mcoll_start_wait_us"]), r
        host_skips = flavour == "mpich" and r["coll"] == "scatter"
        assert positive(r.get("native_start_wait_us")) != host_skips, r


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_vary_parameter(flavour, tmp_path):
    """-V NAME=a,b: both sides are mcoll, with MCOLL_NAME set to a and to b before each
    block (mcoll_set_param): bcast's one-slot path off (BCAST_SLOT_MAX=0) against on
    (512), so that the report counts both algorithms; a parameter that cannot change
    while running (the segment's SHM_AREA) stops the bench."""
    env = {"MCOLL_VERBOSE": "1", "MCOLL_CORES": "64"}  # slots are for a core per rank
    doc, stdout = run_bench(flavour, tmp_path, ["-V", "BCAST_SLOT_MAX=0,512"], env)
    assert doc["vary"] == {"param": "BCAST_SLOT_MAX", "values": ["0", "512"]}
    assert "# mcoll-bench -V: native = mcoll with MCOLL_BCAST_SLOT_MAX=0, mcoll = with 512" in stdout
    program = BUILD.bin(flavour, "mcoll-bench")
    result = run_job(mpiexec_argv(flavour, 2, program, [*SWEEP, "-V", "BCAST_SLOT_MAX=0,512"]),
                     {**BASE_ENV, **env}, JOB_TIMEOUT)
    bcast = re.search(r"^mcoll: bcast calls=\d+ .*$", result.stderr, re.M)
    assert bcast, result.describe()
    counts = dict(re.findall(r"(\w+)=(\d+)", bcast.group(0)))
    assert int(counts["shm_slot"]) > 0 and int(counts["shm_pipeline"]) > 0, bcast.group(0)
    bad = run_job(mpiexec_argv(flavour, 2, program, [*SWEEP, "-V", "SHM_AREA=1M,2M"]), BASE_ENV, JOB_TIMEOUT)
    assert bad.returncode != 0 and "-V: mcoll not loaded, or not a parameter" in bad.stdout + bad.stderr


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_vary_algorithm(flavour, tmp_path):
    """-V ALG_<COLL>=a,b: that collective's algorithm forced per side
    (mcoll_set_algorithm), here the barrier that latency mode runs after every call:
    the report counts both barrier algorithms; an unknown one stops the bench."""
    env = {"MCOLL_VERBOSE": "1"}
    program = BUILD.bin(flavour, "mcoll-bench")
    args = [*SWEEP, "-m", "latency", "-V", "ALG_BARRIER=counter,hier"]
    result = run_job(mpiexec_argv(flavour, 2, program, args), {**BASE_ENV, **env}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    assert "native = mcoll with MCOLL_ALG_BARRIER=counter, mcoll = with hier" in result.stdout
    barrier = re.search(r"^mcoll: barrier calls=\d+ .*$", result.stderr, re.M)
    assert barrier, result.describe()
    counts = dict(re.findall(r"(\w+)=(\d+)", barrier.group(0)))
    assert int(counts["counter"]) > 0 and int(counts["hier"]) > 0, barrier.group(0)
    bad = run_job(mpiexec_argv(flavour, 2, program, [*SWEEP, "-V", "ALG_BARRIER=nosuch,hier"]),
                  BASE_ENV, JOB_TIMEOUT)
    assert bad.returncode != 0 and "no such algorithm of that collective" in bad.stdout + bad.stderr


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_burst_mode(flavour, tmp_path):
    """-m burst: -K calls in flight on one communicator; one rank per (fake) node, so
    mcoll's window side runs them side by side (task/task.h). Rows for every size with
    positive medians of every side, each the median of its rounds' samples."""
    out = tmp_path / "burst.json"
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-m", "burst", "-K", "4", "-C", "bcast,allreduce", "-b", "8", "-e", "4K", "-f", "16",
            "-r", "3", "-n", "5", "-o", out]
    result = run_job(mpiexec_argv(flavour, 2, program, args),
                     {**BASE_ENV, "MCOLL_TOPO": "nodes=2"}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["mode"] == "burst" and doc["calls_in_flight"] == 4 and doc["nprocs"] == 2
    assert [(r["coll"], r["bytes"]) for r in doc["rows"]] == [
        ("bcast", 8), ("bcast", 128), ("bcast", 2048), ("allreduce", 8), ("allreduce", 128),
        ("allreduce", 2048)]
    for row in doc["rows"]:
        for side in ("host", "window_1", "window_4"):
            samples = row[f"{side}_samples_us"]
            assert len(samples) == 3 and all(positive(s) for s in samples)
            assert row[f"{side}_us"] == pytest.approx(sorted(samples)[1], rel=1e-3)
    assert re.search(r"^# burst: 2 ranks, 4 calls in flight", result.stdout, re.M), result.stdout


@pytest.mark.full
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_arrival_mode(flavour, tmp_path):
    """-m arrival: bcast after per-rank delays, timed from the last arrival; 4 ranks on
    2 fake nodes, rank 2 (local rank 0 of the node without the root) late. Rows for
    every size with positive medians of the four sides, each its rounds' median."""
    out = tmp_path / "arrival.json"
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-m", "arrival", "-D", "late:2:300", "-b", "8", "-e", "4K", "-f", "16", "-r", "3",
            "-n", "5", "-o", out]
    result = run_job(mpiexec_argv(flavour, 4, program, args),
                     {**BASE_ENV, "MCOLL_TOPO": "nodes=2"}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["mode"] == "arrival" and doc["delays"] == "late:2:300" and doc["nprocs"] == 4
    assert [r["bytes"] for r in doc["rows"]] == [8, 128, 2048]
    for row in doc["rows"]:
        for side in ("host", "fixed_leader", "first_arrival", "push"):
            samples = row[f"{side}_samples_us"]
            assert len(samples) == 3 and all(positive(s) for s in samples)
            assert row[f"{side}_us"] == pytest.approx(sorted(samples)[1], rel=1e-3)
    assert re.search(r"^# arrival: bcast, 4 ranks, delays late:2:300", result.stdout, re.M), result.stdout
