"""Algorithm descriptors: every algorithm's restrictions are data in
its record (coll/registry.h), printed by mcoll-info. This test reads them from there,
forces each algorithm of a few collectives (MCOLL_ALG_<COLL>) in situations where
each restriction holds or not, and checks in the MCOLL_VERBOSE report that

- where the forced algorithm's restrictions hold, exactly it ran, every call, and
  nothing fell back;
- where one does not hold, it never ran: every call is a reported fallback
  ("forced algorithm cannot run here ...") naming a restriction that does not hold,
  and the normal choice ran (the call is still counted once, under what ran).

Before the descriptors, such calls swapped silently to another algorithm (bcast cma
-> shm_pipeline without CMA, shm_slot -> shm_pipeline above a slot, alltoallv bruck
-> shm_direct, a forced reduction -> p2p ...), and the report could not tell."""

import functools
import re

import pytest

import mpijob
from mpijob import mpiexec_argv, parse_forced_denied, parse_verbose_report, run_job
from mpijob import BASE_ENV, BUILD, flavour_param

JOB_TIMEOUT = 180
CALLS = ["-n", "10", "-w", "0", "-r", "1", "-c"]  # 10 checked mcoll calls per job


@functools.lru_cache(maxsize=None)
def restrictions(flavour):
    return mpijob.mcoll_restrictions(BUILD, flavour)


@functools.lru_cache(maxsize=None)
def cma_works(flavour):
    """Whether single copy works on this host (mcoll-info's hierarchy says), 2 ranks."""
    result = run_job([str(mpijob.MCOLLRUN), "--mpi", flavour, "--build", str(BUILD.path), "--info",
                      "-np", "2"], timeout=60)
    return "single copy (CMA) between ranks of a node: yes" in result.stdout


ALL = {"cma", "slot", "uniform", "bruck_fits", "order", "elem_fits", "pair_lines", "splits"}

# (collective, bytes, extra environment, restrictions that hold there). Every
# collective here is one mcoll-bench does not use itself (it times with barrier and
# allreduce), so the report's counts are the benchmarked calls alone.
SITUATIONS = {
    "bcast-8": ("bcast", "8", {}, ALL),
    "bcast-64K": ("bcast", "64K", {}, ALL - {"slot"}),  # slots hold MCOLL_BCAST_SLOT_MAX=512
    "bcast-8-nocma": ("bcast", "8", {"MCOLL_CMA": "0"}, ALL - {"cma"}),
    # (blocks of 1 KiB: more than a pair's inline lines hold)
    "alltoall-1K": ("alltoall", "1K", {}, ALL - {"pair_lines"}),
    "alltoallv-1K": ("alltoallv", "1K", {}, ALL - {"uniform", "bruck_fits", "pair_lines"}),
    "allgather-64K-nocma": ("allgather", "64K", {"MCOLL_CMA": "0"}, ALL - {"cma"}),
    "reduce-64K": ("reduce", "64K", {}, ALL),
    "reduce-64K-nocma": ("reduce", "64K", {"MCOLL_CMA": "0"}, ALL - {"cma"}),
    # 4 ranks on 2 nodes (a rank alone on its node needs no CMA: nothing to read)
    "scatter-2-nodes-nocma": ("scatter", "64K", {"MCOLL_CMA": "0", "MCOLL_TOPO": "nodes=2"},
                              ALL - {"cma"}),
}
PER_FLAVOUR = {
    "openmpi": ["bcast-8", "bcast-64K", "bcast-8-nocma", "alltoall-1K", "alltoallv-1K",
                "reduce-64K-nocma"],
    "mpich": ["bcast-64K", "bcast-8-nocma", "alltoallv-1K", "allgather-64K-nocma", "reduce-64K",
              "scatter-2-nodes-nocma"],
}


def cases():
    return [flavour_param(flavour, name) for flavour, names in PER_FLAVOUR.items() for name in names]


def test_info_prints_restrictions():
    if not BUILD.flavours:
        pytest.skip("build/: no flavour built")
    for flavour in BUILD.flavours:
        needs = restrictions(flavour)
        algs = mpijob.mcoll_algorithms(BUILD, flavour)
        # one record per registered algorithm, restrictions from the known set
        assert {c: set(a) for c, a in needs.items()} == {c: set(a) for c, a in algs.items()}
        for coll, by_alg in needs.items():
            for alg, need in by_alg.items():
                assert need <= ALL, (coll, alg, need)
        assert needs["bcast"]["cma"] == {"cma"} and needs["bcast"]["shm_slot"] == {"slot"}
        assert "uniform" in needs["alltoallv"]["bruck"]


@pytest.mark.full
@pytest.mark.parametrize("flavour,situation", cases())
def test_forced_runs_exactly_or_reports(flavour, situation):
    coll, size, env, holds = SITUATIONS[situation]
    if "cma" in holds and not cma_works(flavour):
        holds = holds - {"cma"}  # this host cannot read peers: CMA restrictions fail
    np = 4 if "MCOLL_TOPO" in env else 2
    program = BUILD.bin(flavour, "mcoll-bench")
    for alg, needs in sorted(restrictions(flavour)[coll].items()):
        job_env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "warn", **env,
                   f"MCOLL_ALG_{coll.upper()}": alg}
        result = run_job(mpiexec_argv(flavour, np, program, ["-C", coll, "-b", size, "-e", size, *CALLS]),
                         job_env, JOB_TIMEOUT)
        assert result.returncode == 0, result.describe()
        counts = parse_verbose_report(result.stderr).get(coll, {})
        calls = counts.get("calls", 0)
        assert calls > 0, f"{coll}: no calls reported\n{result.describe()}"
        fallbacks = dict(re.findall(r'^mcoll: ' + coll + r' fallback "([^"]+)"=(\d+)$', result.stderr, re.M))
        denied = parse_forced_denied(result.stderr).get((coll, alg), {})
        unmet = needs - holds
        if not unmet:
            assert counts.get(alg) == calls and counts.get("fallback") == 0 and not fallbacks, (
                f"{coll} forced {alg} (needs {needs or '-'}, all hold): {counts} {fallbacks}\n"
                f"{result.describe()}")
        else:
            assert counts.get(alg, 0) == 0, (
                f"{coll} forced {alg} ran although {unmet} does not hold: {counts}\n{result.describe()}")
            assert fallbacks == {mpijob.FORCED_FALLBACK: str(calls)}, (
                f"{coll} forced {alg}: expected {calls} reported fallbacks: {fallbacks}\n{result.describe()}")
            assert sum(denied.values()) == calls and set(denied) <= unmet, (
                f"{coll} forced {alg}: denied for {denied}, unmet {unmet}\n{result.describe()}")
            ran = {a: n for a, n in counts.items() if a not in ("calls", "fallback") and n}
            assert sum(ran.values()) == calls, f"{coll}: the normal choice did not run: {counts}"
            assert "forced algorithm " + alg + " cannot run here" in result.stderr  # warned


@pytest.mark.parametrize("flavour", [flavour_param("openmpi"), flavour_param("mpich")])
def test_bcast_selection_by_size(flavour):
    """bcast's one selection step (mcoll__bcast_select) keeps the thresholds' choice at
    every size where the user set one of them (MCOLL_BCAST_CMA_MIN here: then the rules
    step aside, test_rules.py has the rules' side): 2 ranks, a core each, no levels: one
    area slot up to 512 B, the ring at 4 KiB, single copy from 8 KiB below 1 MiB, the
    ring again at 2 MiB."""
    if not cma_works(flavour):
        pytest.skip("single copy does not work on this host")
    program = BUILD.bin(flavour, "mcoll-bench")
    sweep = ["-C", "bcast", "-b", "8", "-e", "2M", "-f", "8", *CALLS]  # 8 64 512 4K 32K 256K 2M
    result = run_job(mpiexec_argv(flavour, 2, program, sweep),
                     {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_CORES": "64",
                      "MCOLL_BCAST_CMA_MIN": "8K"}, JOB_TIMEOUT)
    assert result.returncode == 0, result.describe()
    counts = parse_verbose_report(result.stderr).get("bcast", {})
    n = counts.get("calls", 0) // 7  # calls per size (the bench adds a checked one)
    expected = {"calls": 7 * n, "shm_slot": 3 * n, "shm_pipeline": 2 * n, "cma": 2 * n, "shm_tree": 0,
                "fallback": 0}
    assert n >= 10 and counts == expected, f"{counts}\n{result.describe()}"


@pytest.mark.full
@pytest.mark.parametrize("flavour", [flavour_param("openmpi"), flavour_param("mpich")])
def test_forced_between_nodes(flavour):
    """Algorithms between nodes are registered per level with restrictions as data:
    MCOLL_ALG_REDUCE_INTER=rabenseifner on 3 fake nodes runs exactly it where the
    vector splits (64 KiB), and where it does not (one 4-byte element for 2 leaders
    of the power-of-two part) every call is a reported fallback naming "splits" and
    the binomial tree runs; the report counts what ran between nodes."""
    needs = restrictions(flavour)["reduce.inter"]
    assert needs == {"binomial": set(), "rabenseifner": {"splits"}}, needs
    program = BUILD.bin(flavour, "mcoll-bench")
    env = {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_FALLBACK": "warn", "MCOLL_TOPO": "nodes=3",
           "MCOLL_ALG_REDUCE_INTER": "rabenseifner"}
    for size, splits in (("64K", True), ("4", False)):
        result = run_job(mpiexec_argv(flavour, 5, program, ["-C", "reduce", "-b", size, "-e", size, *CALLS]),
                         env, JOB_TIMEOUT)
        assert result.returncode == 0, result.describe()
        calls = parse_verbose_report(result.stderr)["reduce"]["calls"]
        inter = mpijob.parse_inter_report(result.stderr).get("reduce", {})
        denied = parse_forced_denied(result.stderr).get(("reduce.inter", "rabenseifner"), {})
        assert inter.get("calls") == calls, f"{inter} vs {calls} calls\n{result.describe()}"
        if splits:
            assert inter == {"calls": calls, "binomial": 0, "rabenseifner": calls} and not denied, (
                f"{inter} {denied}\n{result.describe()}")
        else:
            assert inter == {"calls": calls, "binomial": calls, "rabenseifner": 0}, result.describe()
            assert denied == {"splits": calls}, f"{denied}\n{result.describe()}"
            assert "reduce.inter: forced algorithm rabenseifner cannot run here (needs splits" in result.stderr
