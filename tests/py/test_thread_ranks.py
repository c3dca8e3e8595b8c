"""Thread ranks (mcollrun --threads T, docs/threads.md): unmodified MPI programs run
as N/T processes of T thread ranks over the host MPI, on MPICH and on Open MPI. The
suite's correctness programs (collectives, datatypes, point-to-point) at 1-2 processes x
1-4 threads (more in the full tier), a program built with the MPI's own compiler
wrapper, the per-rank process state, a library with mutable globals, the refusals, a
call the runtime lacks stopping the job with its name, and the Fortran bindings."""

import os
import re
import shutil
import subprocess

import pytest

import mpijob
from mpijob import BUILD, FULL, check_passed, run_job
from test_fortran import BINDINGS, programs  # noqa: F401 (the fixture that builds them)

JOB_TIMEOUT = 180
FLAVOUR = "mpich"  # (the flavour of the tests that run on one MPI only)


def threads_built(flavour):
    return (BUILD.path / flavour / "bin" / "mcoll-threads").exists()


THREADS_BUILT = threads_built(FLAVOUR)
needs_threads = pytest.mark.skipif(not THREADS_BUILT, reason="build/mpich/bin/mcoll-threads not built")


def threads_argv(threads, np, program, args=(), flavour=FLAVOUR, extra=()):
    path = program if "/" in str(program) else BUILD.bin(flavour, program)
    return [str(mpijob.MCOLLRUN), "--mpi", flavour, "--threads", str(threads), *extra,
            "-np", str(np), str(path), *map(str, args)]


def layout(threads, np, full=False):
    return pytest.param(threads, np, id=f"{np // threads}x{threads}", marks=[FULL] if full else [])


def flavoured(layouts, openmpi_default=None):
    """(flavour, threads, np) for each MPI and layout: skipped where mcoll-threads is not
    built. Open MPI starts slower: in the default tier it runs only the layouts of
    openmpi_default (ids such as "2x2"; None: all of the default tier's)."""
    params = []
    for flavour in mpijob.FLAVOURS:
        skip = [] if threads_built(flavour) else \
            [pytest.mark.skip(reason=f"build/{flavour}/bin/mcoll-threads not built")]
        for p in layouts:
            full = FULL in p.marks or (flavour == "openmpi" and openmpi_default is not None
                                       and p.id not in openmpi_default)
            params.append(pytest.param(flavour, *p.values, id=f"{flavour}-{p.id}",
                                       marks=[*skip, *([FULL] if full else [])]))
    return params


def flavours():
    return flavoured([pytest.param(id="any")])


# (threads per process, ranks): processes x threads
LAYOUTS = [layout(2, 2), layout(2, 4), layout(4, 4), layout(1, 2, full=True),
           layout(3, 6, full=True), layout(4, 8, full=True), layout(8, 8, full=True),
           layout(15, 15, full=True), layout(15, 30, full=True)]


@pytest.mark.parametrize("flavour,threads,np", flavoured(LAYOUTS, openmpi_default=["2x2"]))
def test_coll_as_thread_ranks(flavour, threads, np, tmp_path):
    """Every blocking collective on world, split and dup communicators, checked against
    point-to-point; no patched program copy left behind."""
    result = run_job(threads_argv(threads, np, "mcoll-test-coll", ["--quick", "--count-api", "0"],
                                  flavour=flavour), {"TMPDIR": str(tmp_path)}, JOB_TIMEOUT)
    check_passed(result)
    assert list(tmp_path.iterdir()) == [], result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured(LAYOUTS, openmpi_default=["2x2", "1x4"]))
def test_p2p_as_thread_ranks(flavour, threads, np):
    result = run_job(threads_argv(threads, np, "mcoll-test-p2p", flavour=flavour), None, JOB_TIMEOUT)
    check_passed(result, "test_p2p")


def test_p2p_as_processes():
    """The point-to-point program is plain MPI: it passes under the host MPI too."""
    result = run_job(mpijob.mpiexec_argv(FLAVOUR, 3, BUILD.bin(FLAVOUR, "mcoll-test-p2p"), mcoll=False),
                     None, JOB_TIMEOUT)
    check_passed(result, "test_p2p")


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 4), layout(4, 4, full=True)]))
def test_datatypes_as_thread_ranks(flavour, threads, np):
    result = run_job(threads_argv(threads, np, "mcoll-test-datatypes", flavour=flavour), None,
                     JOB_TIMEOUT)
    assert result.returncode == 0 and "test_datatypes: 144 checks, 0 errors" in result.stdout, \
        result.describe()


@pytest.mark.parametrize("binding", list(BINDINGS))
@pytest.mark.parametrize("flavour", flavours())
def test_fortran_as_thread_ranks(programs, flavour, binding):  # noqa: F811
    """Fortran programs (mpif.h, use mpi, use mpi_f08): the MPI's Fortran library loads in
    each namespace and calls the stand-in (Open MPI's through MPI_*_f2c/_c2f)."""
    if (flavour, binding) not in programs:
        pytest.skip(f"no mpif90.{flavour} (gfortran)")
    result = run_job(threads_argv(2, 4, programs[flavour, binding], flavour=flavour), None, JOB_TIMEOUT)
    check_passed(result, "test_fortran")


FORTRAN_ATTR = """program attr
  use mpi
  implicit none
  integer :: ierr
  integer(kind=MPI_ADDRESS_KIND) :: value
  logical :: flag
  call MPI_Init(ierr)
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, value, flag, ierr)
  print *, 'tag_ub', value, flag
  call MPI_Finalize(ierr)
end program
"""


@pytest.mark.parametrize("flavour", flavours())
def test_missing_fortran_call_is_named(flavour, tmp_path):
    """A Fortran call whose path the runtime lacks (attributes: MPICH's MPII_Comm_get_attr,
    Open MPI's ompi_attr_get_aint) stops the job naming it; nothing faults on the way
    out (a rank's Fortran runtime reports faults with handlers of its own)."""
    compiler = shutil.which(f"mpif90.{flavour}")
    if not compiler:
        pytest.skip(f"no mpif90.{flavour} (gfortran)")
    (tmp_path / "attr.f90").write_text(FORTRAN_ATTR)
    subprocess.run([compiler, "-o", tmp_path / "attr", tmp_path / "attr.f90"], check=True)
    result = run_job(threads_argv(2, 4, tmp_path / "attr", flavour=flavour), None, JOB_TIMEOUT)
    assert result.returncode != 0, result.describe()
    assert re.search(r"called (MPII_Comm_get_attr|ompi_attr_get_aint).*, which thread ranks do "
                     r"not implement", result.stderr), result.describe()
    assert "SIGSEGV" not in result.stderr and "Segmentation" not in result.stderr, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_rank_state(flavour):
    """Each rank has its own globals, constructors, argv/getopt, environ, stdout buffer
    and atexit handlers (exit() after MPI_Finalize ends that rank only); the ranks of a
    process share the pid, the cwd and the signal handlers."""
    threads, np = 2, 4
    result = run_job(threads_argv(threads, np, "mcoll-test-rank-state", ["-t", "tagged", "-v"],
                                  flavour=flavour), None, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    states = {int(m.group(1)): m.group(0) for m in
              re.finditer(r"^state rank (\d+): .*$", result.stdout, re.M)}
    assert sorted(states) == list(range(np)), result.describe()
    pids = {}
    for rank, line in states.items():
        fields = dict(re.findall(r"([\w-]+) (\S+)", line.split(": ", 1)[1]))
        assert fields["counter"] == "1" and fields["constructed"] == "1", line
        assert fields["buffer"] == f"rank-{rank}", line
        assert fields["tag"] == "tagged" and fields["verbose"] == "1" and fields["argc"] == "4", line
        assert fields["env"] == "1", line
        assert fields["float"] == f"{2.5 * (rank + 1):.3f}", line
        assert fields["signal-shared"] == "1" and fields["cwd-shared"] == "1", line
        pids.setdefault(rank // threads, set()).add(fields["pid"])
    assert all(len(p) == 1 for p in pids.values()) and len(set.union(*pids.values())) == np // threads
    for rank in range(np):
        assert f"atexit rank {rank} counter 1" in result.stdout, result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(3, 6), layout(15, 15, full=True)]))
def test_library_globals(flavour, threads, np):
    """A linked library's mutable globals are per rank."""
    result = run_job(threads_argv(threads, np, "mcoll-test-lib-globals", flavour=flavour), None,
                     JOB_TIMEOUT)
    assert result.returncode == 0 and "test_lib_globals: 0 errors" in result.stdout, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_missing_call_is_named(flavour, tmp_path):
    """A call the runtime lacks (here MPI_Ibarrier) stops the job with its name; the
    aborted job leaves no program copy behind."""
    result = run_job(threads_argv(2, 4, "mcoll-test-nbc", flavour=flavour), {"TMPDIR": str(tmp_path)},
                     JOB_TIMEOUT)
    assert list(tmp_path.iterdir()) == [], result.describe()
    assert result.returncode != 0, result.describe()
    assert re.search(r"called MPI_I\w+, which thread ranks do not implement", result.stderr), \
        result.describe()
    assert "Segmentation" not in result.stderr, result.describe()


@pytest.fixture(scope="module")
def odd_programs(tmp_path_factory):
    """Per MPI: a static program, a non-PIE MPI program, and the point-to-point program
    built by the MPI's own compiler wrapper (as a user builds theirs)."""
    folder = tmp_path_factory.mktemp("threads-programs")
    (folder / "plain.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["cc", "-static", "-o", folder / "static", folder / "plain.c"], check=True)
    source = mpijob.ROOT / "tests" / "mpi" / "test_p2p.c"
    for flavour in mpijob.FLAVOURS:
        if shutil.which(f"mpicc.{flavour}"):
            subprocess.run([f"mpicc.{flavour}", "-no-pie", "-fno-pie", "-o", folder / f"nopie.{flavour}",
                            source], check=True)
            subprocess.run([f"mpicc.{flavour}", "-o", folder / f"wrapped.{flavour}", source], check=True)
    return folder


def odd_program(folder, name, flavour):
    path = folder / (name if name == "static" else f"{name}.{flavour}")
    if not path.exists():
        pytest.skip(f"mpicc.{flavour} not installed")
    return path


@pytest.mark.parametrize("flavour", flavours())
@pytest.mark.parametrize("program,threads,np,reason", [
    ("static", 2, 2, "statically linked"),
    ("nopie", 2, 2, "not position-independent"),
    ("mcoll-test-p2p", 16, 16, "from 1 to 15 thread ranks"),
    ("mcoll-test-p2p", 3, 4, "does not divide"),
])
def test_refusals(odd_programs, flavour, program, threads, np, reason):
    path = program if program.startswith("mcoll-") else odd_program(odd_programs, program, flavour)
    result = run_job(threads_argv(threads, np, path, flavour=flavour), None, 60)
    assert result.returncode == 2 and reason in result.stderr, result.describe()


@pytest.mark.parametrize("flavour", flavours())
def test_fallback_to_processes(odd_programs, flavour):
    """--threads-fallback runs a program that cannot be thread ranks as processes."""
    argv = threads_argv(2, 2, odd_program(odd_programs, "nopie", flavour), flavour=flavour,
                        extra=["--threads-fallback"])
    result = run_job(argv, None, JOB_TIMEOUT)
    check_passed(result, "test_p2p")
    assert "running as processes" in result.stderr, result.describe()


@pytest.mark.parametrize("flavour,threads,np", flavoured([layout(2, 4), layout(4, 8, full=True)]))
def test_wrapper_built_program(odd_programs, flavour, threads, np):
    """A program built by mpicc.<flavour> itself runs as thread ranks."""
    argv = threads_argv(threads, np, odd_program(odd_programs, "wrapped", flavour), flavour=flavour)
    check_passed(run_job(argv, None, JOB_TIMEOUT), "test_p2p")


from test_multihost import TESTHOSTS, hosts  # noqa: E402,F401 (the fixture: test hosts up)


@needs_threads
@pytest.mark.full
@pytest.mark.hosts
@pytest.mark.parametrize("program,args,summary", [
    ("mcoll-test-p2p", [], "test_p2p"),
    ("mcoll-test-coll", ["--quick", "--count-api", "0"], "test_coll"),
])
def test_across_test_hosts(hosts, program, args, summary):  # noqa: F811
    """2 test hosts (network namespaces, TCP between them) x 1 process x 2 thread ranks:
    messages between hosts go through the host MPI with their envelopes. MPICH over
    UCX's TCP may hang in MPI_Finalize (see test_multihost.run_on_hosts): a job killed
    at the timeout counts when the program printed its verdict."""
    threads = 2
    placement = subprocess.run([str(TESTHOSTS), "launcher-args", FLAVOUR, "1,1"], check=True,
                               capture_output=True, text=True).stdout.split("\n")[:-1]
    at = placement.index("-np") + 1
    placement[at] = str(int(placement[at]) * threads)
    argv = [str(mpijob.MCOLLRUN), "--mpi", FLAVOUR, "--threads", str(threads), *placement,
            str(BUILD.bin(FLAVOUR, program)), *args]
    # (run_job drops MCOLL_* variables: the rsh agent needs the test-host set's)
    env = {k: v for k, v in os.environ.items() if k.startswith("MCOLL_TESTHOSTS_")}
    result = run_job(argv, env, 120, expect_timeout=True)
    assert re.search(rf"^{summary}: \d+ checks, 0 errors$", result.stdout, re.M), result.describe()
