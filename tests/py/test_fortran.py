"""Issue 13, part 1: collectives called from Fortran -- include 'mpif.h', use mpi and
use mpi_f08 -- are taken over on both MPIs (Open MPI's bindings call PMPI_* directly:
mcoll defines their symbols, src/pmpi/fortran.c) and give the results of a
point-to-point reference (tests/fortran/test_fortran.F90). The MCOLL_VERBOSE report
must count every collective as run by mcoll, none as a fallback."""

import re
import shutil
import subprocess

import pytest

import mpijob
from mpijob import ROOT, check_passed, mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
SOURCE = ROOT / "tests" / "fortran" / "test_fortran.F90"
BINDINGS = {"mpifh": ["-DBIND_MPIFH"], "mpi": [], "f08": ["-DBIND_F08"]}
COLLS = ("barrier", "bcast", "reduce", "allreduce", "allgather", "allgatherv", "gather", "gatherv",
         "scatter", "scatterv", "alltoall", "alltoallv", "alltoallw", "reduce_scatter",
         "reduce_scatter_block", "scan", "exscan")


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    out = tmp_path_factory.mktemp("fortran")
    built = {}
    for flavour in BUILD.flavours:
        compiler = shutil.which(f"mpif90.{flavour}")
        if not compiler:
            continue
        for binding, flags in BINDINGS.items():
            exe = out / f"test_fortran_{binding}.{flavour}"
            # mpif.h declares no interfaces: buffers of several types go to one routine
            subprocess.run([compiler, "-fallow-argument-mismatch", *flags, str(SOURCE), "-o", str(exe)],
                           check=True, capture_output=True, timeout=300)
            built[flavour, binding] = exe
    return built


@pytest.mark.parametrize("np", [pytest.param(1, marks=mpijob.FULL), pytest.param(2, marks=mpijob.FULL), 3,
                                pytest.param(4, marks=mpijob.FULL)])
@pytest.mark.parametrize("binding", list(BINDINGS))
@pytest.mark.parametrize("flavour", mpijob.FLAVOURS)
def test_fortran(programs, flavour, binding, np):
    if flavour not in BUILD.flavours:
        pytest.skip(f"build/{flavour} not built")
    if (flavour, binding) not in programs:
        pytest.skip(f"no mpif90.{flavour} (gfortran)")
    result = run_job(mpiexec_argv(flavour, np, programs[flavour, binding]),
                     {"MCOLL_FALLBACK": "error", "MCOLL_VERBOSE": "1"}, timeout=240)
    check_passed(result, "test_fortran")
    for coll in COLLS:
        m = re.search(rf"^mcoll: {coll} calls=(\d+) .*fallback=(\d+)$", result.stderr, re.M)
        assert m and int(m.group(1)) > 0 and m.group(2) == "0", f"{coll} not taken over\n{result.describe()}"
