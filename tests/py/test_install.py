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


@pytest.mark.parametrize("flavour", flavours())
def test_thread_ranks_by_installed_mcollrun(prefix, flavour, tmp_path):
    """`mcollrun --threads` from the installed tree alone (no build tree beside it): the
    launcher, the runtime and the stand-in MPI library are installed under
    lib/mcoll/<flavour>/; an unmodified program runs as 2 processes x 2 thread ranks."""
    libdir = prefix / "lib" / "mcoll" / flavour
    soname = "libmpich.so.12" if flavour == "mpich" else "libmpi.so.40"
    for path in ("bin/mcoll-threads", "lib/libmcoll-threads.so", f"lib/threads/{soname}"):
        assert (libdir / path).exists(), path
    app = tmp_path / "app"
    subprocess.run([f"mpicc.{flavour}", str(APP), "-o", str(app)], check=True,
                   capture_output=True, timeout=120)
    env = {"MCOLL_BUILD_DIR": "", "MCOLL_THREADS_REPORT": "1", "TMPDIR": str(tmp_path)}
    result = run_job([str(prefix / "bin" / "mcollrun"), "--threads", "2", "-np", "4", str(app)],
                     env, timeout=120)
    check_passed(result, "install_app")
    assert re.search(r"^mcoll threads: 2 ranks loaded in ", result.stderr, re.M), result.describe()
    assert "install_app: 20200 checks" in result.stdout, result.describe()  # (4 ranks x 5050)


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


@pytest.mark.full
@pytest.mark.skipif(set(BUILD.flavours) != {"openmpi", "mpich"}, reason="needs both flavours built")
@pytest.mark.parametrize("program_mpi,library", [("mpich", "openmpi"), ("openmpi", "mpich")])
def test_library_of_the_other_mpi(program_mpi, library, tmp_path):
    """Issue 13, part 4: mcoll built for one MPI, preloaded into a program of the other,
    says so in one line at MPI_Init. An Open MPI build passes every call on (its handle
    parameters are pointers, wide enough for MPICH's ints) and the program runs right;
    an MPICH build cannot carry Open MPI's pointer handles through its int parameters
    and stops cleanly (before this: segmentation faults in both directions)."""
    app = tmp_path / "app"
    subprocess.run([f"mpicc.{program_mpi}", str(APP), "-o", str(app)], check=True,
                   capture_output=True, timeout=120)
    lib = BUILD.path / library / "lib" / "libmcoll.so"
    argv = native_launch(program_mpi, 2)
    argv[1:1] = ["-x", f"LD_PRELOAD={lib}"] if program_mpi == "openmpi" else ["-genv", "LD_PRELOAD", str(lib)]
    result = run_job(argv + [str(app)], {}, timeout=120)
    assert "signal 11" not in result.stdout + result.stderr, result.describe()
    lines = [l for l in result.stderr.splitlines() if l.startswith("mcoll: built for")]
    assert lines, result.describe()
    if library == "openmpi":
        assert len(lines) == 1 and "disables itself" in lines[0], result.describe()
        check_passed(result, "install_app")
    else:
        assert "stopping" in lines[0] and result.returncode != 0, result.describe()
