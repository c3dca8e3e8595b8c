"""Slurm: `mcollrun --launcher srun` runs a program under mcoll as cluster users start
it, directly in an allocation and from a batch script (sbatch), on both MPIs (Open MPI
through PMIx, MPICH through PMI-2). Against a real single-node Slurm from Debian's
packages (slurmctld, slurmd, munge) that the test starts for this machine
(tests/slurm/minislurm.sh, its own key, ports and state in a temporary folder) and
stops afterwards; skipped with the reason when the services cannot start."""

import os
import shutil
import socket
import subprocess
import time

import pytest

import mpijob
from mpijob import ROOT, Result, run_job
from test_install import APP, check_taken_over

BUILD = mpijob.find_build("build")
MINISLURM = ROOT / "tests" / "slurm" / "minislurm.sh"
MCOLLRUN = ROOT / "bin" / "mcollrun"

pytestmark = [
    mpijob.FULL,
    pytest.mark.skipif(not shutil.which("slurmctld") or not shutil.which("munged"),
                       reason="no Slurm/munge (apt-get install slurm-wlm munge)"),
]


def free_port_pair():
    """A port p with p + 1 free too (slurmctld, slurmd)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    pytest.skip("no free pair of ports for slurmctld and slurmd")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """SLURM_CONF of a running single-node Slurm; stopped after the module."""
    folder = tmp_path_factory.mktemp("slurm")
    env = dict(os.environ, MINISLURM_PORT=str(free_port_pair()))
    up = subprocess.run([str(MINISLURM), "up", str(folder)], capture_output=True, text=True,
                        env=env, timeout=60)
    try:
        if up.returncode != 0:
            logs = "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')[-800:]}"
                           for log in sorted(folder.glob("*.log")))
            pytest.skip(f"Slurm did not start: {up.stderr.strip()}{logs}")
        yield up.stdout.strip()
    finally:
        subprocess.run([str(MINISLURM), "down", str(folder)], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def apps(tmp_path_factory):
    """The install test's program, built with each MPI's compiler wrapper."""
    folder = tmp_path_factory.mktemp("apps")
    built = {}
    for flavour in BUILD.flavours:
        built[flavour] = folder / f"app-{flavour}"
        subprocess.run([f"mpicc.{flavour}", str(APP), "-o", str(built[flavour])], check=True,
                       capture_output=True, timeout=120)
    return built


def flavours():
    return [mpijob.flavour_param(f) for f in mpijob.FLAVOURS]


def vader_folder(tmp_path):
    """Open MPI 4.1 started by srun leaves its shared-memory segments (vader_segment.*)
    behind (mpiexec's daemons remove them): the tests' go to a temporary folder of
    their own instead of /dev/shm."""
    folder = tmp_path / "shm"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("flavour", flavours())
def test_srun_runs_a_program_under_mcoll(slurm, apps, flavour, tmp_path):
    shm = vader_folder(tmp_path)
    env = {"SLURM_CONF": slurm, "MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "error",
           "OMPI_MCA_btl_vader_backing_directory": str(shm)}
    result = run_job([str(MCOLLRUN), "--launcher", "srun", "-n", "2", str(apps[flavour])], env,
                     timeout=120)
    assert f"mcoll: report of rank 0 of 2 ({flavour})" in result.stderr, result.describe()
    check_taken_over(result)


@pytest.mark.parametrize("flavour", flavours())
def test_batch_script_with_srun(slurm, apps, flavour, tmp_path):
    """The documented batch script (docs/usage.md): two tasks, mcollrun --launcher srun
    without a task count (srun takes the allocation's)."""
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n"
                      "#SBATCH --ntasks=2\n"
                      "#SBATCH --time=2\n"
                      f"#SBATCH --output={out}\n"
                      f"#SBATCH --error={err}\n"
                      "export MCOLL_VERBOSE=1 MCOLL_FALLBACK=error\n"
                      f"export OMPI_MCA_btl_vader_backing_directory={vader_folder(tmp_path)}\n"
                      f"{MCOLLRUN} --launcher srun {apps[flavour]}\n")
    argv = ["sbatch", "--wait", f"--chdir={tmp_path}", str(script)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCOLL_", "SLURM_"))}
    env["SLURM_CONF"] = slurm
    start = time.monotonic()
    job = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
    result = Result(argv, {"SLURM_CONF": slurm}, job.returncode,
                    job.stdout + (out.read_text() if out.exists() else ""),
                    job.stderr + (err.read_text() if err.exists() else ""),
                    time.monotonic() - start)
    assert result.returncode == 0, result.describe()
    assert f"mcoll: report of rank 0 of 2 ({flavour})" in result.stderr, result.describe()
    check_taken_over(result)


def test_unknown_launcher_is_refused():
    result = subprocess.run([str(MCOLLRUN), "--launcher", "qsub", "-n", "2", "true"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "unknown launcher 'qsub'" in result.stderr
