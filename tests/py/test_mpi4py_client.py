"""A real client: mpi4py's own collective tests (test_cco_*.py, test_msgzero.py) at 4
ranks under mcoll, one test per MPI flavour, through tests/clients/mpi4py.sh.
Among them the non-blocking (test_cco_nb_buf, test_cco_nb_vec) and, on MPICH (MPI
4.0; Open MPI 4.1 skips every test of them), the persistent collective modules
(test_cco_pr_buf, test_cco_pr_vec, test_cco_pr_ngh_buf): they must have run and passed.

The script builds mpi4py from its PyPI sdist against the flavour's MPI the first time
(cached in build/mpi4py-<flavour>/), then runs each module under bin/mcollrun with
MCOLL_VERBOSE=1. Here: every module passed, and mcoll's own algorithms (not
passthrough or fallback) took some of the collectives.
"""

import os
import re

import pytest

import mpijob
from mpijob import ROOT, client_env, flavour_param, run_client

SCRIPT = ROOT / "tests" / "clients" / "mpi4py.sh"
BUILD = mpijob.find_build(os.environ.get("MCOLL_BUILD_DIR", "build"))
PREPARE_TIMEOUT = 3600  # two mpi4py builds from source on 2 busy cores
RUN_TIMEOUT = 1500  # the script's own budget is a few minutes per flavour

# The non-blocking and persistent collective modules each flavour must run.
NBC_MODULES = {
    "openmpi": ("test_cco_nb_buf", "test_cco_nb_vec"),
    "mpich": ("test_cco_nb_buf", "test_cco_nb_vec", "test_cco_pr_buf", "test_cco_pr_vec", "test_cco_pr_ngh_buf"),
}

MODULE_LINE = re.compile(
    r"^mpi4py: (?P<flavour>\w+) (?P<module>test_\w+) mcoll: (?P<verdict>PASS|FAIL)"
    r"(?:.* mcoll algorithms: (?P<algs>.*?))?\s*$", re.M)


@pytest.mark.full
@pytest.mark.clients
@pytest.mark.parametrize("flavour", [flavour_param(f, build=BUILD, full=True) for f in mpijob.FLAVOURS])
def test_mpi4py_collective_tests(flavour):
    result = run_client(SCRIPT, flavour, client_env("MCOLL_MPI4PY_"), PREPARE_TIMEOUT, RUN_TIMEOUT)
    modules = {m["module"]: m for m in MODULE_LINE.finditer(result.stdout)
               if m["flavour"] == flavour}
    failed = sorted(name for name, m in modules.items() if m["verdict"] != "PASS")
    assert result.returncode == 0 and modules and not failed, (
        f"mpi4py modules failing under mcoll: {failed or 'see output'}\n{result.describe()}")

    missing = [name for name in NBC_MODULES[flavour] if name not in modules]
    assert not missing, f"non-blocking/persistent modules not run: {missing}\n{result.describe()}"

    took = {name: m["algs"] for name, m in modules.items() if m["algs"] not in (None, "none")}
    assert took, f"mcoll's algorithms took no collective of mpi4py's tests\n{result.describe()}"
