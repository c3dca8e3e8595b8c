"""The Spack recipe (packaging/spack/packages/mcoll/package.py) without Spack: loaded
against a stand-in of `spack.package` that records its directives, it must declare
the variants (MPI flavour, sanitizers off by default) and dependencies, and pass CMake
the Spack MPI's compiler wrapper as a flavour named after the MPI package. The build
with Spack itself is described in docs/usage.md ("Spack")."""

import importlib.util
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from mpijob import ROOT, check_passed, run_job

RECIPE = ROOT / "packaging" / "spack" / "packages" / "mcoll" / "package.py"


class Directives:
    def __init__(self):
        self.versions, self.variants, self.depends = [], {}, []


def stand_in_spack(directives, version=(0, 22, 0)):
    """Modules spack and spack.package with the names the recipe uses."""
    package = types.ModuleType("spack.package")

    class CMakePackage:
        def define(self, name, value):
            if isinstance(value, bool):
                value = "ON" if value else "OFF"
            return f"-D{name}={value}"

    package.CMakePackage = CMakePackage
    package.version = lambda v, **kw: directives.versions.append(v)
    package.variant = lambda name, **kw: directives.variants.__setitem__(name, kw)
    package.depends_on = lambda spec, **kw: directives.depends.append((spec, kw))
    package.maintainers = package.license = lambda *a, **kw: None
    package.join_path = lambda *parts: "/".join(parts)
    package.run_after = lambda *a, **kw: (lambda f: f)
    package.on_package_attributes = lambda **kw: (lambda f: f)
    package.Executable = object
    package.__all__ = [n for n in vars(package) if not n.startswith("_")]
    spack = types.ModuleType("spack")
    spack.spack_version_info = version
    spack.package = package
    return {"spack": spack, "spack.package": package}


def load_recipe(monkeypatch, version=(0, 22, 0)):
    directives = Directives()
    for name, module in stand_in_spack(directives, version).items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("mcoll_spack_recipe", RECIPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, directives


def test_variants_and_dependencies(monkeypatch):
    module, d = load_recipe(monkeypatch)
    assert issubclass(module.Mcoll, module.CMakePackage)
    assert d.versions == ["0.1.0"]
    assert d.variants["flavour"]["values"] == ("any", "openmpi", "mpich")
    assert d.variants["flavour"]["default"] == "any"
    assert d.variants["sanitizers"]["default"] == "none"
    assert set(d.variants["sanitizers"]["values"]) == {"none", "address", "thread"}
    specs = {spec: kw for spec, kw in d.depends}
    assert {"mpi", "hwloc", "cmake@3.20:", "pkgconfig"} <= set(specs)
    assert specs["openmpi"] == {"when": "flavour=openmpi"}
    assert specs["mpich"] == {"when": "flavour=mpich"}
    assert "c" not in specs  # before Spack 1.0 there is no language virtual
    _, d1 = load_recipe(monkeypatch, version=(1, 0, 0))
    assert ("c", {"type": "build"}) in d1.depends


class FakeSpec:
    def __init__(self, mpi_name, mpicc, sanitizers="none"):
        self.mpi = types.SimpleNamespace(name=mpi_name, mpicc=mpicc)
        self.sanitizers = sanitizers

    def __getitem__(self, name):
        assert name == "mpi"
        return self.mpi

    def satisfies(self, constraint):
        return constraint == f"sanitizers={self.sanitizers}"


@pytest.mark.parametrize("sanitizers,asan,tsan", [("none", "OFF", "OFF"),
                                                  ("address", "ON", "OFF"),
                                                  ("thread", "OFF", "ON")])
def test_cmake_args(monkeypatch, tmp_path, sanitizers, asan, tsan):
    module, _ = load_recipe(monkeypatch)
    package = module.Mcoll()
    # a Spack-built MPI: its bin/mpicc
    package.spec = FakeSpec("mpich", str(tmp_path / "mpich" / "bin" / "mpicc"), sanitizers)
    args = package.cmake_args()
    assert f"-DMCOLL_MPICC={tmp_path}/mpich/bin/mpicc" in args
    assert "-DMCOLL_MPI_NAME=mpich" in args
    assert f"-DMCOLL_SANITIZE={asan}" in args and f"-DMCOLL_TSAN={tsan}" in args
    assert "-DMCOLL_WERROR=OFF" in args


def test_debian_external_takes_the_suffixed_wrapper(monkeypatch, tmp_path):
    # An external MPI in /usr: bin/mpicc is an alternative, bin/mpicc.openmpi is its own.
    (tmp_path / "mpicc").touch()
    (tmp_path / "mpicc.openmpi").touch()
    module, _ = load_recipe(monkeypatch)
    package = module.Mcoll()
    package.spec = FakeSpec("openmpi", str(tmp_path / "mpicc"))
    assert f"-DMCOLL_MPICC={tmp_path}/mpicc.openmpi" in package.cmake_args()


@pytest.mark.skipif(not shutil.which("mpicc.mpich") or not shutil.which("mpiexec.mpich"),
                    reason="needs Debian's MPICH")
def test_wrapper_flavour_records_the_mpiexec_with_its_suffix(tmp_path):
    """What the recipe does with Debian's MPICH as an external: CMake given
    /usr/bin/mpicc.mpich records mpiexec.mpich for mcollrun, not the bare mpiexec (an
    alternative, Open MPI's when both are installed)."""
    wrapper = shutil.which("mpicc.mpich")
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tmp_path), f"-DMCOLL_MPICC={wrapper}",
                    "-DMCOLL_MPI_NAME=mpich"], check=True, capture_output=True, timeout=120)
    recorded = (tmp_path / "mpich" / "mpiexec").read_text().strip()
    assert recorded == str(Path(wrapper).parent / "mpiexec.mpich")
    assert (tmp_path / "mpich" / "kind").read_text().strip() == "mpich"


@pytest.mark.full
@pytest.mark.skipif(not shutil.which("mpicc.mpich") or not shutil.which("mpiexec.mpich"),
                    reason="needs Debian's MPICH")
def test_installed_wrapper_flavour_runs_under_installed_mcollrun(tmp_path):
    """A flavour from a compiler wrapper under its default name (mpich4), as a Spack
    install has it: the installed mcollrun finds its kind and mpiexec beside the library
    (before, only in a build tree: 'unknown MPI flavour')."""
    wrapper = shutil.which("mpicc.mpich")
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), f"-DMCOLL_MPICC={wrapper}"],
                   check=True, capture_output=True, timeout=120)
    (name,) = [p.name for p in build.iterdir() if (p / "kind").exists()]
    assert name.startswith("mpich")
    subprocess.run(["cmake", "--build", str(build), "-j2", "--target", f"mcoll_{name}",
                    f"mcoll-info_{name}", f"mcoll-bench_{name}"],
                   check=True, capture_output=True, timeout=600)
    subprocess.run(["cmake", "--install", str(build), "--prefix", str(prefix)], check=True,
                   capture_output=True, timeout=120)
    app = tmp_path / "app"
    subprocess.run([wrapper, str(ROOT / "tests" / "install" / "app.c"), "-o", str(app)],
                   check=True, capture_output=True, timeout=120)
    env = {"MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error", "MCOLL_BUILD_DIR": ""}
    result = run_job([str(prefix / "bin" / "mcollrun"), "-np", "2", str(app)], env, timeout=120)
    assert f"mcoll: report of rank 0 of 2 ({name})" in result.stderr, result.describe()
    check_passed(result, "install_app")
