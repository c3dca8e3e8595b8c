"""Smoke tests of mcoll-bench's cold and latency modes (-m cold, -m latency) at 2
ranks with tiny counts: the JSON and the table have the structure that bench/run.sh
and tools/py/mcoll_report.py rely on, with positive times on both sides."""

import json
import math

import pytest

from mpijob import mpiexec_argv, run_job
from test_mpi_coll import BASE_ENV, BUILD, flavour_param

JOB_TIMEOUT = 180
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]
SWEEP = ["-C", "barrier,bcast,allreduce", "-b", "8", "-e", "4K", "-f", "16", "-r", "3", "-c"]


def run_bench(flavour, tmp_path, mode_args):
    out = tmp_path / "bench.json"
    program = BUILD.bin(flavour, "mcoll-bench")
    result = run_job(mpiexec_argv(flavour, 2, program, [*SWEEP, *mode_args, "-o", out]),
                     BASE_ENV, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["complete"] is True and doc["mcoll_loaded"] is True
    rows = [(r["coll"], r["bytes"]) for r in doc["results"]]
    assert rows == [("barrier", 0), ("bcast", 8), ("bcast", 128), ("bcast", 2048),
                    ("allreduce", 8), ("allreduce", 128), ("allreduce", 2048)]
    return doc, result.stdout


def positive(value):
    return value is not None and math.isfinite(value) and value > 0


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
