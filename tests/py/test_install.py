"""Issue 13, part 3: `cmake --install build --prefix P` gives a tree that works on its
own: an application links mcoll through pkg-config (`pkg-config --libs mcoll-<flavour>`,
`mcoll` = the first flavour) or CMake (`find_package(mcoll)`, target mcoll::<flavour>),
and an unmodified one runs under P/bin/mcollrun. In each case the MCOLL_VERBOSE report
must show mcoll running its collectives, and the results must be right."""

import os
import re
import shutil
import subprocess

import pytest

import mpijob
from mpijob import ROOT, check_passed, run_job

BUILD = mpijob.find_build("build")
APP = ROOT / "tests" / "install" / "app.c"


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not BUILD.flavours:
        pytest.skip("build/ has no flavour built")
    p = tmp_path_factory.mktemp("prefix")
    subprocess.run(["cmake", "--install", str(BUILD.path), "--prefix", str(p)], check=True,
                   capture_output=True, timeout=120)
    return p


def flavours():
    return [pytest.param(f, marks=[] if f in BUILD.flavours else [pytest.mark.skip(reason=f"{f} not built")])
            for f in mpijob.FLAVOURS]


def native_launch(flavour, np):
    launcher = [f"mpiexec.{flavour}", "-np", str(np)]
    if flavour == "openmpi":
        launcher[1:1] = ["--oversubscribe"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])
    return launcher


def check_taken_over(result, calls=50):
    check_passed(result, "install_app")
    for coll in ("allreduce", "bcast"):
        m = re.search(rf"^mcoll: {coll} calls=(\d+) .*fallback=(\d+)$", result.stderr, re.M)
        assert m and int(m.group(1)) >= calls and m.group(2) == "0", result.describe()


def test_installed_tree(prefix):
    for path in ("include/mcoll.h", "bin/mcollrun", "lib/pkgconfig/mcoll.pc",
                 "lib/cmake/mcoll/mcollConfig.cmake"):
        assert (prefix / path).exists(), path
    for flavour in BUILD.flavours:
        for path in (f"lib/mcoll/{flavour}/libmcoll.so", f"bin/mcoll-info.{flavour}",
                     f"bin/mcoll-bench.{flavour}", f"lib/pkgconfig/mcoll-{flavour}.pc"):
            assert (prefix / path).exists(), path


@pytest.mark.parametrize("flavour", flavours())
def test_linked_with_pkg_config(prefix, flavour, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    name = "mcoll" if flavour == BUILD.flavours[0] else f"mcoll-{flavour}"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", name], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    assert any(f.startswith("-L") and str(prefix) in f for f in flags), flags
    app = tmp_path / "app"
    subprocess.run([f"mpicc.{flavour}", "-DWITH_MCOLL_H", str(APP), "-o", str(app), *flags],
                   check=True, capture_output=True, timeout=120)
    result = run_job(native_launch(flavour, 2) + [str(app)],
                     {"MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error"}, timeout=120)
    assert f"for {flavour}" in result.stdout, result.describe()
    check_taken_over(result)


@pytest.mark.parametrize("flavour", flavours())
def test_preloaded_by_installed_mcollrun(prefix, flavour, tmp_path):
    app = tmp_path / "app"
    subprocess.run([f"mpicc.{flavour}", str(APP), "-o", str(app)], check=True,
                   capture_output=True, timeout=120)
    # The installed mcollrun alone: no build tree beside it.
    env = {"MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error", "MCOLL_BUILD_DIR": ""}
    result = run_job([str(prefix / "bin" / "mcollrun"), "-np", "3", str(app)], env, timeout=120)
    check_taken_over(result)
    info = subprocess.run([str(prefix / "bin" / "mcollrun"), "--mpi", flavour, "--info", "-n", "1"],
                          capture_output=True, text=True, timeout=120)
    assert f"for {flavour}" in info.stdout, info.stdout + info.stderr


@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
@pytest.mark.parametrize("flavour", flavours())
def test_find_package(prefix, flavour, tmp_path):
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(ROOT / "tests" / "install"), "-B", str(build),
                    f"-DCMAKE_PREFIX_PATH={prefix}", f"-DFLAVOUR={flavour}"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, timeout=120)
    result = run_job(native_launch(flavour, 2) + [str(build / "app")],
                     {"MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error"}, timeout=120)
    assert f"for {flavour}" in result.stdout, result.describe()
    check_taken_over(result)
