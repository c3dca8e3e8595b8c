"""mcoll-bench --calibrate at 2 ranks with few rounds: it writes a machine file that the
performance model (tools/py/mcoll_model) loads, with positive, finite parameters, and
the model predicts from it."""

import json
import math
import sys

import pytest

from mpijob import ROOT, mpiexec_argv, run_job
from mpijob import BASE_ENV, BUILD, flavour_param

sys.path.insert(0, str(ROOT / "tools" / "py"))
from mcoll_model import cost, machine as M  # noqa: E402

JOB_TIMEOUT = 240


def finite_positive(v):
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param("openmpi"), flavour_param("mpich")])
def test_calibrate_writes_a_machine_file(flavour, tmp_path):
    out = tmp_path / "machine.json"
    program = BUILD.bin(flavour, "mcoll-bench")
    result = run_job(mpiexec_argv(flavour, 2, program, ["--calibrate", "-r", "3", "-T", "0.5",
                                                        "-o", out]), BASE_ENV, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    assert "# calibrate: host MPI ping-pong" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["topology"]["ranks_per_node"] == 2 and doc["topology"]["nodes"] == 1
    for level in ("core", "node"):
        lv = doc["levels"][level]
        assert finite_positive(lv["alpha_us"]) and len(lv["us"]) == len(lv["sizes"]) == 9
    node = doc["node"]
    for key in ("sync_us", "sched_turn_us", "cache_copy_GBps", "memcpy_GBps", "fold_GBps"):
        assert finite_positive(node[key]), key
    assert [c for c, _ in node["mem_GBps"]] == [1, 2]
    assert all(finite_positive(b) for _, b in node["mem_GBps"])
    if node["cma"]:
        assert finite_positive(node["cma_call_us"]) and finite_positive(node["cma_GBps"])
    assert finite_positive(doc["net"]["alpha_us"])
    m = M.load(str(out))
    for coll in ("bcast", "allreduce", "alltoall"):
        t, alg, inter = cost.choose(coll, m, 4096)
        assert finite_positive(t) and alg and inter is None
