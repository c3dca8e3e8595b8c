"""The Debian package: `cpack -G DEB` in the build folder makes one .deb with every
flavour built, installed under /usr; the installed /usr/bin/mcollrun runs a program
under mcoll on each MPI, then the package is removed. Installs into the real system
(root, dpkg), so full tier only, and skipped where mcoll is already installed there."""

import os
import shutil
import subprocess
import time

import pytest

import mpijob
from mpijob import run_job
from test_install import APP, check_taken_over

BUILD = mpijob.find_build("build")

pytestmark = [
    mpijob.FULL,
    pytest.mark.skipif(not BUILD.flavours, reason="build/ has no flavour built"),
    pytest.mark.skipif(os.getuid() != 0, reason="installs a .deb: needs root"),
    pytest.mark.skipif(not (shutil.which("cpack") and shutil.which("dpkg")
                            and shutil.which("dpkg-shlibdeps")),
                       reason="needs cpack, dpkg and dpkg-shlibdeps (dpkg-dev)"),
]


def dpkg(*args, timeout=120):
    """dpkg, waiting while another dpkg or apt holds its lock (exit 2 with 'lock')."""
    deadline = time.monotonic() + timeout
    while True:
        result = subprocess.run(["dpkg", *args], capture_output=True, text=True, timeout=timeout)
        if result.returncode == 0 or "lock" not in result.stderr or time.monotonic() > deadline:
            return result
        time.sleep(2)


def installed(package):
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                            capture_output=True, text=True)
    return status.returncode == 0 and "installed" in status.stdout.split()


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    made = subprocess.run(["cpack", "-G", "DEB", "-B", str(out)], cwd=BUILD.path,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    debs = list(out.glob("mcoll_*.deb"))
    assert len(debs) == 1, made.stdout
    return debs[0]


@pytest.fixture(scope="module")
def installed_deb(deb):
    if installed("mcoll"):
        pytest.skip("a package mcoll is installed already: not replaced by a test")
    result = dpkg("-i", str(deb))
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        yield deb
    finally:
        removed = dpkg("-r", "mcoll")
        assert removed.returncode == 0, removed.stdout + removed.stderr


def test_package_metadata(deb):
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Depends"],
                            capture_output=True, text=True, check=True).stdout
    assert "Package: mcoll" in fields
    for flavour, launcher, lib in (("openmpi", "openmpi-bin", "libopenmpi"),
                                   ("mpich", "mpich", "libmpich")):
        if flavour in BUILD.flavours:
            assert launcher in fields and lib in fields, fields
    files = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                           check=True).stdout
    assert "./usr/bin/mcollrun" in files and "./usr/include/mcoll.h" in files
    for flavour in BUILD.flavours:
        assert f"./usr/lib/mcoll/{flavour}/libmcoll.so" in files


@pytest.mark.parametrize("flavour", mpijob.FLAVOURS)
def test_installed_mcollrun_runs_a_program(installed_deb, flavour, tmp_path):
    if flavour not in BUILD.flavours:
        pytest.skip(f"{flavour} not built")
    app = tmp_path / "app"
    subprocess.run([f"mpicc.{flavour}", str(APP), "-o", str(app)], check=True,
                   capture_output=True, timeout=120)
    env = {"MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error", "MCOLL_BUILD_DIR": ""}
    result = run_job(["/usr/bin/mcollrun", "-np", "2", str(app)], env, timeout=120)
    check_taken_over(result)
    info = subprocess.run(["/usr/bin/mcollrun", "--mpi", flavour, "--info", "-n", "1"],
                          capture_output=True, text=True, timeout=120)
    assert f"for {flavour}" in info.stdout, info.stdout + info.stderr
