# Spack recipe of mcoll: `spack repo add packaging/spack`, then build from a checkout
# (`spack dev-build -d <checkout> mcoll@0.1.0 ^openmpi`) or from a mirror holding
# mcoll-0.1.0.tar.gz (docs/usage.md, "Spack").
import os

import spack
from spack.package import *


class Mcoll(CMakePackage):
    """mcoll takes over the collective operations of an unmodified MPI program through
    the MPI profiling interface (PMPI) and runs them with node-aware algorithms (shared
    memory, single copy, hierarchical steps between nodes); mcollrun runs a program with
    it preloaded, or link -lmcoll ahead of the MPI library."""

    maintainers("mcoll")
    license("UNKNOWN")

    # No public release yet: the source comes from a checkout (dev-build, develop) or
    # a local mirror; a version without a checksum is allowed there.
    version("0.1.0")

    variant(
        "flavour",
        default="any",
        values=("any", "openmpi", "mpich"),
        multi=False,
        description="the MPI mcoll is built for: any provider of mpi, or one pinned",
    )
    variant(
        "sanitizers",
        default="none",
        values=("none", "address", "thread"),
        multi=False,
        description="a sanitizer build for mcoll's own tests (none for production)",
    )

    if spack.spack_version_info[:2] >= (1, 0):  # compilers are dependencies from 1.0 on
        depends_on("c", type="build")
    depends_on("cmake@3.20:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("hwloc")
    depends_on("mpi")
    depends_on("openmpi", when="flavour=openmpi")
    depends_on("mpich", when="flavour=mpich")

    def mpi_wrapper(self):
        """The MPI's C compiler wrapper; for an external MPI from Debian's packages the
        one with the MPI's suffix (mpicc.mpich), as the bare mpicc in /usr/bin is an
        alternative that may be the other MPI's."""
        mpi = self.spec["mpi"]
        suffixed = join_path(os.path.dirname(mpi.mpicc), f"mpicc.{mpi.name}")
        return suffixed if os.path.exists(suffixed) else mpi.mpicc

    def cmake_args(self):
        spec = self.spec
        return [
            # One flavour, named after the MPI package (openmpi, mpich, ...): installed
            # as lib/mcoll/<name>/libmcoll.so with its mpiexec recorded for mcollrun.
            self.define("MCOLL_MPICC", self.mpi_wrapper()),
            self.define("MCOLL_MPI_NAME", spec["mpi"].name),
            self.define("MCOLL_SANITIZE", spec.satisfies("sanitizers=address")),
            self.define("MCOLL_TSAN", spec.satisfies("sanitizers=thread")),
            self.define("MCOLL_WERROR", False),
        ]

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_installed_mcollrun(self):
        """mcollrun --info on one rank: the installed library loads under the MPI."""
        mcollrun = Executable(join_path(self.prefix.bin, "mcollrun"))
        mcollrun("--mpi", self.spec["mpi"].name, "--info", "-n", "1")
