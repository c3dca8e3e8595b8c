"""mcoll across real (if virtual) hosts: network namespaces on a bridge made by
scripts/testhosts.sh, each MPI proxy with its own /dev/shm and hostname, launched by
the host MPI's own launcher through an rsh agent, TCP between hosts. The hierarchy
comes from MPI_COMM_TYPE_SHARED with no MCOLL_TOPO override.

Checked: each host is a separate node to the host MPI and to mcoll (hostname,
/dev/shm, network namespace per host; mcoll-info's hierarchy), a file left in a
host's /dev/shm is reported, and test_coll (blocking) and test_nbc (non-blocking;
persistent on MPICH) pass across 2 and 3 hosts with uneven ranks per host on both
MPIs with MCOLL_FALLBACK=error. Afterwards no namespace, veth, bridge or
/dev/shm/mcoll-* file is left.

Needs root (network namespaces, veth, tmpfs mounts): skipped otherwise, with the
reason `testhosts.sh check` gives; the fake-node tests (MCOLL_TOPO) cover the rest.
"""

import fcntl
import os
import re
import subprocess
import zlib
from pathlib import Path

import pytest

import mpijob
from mpijob import ROOT, check_passed, run_job

# Test hosts (network namespaces, root only) are for the full tier.
pytestmark = [pytest.mark.full, pytest.mark.hosts]
TESTHOSTS = ROOT / "scripts" / "testhosts.sh"
BUILD = mpijob.find_build("build")
BASE_ENV = {"MCOLL_FALLBACK": "error"}
JOB_TIMEOUT = 90
NHOSTS = 3
LOCK = Path("/run/mcoll-testhosts.lock")
# Host, namespace and link names start with the set's prefix (scripts/testhosts.sh).
PREFIX = os.environ.get("MCOLL_TESTHOSTS_PREFIX", "mch")


def leftovers():
    """Namespaces, links and mcoll files of the test hosts still present."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {
        "netns": re.findall(rf"^({re.escape(PREFIX)}\d+)\b", netns, re.M),
        "links": re.findall(rf"^\d+: ({re.escape(PREFIX)}\w+)[@:]", links, re.M),
        "shm": sorted(p.name for p in Path("/dev/shm").glob("mcoll-*")
                      if p.name not in BEFORE_SHM),
    }


BEFORE_SHM = set()


@pytest.fixture(scope="module")
def hosts():
    """NHOSTS test hosts for this module, removed afterwards (also after a failure or
    Ctrl-C; a stale set of a killed run is removed by `up`). A lock keeps two test
    runs on this machine from sharing (and removing) each other's hosts."""
    check = subprocess.run([TESTHOSTS, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        pytest.skip(f"cannot make test hosts: {check.stdout.strip() or check.stderr.strip()}")
    BEFORE_SHM.update(mpijob.mcoll_shm_files())
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            subprocess.run([TESTHOSTS, "up", str(NHOSTS)], check=True, capture_output=True, text=True)
            yield NHOSTS
        finally:
            subprocess.run([TESTHOSTS, "down"], capture_output=True, text=True)
    left = leftovers()
    assert not any(left.values()), f"left behind by the test hosts: {left}"


def flavour_param(flavour, ranks):
    marks = []
    if flavour not in BUILD.flavours:
        marks = [pytest.mark.skip(reason=f"build/{flavour}/lib/libmcoll.so not built")]
    return pytest.param(flavour, ranks, marks=marks, id=f"{flavour}-{ranks.replace(',', '+')}")


# The host set the fixture made (scripts/testhosts.sh reads these), which run_job drops
# with the other MCOLL_ variables of this process's environment.
HOST_SET_ENV = {k: os.environ[k] for k in ("MCOLL_TESTHOSTS_PREFIX", "MCOLL_TESTHOSTS_SUBNET")
                if k in os.environ}


def run_on_hosts(flavour, ranks, program, args=(), env=None, native=False, timeout=JOB_TIMEOUT,
                 finished=None):
    """One job across the hosts. MPICH 4.0 over UCX 1.13's TCP often hangs in
    MPI_Finalize (one rank in UCX's disconnect, the others in the PMI barrier), also
    with MCOLL_DISABLE=1 and without mcoll (openucx/ucx#8738): on MPICH a job killed
    at the timeout counts as finished when the program printed the line that says so
    (regex `finished`; written before MPI_Finalize), and is marked finalize_hang."""
    argv = [str(TESTHOSTS), "run", "--mpi", flavour, "--ranks", ranks]
    if native:
        argv.append("--native")
    argv += [str(program), *map(str, args)]
    env = {**HOST_SET_ENV, **(env or {})}
    if flavour != "mpich" or finished is None:
        result = run_job(argv, env or {}, timeout)
        result.finalize_hang = False
        return result
    result = run_job(argv, env or {}, timeout, expect_timeout=True)
    result.finalize_hang = result.seconds >= timeout
    if result.finalize_hang and not re.search(finished, result.stdout, re.M):
        pytest.fail(f"job did not finish within {timeout} s (killed)\n{result.describe()}")
    return result


def check_summary(result, program):
    """The program's own verdict (check_passed), where MPICH's finalize hang (see
    run_on_hosts) leaves the exit code out of it."""
    if not result.finalize_hang:
        return check_passed(result, program)
    summary = re.search(rf"^{program}: (\d+) checks, 0 errors$", result.stdout, re.M)
    assert summary, result.describe()
    return int(summary.group(1))


def seed_for(request):
    return int(os.environ.get("MCOLL_TEST_SEED") or zlib.crc32(request.node.name.encode()))


PROBE = """echo "rank=${OMPI_COMM_WORLD_RANK:-$PMI_RANK} host=$(hostname) \
shm=$(stat -c %d /dev/shm) net=$(readlink /proc/self/ns/net)"
"""


@pytest.mark.parametrize("flavour,ranks", [flavour_param("openmpi", "2,1,1"), flavour_param("mpich", "1,2,1")])
def test_hosts_are_nodes(hosts, tmp_path, flavour, ranks):
    """Ranks of one host share a hostname, a /dev/shm and a network namespace, which
    no other host shares; mcoll finds the same nodes (no MCOLL_TOPO)."""
    probe = tmp_path / "probe.sh"
    probe.write_text("#!/bin/sh\n" + PROBE)
    probe.chmod(0o755)
    result = run_on_hosts(flavour, ranks, probe, native=True)
    assert result.returncode == 0, result.describe()
    seen = {}
    for m in re.finditer(r"^rank=(\d+) host=(\S+) shm=(\d+) net=(\S+)$", result.stdout, re.M):
        seen[int(m.group(1))] = m.group(2, 3, 4)
    counts = [int(c) for c in ranks.split(",")]
    expected_hosts = [f"{PREFIX}{k + 1}" for k, c in enumerate(counts) for _ in range(c)]
    assert [seen.get(r, (None,))[0] for r in range(sum(counts))] == expected_hosts, result.describe()
    per_host = {}
    for host, shm, net in seen.values():
        per_host.setdefault(host, set()).add((shm, net))
    assert all(len(v) == 1 for v in per_host.values()), f"one host, several /dev/shm or netns: {per_host}"
    shms = [next(iter(v))[0] for v in per_host.values()]
    nets = [next(iter(v))[1] for v in per_host.values()]
    assert len(set(shms)) == len(shms) and len(set(nets)) == len(nets), per_host

    info = run_on_hosts(flavour, ranks, BUILD.bin(flavour, "mcoll-info"), finished=r"^hierarchy: ")
    assert info.finalize_hang or info.returncode == 0, info.describe()
    firsts = [sum(counts[:k]) for k in range(len(counts))]
    layout = ", ".join(f"{c} rank(s) from rank {f}" for c, f in zip(counts, firsts))
    assert f"hierarchy: {len(counts)} node(s) [{layout}]" in info.stdout, info.describe()


def test_leftover_reported(hosts, tmp_path):
    """A file a job leaves in a host's /dev/shm is reported (exit 3), with its host."""
    probe = tmp_path / "leave.sh"
    probe.write_text('#!/bin/sh\n[ "$OMPI_COMM_WORLD_RANK" = 1 ] && touch /dev/shm/mcoll-0-left-by-test\nexit 0\n')
    probe.chmod(0o755)
    result = run_on_hosts("openmpi", "1,1", probe, native=True)
    assert result.returncode == 3, result.describe()
    assert f"left in /dev/shm of {PREFIX}2" in result.stderr and "mcoll-0-left-by-test" in result.stderr, result.describe()


def test_holders_keep_no_caller_lock(hosts, tmp_path):
    """`flock LOCK testhosts.sh up N` frees LOCK when `up` returns: the namespace
    holders it leaves running keep none of its descriptors (they kept a benchmark lock
    held for as long as the hosts were up)."""
    lock = tmp_path / "caller.lock"
    lock.touch()
    up = subprocess.run(["flock", "-x", str(lock), str(TESTHOSTS), "up", str(hosts)],
                        capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    free = subprocess.run(["flock", "-n", "-x", str(lock), "true"])
    assert free.returncode == 0, "the test hosts' holders keep the caller's lock"
    for pidfile in Path(f"/run/mcoll-testhosts-{PREFIX}").glob("*.pid"):
        fds = sorted(int(fd.name) for fd in Path(f"/proc/{pidfile.read_text().strip()}/fd").iterdir())
        assert fds == [0, 1, 2], (pidfile.name, fds)


# Uneven ranks per host over 2 and 3 hosts. MPICH 4.0 spins without yielding, so its
# larger layouts get fewer cases (as in test_mpi_coll / test_nbc).
LAYOUTS = [("openmpi", "2,1"), ("openmpi", "1,3"), ("openmpi", "3,2,1"),
           ("mpich", "2,1"), ("mpich", "1,3"), ("mpich", "2,1,1")]


def coll_args(flavour, ranks):
    np = sum(int(c) for c in ranks.split(","))
    if flavour == "openmpi" or np <= 3:
        return ["--quick", "--iters", "1"]
    return ["--quick", "--iters", "1", "--burst", "20", "--max-bytes", "2M"]


def nbc_args(flavour, ranks):
    np = sum(int(c) for c in ranks.split(","))
    if flavour == "openmpi" or np <= 3:
        return ["--groups", "8", "--disorder", "3", "--max-bytes", "1M"]
    return ["--groups", "4", "--disorder", "2", "--comms", "world,reversed", "--max-bytes", "256K"]


@pytest.mark.parametrize("flavour,ranks", [flavour_param(f, r) for f, r in LAYOUTS])
def test_coll_multihost(hosts, request, flavour, ranks):
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, ranks) + ["--seed", seed_for(request)]
    result = run_on_hosts(flavour, ranks, program, args, {**BASE_ENV, "MCOLL_VERBOSE": "1"},
                          finished=r"^test_coll: \d+ checks, 0 errors$")
    check_summary(result, "test_coll")
    report = mpijob.parse_verbose_report(result.stderr)
    assert report.get("allreduce", {}).get("calls", 0) > 0, f"mcoll did not run\n{result.describe()}"


@pytest.mark.parametrize("flavour,ranks", [flavour_param(f, r) for f, r in LAYOUTS])
def test_nbc_multihost(hosts, request, flavour, ranks):
    program = BUILD.bin(flavour, "mcoll-test-nbc")
    args = nbc_args(flavour, ranks) + ["--seed", seed_for(request)]
    result = run_on_hosts(flavour, ranks, program, args, BASE_ENV, finished=r"^test_nbc: \d+ checks, 0 errors$")
    check_summary(result, "test_nbc")
    forms = re.search(r"^test_nbc: forms:([a-z ]*),", result.stdout, re.M)
    assert forms and "nonblocking" in forms.group(1), result.describe()
    if flavour == "mpich":
        assert "persistent" in forms.group(1), result.describe()


@pytest.mark.parametrize("flavour,ranks", [flavour_param("openmpi", "2,1,2"), flavour_param("mpich", "1,2,1")])
def test_alltoall_grid_rsend_multihost(hosts, request, flavour, ranks):
    """Alltoall(v,w) with grid_rsend forced between real hosts (MPI_Rsend over TCP
    after the grid's arrival messages): test_coll's checks, and the report says
    grid_rsend ran every inter-node call and sent control messages."""
    program = BUILD.bin(flavour, "mcoll-test-coll")
    args = coll_args(flavour, ranks) + ["--colls", "alltoall,alltoallv,alltoallw", "--seed", seed_for(request)]
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_ALG_ALLTOALL_INTER": "grid_rsend",
           "MCOLL_ALG_ALLTOALLV_INTER": "grid_rsend", "MCOLL_ALG_ALLTOALLW_INTER": "grid_rsend"}
    result = run_on_hosts(flavour, ranks, program, args, env, finished=r"^test_coll: \d+ checks, 0 errors$")
    check_summary(result, "test_coll")
    inter = mpijob.parse_inter_report(result.stderr)
    for coll in ("alltoall", "alltoallv", "alltoallw"):
        counts = inter.get(coll, {})
        assert counts.get("calls", 0) > 0 and counts.get("grid_rsend") == counts["calls"], (coll, counts)
        assert counts.get("control_msgs", 0) > 0, (coll, counts)


@pytest.mark.parametrize("flavour,ranks", [flavour_param("openmpi", "2,1,2"), flavour_param("mpich", "1,2,1")])
def test_bcast_first_arrival_multihost(hosts, request, flavour, ranks):
    """Bcast with first_arrival forced between real hosts (the CP bcast: each host's
    first rank to arrive leads it and announces itself to the root over TCP; the root's
    receives from the other hosts' ranks that did not lead are cancelled): test_coll's
    checks, blocking and non-blocking, and the report says first_arrival ran every
    inter-node call with its announcements counted."""
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_ALG_BCAST_INTER": "first_arrival"}
    for program_name in ("mcoll-test-coll", "mcoll-test-nbc"):
        program = BUILD.bin(flavour, program_name)
        name = program_name.replace("mcoll-", "").replace("-", "_")
        if program_name == "mcoll-test-coll":
            args = coll_args(flavour, ranks) + ["--colls", "bcast", "--seed", seed_for(request)]
        else:
            args = nbc_args(flavour, ranks) + ["--colls", "bcast", "--seed", seed_for(request)]
        result = run_on_hosts(flavour, ranks, program, args, env, finished=rf"^{name}: \d+ checks, 0 errors$")
        check_summary(result, name)
        counts = mpijob.parse_inter_report(result.stderr).get("bcast", {})
        if program_name == "mcoll-test-coll":
            assert counts.get("calls", 0) > 0 and counts.get("first_arrival") == counts["calls"], counts


def first_arrival_random_counts(flavour, ranks, extra_env):
    """40 bcasts under random arrival (tests/mpi/test_first_arrival.c --random): every
    byte right on every rank, the job ended; returns the bcast's inter-node counts."""
    program = BUILD.bin(flavour, "mcoll-test-first-arrival")
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", **extra_env}
    result = run_on_hosts(flavour, ranks, program, ["--random", "2000", "--calls", "40"], env,
                          finished=r"^random checks \d+ errors 0$")
    nprocs = sum(int(n) for n in ranks.split(","))
    checks = re.search(r"^random checks (\d+) errors (\d+)$", result.stdout, re.M)
    assert checks and int(checks.group(2)) == 0 and int(checks.group(1)) == 40 * nprocs, result.describe()
    assert result.finalize_hang or result.returncode == 0, result.describe()
    return mpijob.parse_inter_report(result.stderr).get("bcast", {})


@pytest.mark.parametrize("flavour,ranks", [flavour_param(f, r) for f in ("openmpi", "mpich")
                                           for r in ("1,1,1", "2,2,2")])
def test_bcast_first_arrival_random_skew_multihost(hosts, flavour, ranks):
    """first_arrival between real hosts under random arrival (each rank waits its own
    delay, uniform in [0, 2 ms), before every call; roots and sizes change, pieced
    sizes too; tests/mpi/test_first_arrival.c --random): every byte right on every
    rank at 1 and 2 ranks per host, first_arrival ran every inter-node call, and at 2
    ranks per host another rank than local rank 0 led some calls (the first to
    arrive)."""
    counts = first_arrival_random_counts(flavour, ranks, {"MCOLL_ALG_BCAST_INTER": "first_arrival"})
    assert counts.get("calls", 0) > 0 and counts.get("first_arrival") == counts["calls"], counts
    if ranks == "2,2,2":
        assert counts.get("other_leader", 0) > 0, counts


@pytest.mark.parametrize("flavour,ranks", [flavour_param(f, r) for f in ("openmpi", "mpich")
                                           for r in ("1,1,1", "2,2,2")])
def test_bcast_first_arrival_default_multihost(hosts, flavour, ranks):
    """The built-in choice between test hosts (nodes sharing one kernel's cores), nothing
    forced: under Open MPI at 3 hosts of 1 rank, first_arrival for every call of whole
    256 KiB pieces (1 MiB + 3, 1 of the 5 sizes of test_first_arrival's random mode: 8 of
    40 calls), the fixed leader for the others; the fixed leader for every call under
    MPICH and at 2 ranks per host (3 hosts: bench/records/net16). Every byte right under
    random arrival."""
    counts = first_arrival_random_counts(flavour, ranks, {})
    chosen = 8 if (flavour, ranks) == ("openmpi", "1,1,1") else 0
    assert counts.get("calls") == 40 and counts.get("first_arrival", 0) == chosen, counts
    assert counts.get("binomial", 0) == 40 - chosen, counts


@pytest.mark.parametrize("flavour,ranks", [flavour_param("openmpi", "2,1,2"), flavour_param("mpich", "1,2,1")])
def test_bcast_push_multihost(hosts, request, flavour, ranks):
    """Bcast with push forced between real hosts (the root sends to every rank of the
    other hosts, which receive without a node step): test_coll's and test_nbc's checks
    (every root, pieced and unpieced sizes), and the report says push ran every
    inter-node call."""
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_ALG_BCAST_INTER": "push"}
    for program_name in ("mcoll-test-coll", "mcoll-test-nbc"):
        program = BUILD.bin(flavour, program_name)
        name = program_name.replace("mcoll-", "").replace("-", "_")
        make_args = coll_args if program_name == "mcoll-test-coll" else nbc_args
        args = make_args(flavour, ranks) + ["--colls", "bcast", "--seed", seed_for(request)]
        result = run_on_hosts(flavour, ranks, program, args, env, finished=rf"^{name}: \d+ checks, 0 errors$")
        check_summary(result, name)
        if program_name == "mcoll-test-coll":
            counts = mpijob.parse_inter_report(result.stderr).get("bcast", {})
            assert counts.get("calls", 0) > 0 and counts.get("push") == counts["calls"], counts


@pytest.mark.parametrize("flavour,ranks", [flavour_param("openmpi", "2,1"), flavour_param("mpich", "2,1")])
def test_calibrate_measures_the_link_between_hosts(hosts, tmp_path, flavour, ranks):
    """mcoll-bench --calibrate across 2 hosts (few rounds) writes the link's net section:
    ping-pong and back-to-back curves at the same 14 sizes, the rate, the exchange; the
    model loads it and prices no message below its bytes at that rate; the hosts found on
    one kernel (machine_cores)."""
    import json
    import sys
    sys.path.insert(0, str(ROOT / "tools" / "py"))
    from mcoll_model import machine as M
    out = tmp_path / "link.json"
    result = run_on_hosts(flavour, ranks, BUILD.bin(flavour, "mcoll-bench"),
                          ["--calibrate", "-r", "3", "-T", "1", "-o", out], native=True,
                          finished=r"^# mcoll-bench: done")
    assert result.finalize_hang or result.returncode == 0, result.describe()
    assert "# link, back to back one way" in result.stdout, result.describe()
    data = json.loads(out.read_text())
    net = data["net"]
    assert data["topology"]["nodes"] == 2
    # test hosts are namespaces of one kernel: the calibration says they share its cores
    assert data["topology"]["machine_cores"] == data["topology"]["cores_per_node"] == os.cpu_count()
    sizes = net["link_curve"]["sizes"]
    assert len(sizes) == 14 and sizes == net["stream_curve"]["sizes"] and sizes[-1] == 4 << 20
    assert all(t > 0 for t in net["link_curve"]["us"] + net["stream_curve"]["us"])
    assert net["nic_MBps"] > 0 and net["exchange_us"] > 0 and net["alpha_us"] > 0
    m = M.load(out, nodes=2, ranks_per_node=1)
    assert m.net_msg_us(1, 1 << 20) >= (1 << 20) / net["nic_MBps"] * (1 - 1e-9)
    assert m.net_exchange_us(1, 8) >= m.net_msg_us(1, 8)
