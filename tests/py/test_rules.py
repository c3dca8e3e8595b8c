"""Rules: `mcoll tune` writes them from the model, the library reads
them (src/coll/rules.c: MCOLL_RULES=<file>, else the built-in src/coll/rules_builtin.c)
and its choice functions follow them; MCOLL_ALG_<COLL> and parameters the user set win;
`mcollrun --info` shows the rules in force."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mpijob
from mpijob import mpiexec_argv, parse_inter_report, parse_verbose_report, run_job
from test_descriptors import cma_works
from mpijob import BASE_ENV, BUILD, flavour_param

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "py"))
from mcoll_model import cost, machine as M, tune  # noqa: E402

BUILTIN_C = ROOT / "src" / "coll" / "rules_builtin.c"
JOB_TIMEOUT = 180
CALLS = ["-n", "10", "-w", "0", "-r", "1", "-c"]  # 10 checked calls per size
FLAVOURS = [flavour_param("openmpi"), flavour_param("mpich")]


# ---- the generator (pure Python) ----

def test_tune_with_a_test_host_link_chooses_fewer_steps(tmp_path):
    """`mcoll tune --net LINK` with a link calibrated on test hosts (machine_cores: the
    hosts share 2 cores) prices each step's wait for a scheduler slice: at 3-4 nodes bcast
    stays binomial and allreduce recursive doubling up to MiBs (forced at 4x1 they won 10
    of 12 rows against scatter-allgather and Rabenseifner at 16-256 KiB,
    bench/records/cluster-4/); the same link without machine_cores switches at ~5 KiB."""
    runs = json.loads((ROOT / "bench" / "records" / "cluster-4" / "runs.json").read_text())["runs"]
    link = next(r["link"] for r in runs if r["rate"] == "1gbit" and r["mpi"] == "openmpi")
    assert link["topology"]["machine_cores"] == 2
    separate = json.loads(json.dumps(link))
    del separate["topology"]["machine_cores"]
    (tmp_path / "shared.json").write_text(json.dumps(link))
    (tmp_path / "separate.json").write_text(json.dumps(separate))

    def first_bytes(net, coll, alg):
        doc = tune.tune("here", (1,), (2, 4), colls=[coll], tolerance=0.0, prior=None, net=str(net))
        return min(r["bytes"][0] for r in doc["rules"]
                   if r["level"] == "inter" and r["nodes"][1] == 4 and r["alg"] == alg)
    for coll, alg in (("bcast", "scatter_allgather"), ("allreduce", "rabenseifner")):
        assert first_bytes(tmp_path / "separate.json", coll, alg) < 8192
        assert first_bytes(tmp_path / "shared.json", coll, alg) > 1 << 20


def test_no_rule_and_no_measured_link_chooses_grid_rsend():
    """grid_rsend (2√N alltoall) lost to direct at 4 test hosts x 2 ranks at every size
    measured, 1 and 10 Gbit/s, both MPIs (bench/records/cluster-4/, grid-alltoall/): the
    built-in rules never name it, and neither does the model's choice between nodes on
    any link recorded there (the hosts sharing 2 cores, as measured, or not)."""
    builtin = json.loads(tune.json_from_c(BUILTIN_C.read_text()))
    assert "grid_rsend" not in {r["alg"] for r in builtin["rules"]}
    runs = json.loads((ROOT / "bench" / "records" / "cluster-4" / "runs.json").read_text())["runs"]
    links = {(r["rate"], r["mpi"]): r["link"] for r in runs}
    assert len(links) == 4
    for link in links.values():
        for shared in (True, False):
            m = M.Machine(M._merge(M.DEFAULTS, link))
            if not shared:
                m.topo.pop("machine_cores", None)
            for nodes, per in ((2, 2), (4, 2), (4, 1), (8, 1)):
                m.topo.update(nodes=nodes, ranks_per_node=per)
                for n in (8, 4096, 16384, 32768, 65536, 262144, 1 << 20):
                    assert cost.choose("alltoall", m, n)[2] == "direct", (nodes, per, n, shared)


def test_builtin_rules_are_what_the_generator_makes():
    """The checked-in C file is `mcoll tune --c` of the checked-in cost table and
    machine file (regenerate: bin/mcoll tune --c src/coll/rules_builtin.c)."""
    assert BUILTIN_C.read_text() == tune.to_c(tune.builtin()), \
        "src/coll/rules_builtin.c is stale: run bin/mcoll tune --c src/coll/rules_builtin.c"


def test_json_round_trip_through_c():
    doc = tune.tune(ranks=(2,), nodes=(2,))
    assert json.loads(tune.json_from_c(tune.to_c(doc))) == doc


def _by_span(doc):
    spans = {}
    for e in doc["rules"]:
        key = (e["coll"], e["level"], tuple(e.get("ranks_per_node") or e.get("nodes")))
        spans.setdefault(key, []).append(e)
    return spans


def test_tune_ranges_cover_every_size_once():
    doc = tune.tune(ranks=(2, 4), nodes=(2, 4))
    spans = _by_span(doc)
    assert {k[0] for k in spans} == set(cost.load_table()["node"])
    for key, entries in spans.items():
        assert entries[0]["bytes"][0] == 0 and entries[-1]["bytes"][1] is None, key
        for a, b in zip(entries, entries[1:]):
            assert a["bytes"][1] == b["bytes"][0] and a["bytes"][0] < a["bytes"][1], key
            assert a["alg"] != b["alg"], f"{key}: neighbours with one algorithm not merged"
    # ranks per node 2, then 3-4; nodes 2, then 3-4
    assert ("bcast", "node", (2, 2)) in spans and ("bcast", "node", (3, 4)) in spans
    assert ("allreduce", "inter", (3, 4)) in spans
    assert not any(k[0] == "gather" and k[1] == "inter" for k in spans)  # one algorithm there


@pytest.mark.parametrize("coll", ["bcast", "allreduce", "alltoall", "gather"])
def test_tune_picks_the_models_cheapest_within_tolerance(coll):
    tol = 0.05
    doc = tune.tune(ranks=(2,), nodes=(2,), colls=[coll], tolerance=tol)
    m = M.load("here", nodes=1, ranks_per_node=2)
    entries = [e for e in doc["rules"] if e["level"] == "node"]
    for e in entries:
        lo, hi = e["bytes"]
        for n in {max(lo, 1), (lo + hi) // 2 if hi else lo * 3 + 1, (hi - 1) if hi else lo * 50 + 7}:
            costs = {a: t for a in cost.load_table()["node"][coll]
                     if a != "p2p" and (t := cost.node_cost(coll, a, m, n)) is not None}
            assert e["alg"] in costs, (e, n)
            assert costs[e["alg"]] <= (1 + tol) * min(costs.values()) * (1 + 1e-9) + 1e-12 or \
                n == hi - 1, (e, n, costs)


def test_tune_keeps_a_pinned_prior_entry(tmp_path):
    """A prior entry marked "pinned" stays whatever the model prices (a cost it does not
    see: the barrier's exit order, which decides the latency of the call after it);
    the same entry unpinned gives way to the model's cheapest at tolerance 0."""
    def barrier_at_2(prior_entry):
        prior = tmp_path / "prior.json"
        prior.write_text(json.dumps({"rules": [prior_entry]}))
        doc = tune.tune(ranks=(2,), nodes=(2,), colls=["barrier"], tolerance=0.0, prior=prior,
                        calibrated_tolerance=0.0)
        [e] = [e for e in doc["rules"] if e["level"] == "node"]
        return e["alg"]
    cheapest = barrier_at_2({"coll": "barrier", "ranks_per_node": [2, 2], "alg": "nosuch"})
    other = next(a for a in cost.load_table()["node"]["barrier"] if a != cheapest)
    assert barrier_at_2({"coll": "barrier", "ranks_per_node": [2, 2], "alg": other}) == cheapest
    assert barrier_at_2({"coll": "barrier", "ranks_per_node": [2, 2], "alg": other,
                         "pinned": "test"}) == other
    # the built-in rules: hier at every rank count, pinned with the measurements behind it
    prior = json.loads(tune.PRIOR.read_text())["rules"]
    [pin] = [e for e in prior if e.get("pinned")]
    assert (pin["coll"], pin["alg"], pin["ranks_per_node"]) == ("barrier", "hier", [2, 64])
    assert "rows-day3" in pin["pinned"] and "ranks-4-8" in pin["pinned"]
    rules = [e for e in tune.builtin()["rules"] if e["coll"] == "barrier" and e["level"] == "node"]
    assert {e["alg"] for e in rules} == {"hier"} and any(e["ranks_per_node"][1] >= 8 for e in rules)


def test_tune_tolerance_zero_is_the_argmin():
    doc = tune.tune(ranks=(2,), nodes=(2,), colls=["reduce"], tolerance=0.0)
    m = M.load("here", nodes=1, ranks_per_node=2)
    for e in doc["rules"]:
        if e["level"] != "node":
            continue
        n = max(e["bytes"][0], 1)
        assert cost.costs("reduce", m, n)[0][1] in (e["alg"], "p2p"), (e, cost.costs("reduce", m, n))


def test_tune_command_line(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run([str(ROOT / "bin" / "mcoll"), "tune", "--machine", "here", "--ranks", "2,8",
                        "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["made_by"].startswith("mcoll tune --machine here --ranks 2,8")
    assert {tuple(e["ranks_per_node"]) for e in doc["rules"] if e["level"] == "node"} == {(2, 2), (3, 8)}
    r = subprocess.run([str(ROOT / "bin" / "mcoll"), "tune", "--table", "--ranks", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "bcast" in r.stdout and "ppn 2-2" in r.stdout


# ---- the library ----

def info(flavour, env):
    return run_job([str(mpijob.MCOLLRUN), "--mpi", flavour, "--build", str(BUILD.path), "--info",
                    "-np", "1"], {**BASE_ENV, **env}, timeout=60)


def builtin_rules():
    return json.loads(tune.json_from_c(BUILTIN_C.read_text()))["rules"]


def write_rules(path, rules):
    path.write_text(json.dumps({"rules": rules}))
    return str(path)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_ranks_of_one_machine_are_one_node(flavour):
    """The node is the machine (one kernel, hostname and /dev/shm), found without the
    host's MPI_COMM_TYPE_SHARED: 3 ranks here are one node; MCOLL_TOPO still splits
    them (test hosts, each with its own hostname and /dev/shm: test_multihost)."""
    for np, env, expected in ((3, {}, "hierarchy: 1 node(s) [3 rank(s) from rank 0]"),
                              (5, {"MCOLL_TOPO": "nodes=2"},
                               "hierarchy: 2 node(s) [3 rank(s) from rank 0, 2 rank(s) from rank 3]")):
        r = run_job([str(mpijob.MCOLLRUN), "--mpi", flavour, "--build", str(BUILD.path), "--info",
                     "-np", str(np)], {**BASE_ENV, **env}, timeout=60)
        assert r.returncode == 0 and expected in r.stdout, r.describe()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_info_shows_the_builtin_rules(flavour):
    r = info(flavour, {})
    assert r.returncode == 0, r.describe()
    n = len(builtin_rules())
    assert "rules in force" in r.stdout and f": built-in, {n} entries" in r.stdout, r.stdout
    lines = [l for l in r.stdout.splitlines() if l.startswith("  bcast ") and " node " in l]
    first = next(e for e in builtin_rules() if e["coll"] == "bcast")
    assert lines and first["alg"] in lines[0] and f"[0, {first['bytes'][1]})" in lines[0], lines


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_info_shows_a_rules_file(flavour, tmp_path):
    path = write_rules(tmp_path / "r.json", [
        {"coll": "bcast", "bytes": [0, 4096], "ranks_per_node": [2, 4], "alg": "shm_tree"},
        {"coll": "alltoall", "bytes": [1024, None], "alg": "tiled", "params": {"ALLTOALL_TILE": 65536}},
        {"coll": "allreduce", "level": "inter", "nodes": [3, None], "alg": "rabenseifner"}])
    r = info(flavour, {"MCOLL_RULES": path})
    assert r.returncode == 0 and "mcoll: MCOLL_RULES" not in r.stderr, r.describe()
    assert f": {path}, 3 entries" in r.stdout, r.stdout
    assert any("bcast" in l and "[0, 4096)" in l and "2-4" in l and "shm_tree" in l for l in r.stdout.splitlines())
    assert any("alltoall" in l and "tiled" in l and "ALLTOALL_TILE=65536" in l for l in r.stdout.splitlines())
    assert any("allreduce" in l and "inter" in l and "3-" in l and "rabenseifner" in l
               for l in r.stdout.splitlines())


BAD = {
    "syntax": ('{"rules": [{"coll": "bcast", "alg": "cma",}]}', "expected a string"),
    "no-such-alg": ('{"rules": [{"coll": "bcast", "alg": "nope"}]}', "no such algorithm"),
    "no-such-coll": ('{"rules": [{"coll": "bcastx", "alg": "cma"}]}', "unknown collective"),
    "bad-range": ('{"rules": [{"coll": "bcast", "alg": "cma", "bytes": [9, 3]}]}', "lo <= hi"),
    "bad-param": ('{"rules": [{"coll": "bcast", "alg": "cma", "params": {"NOPE": 1}}]}', "no such parameter"),
    "unknown-key": ('{"rules": [{"coll": "bcast", "alg": "cma", "size": [0, 1]}]}', "unknown key"),
    "bad-oversubscribed": ('{"rules": [{"coll": "bcast", "alg": "cma", "oversubscribed": 3}]}',
                           "oversubscribed is true, false or null"),
    "not-rules": ('[1, 2]', 'expected {"rules": [...]}'),
    "missing": (None, "cannot read the file"),
}


@pytest.mark.parametrize("flavour", [flavour_param("openmpi"), flavour_param("mpich", full=True)])
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_rules_file_warns_and_falls_back_to_builtin(flavour, case, tmp_path):
    text, why = BAD[case]
    path = tmp_path / "bad.json"
    if text is not None:
        path.write_text(text)
    r = info(flavour, {"MCOLL_RULES": str(path)})
    assert r.returncode == 0, r.describe()
    assert f"mcoll: MCOLL_RULES={path}: " in r.stderr and why in r.stderr and \
        "using the built-in rules" in r.stderr, r.stderr
    assert f": built-in, {len(builtin_rules())} entries" in r.stdout


def bench_report(flavour, coll, sizes, env, np=2, report=parse_verbose_report):
    """The MCOLL_VERBOSE report of mcoll-bench running coll at sizes (checked calls)."""
    program = BUILD.bin(flavour, "mcoll-bench")
    args = ["-C", coll, "-b", sizes[0], "-e", sizes[1], "-f", "8", *CALLS]
    # (no adaptive rounds in classes from 16 KiB, which start after 2 calls: the counts
    # are the rules' choices)
    r = run_job(mpiexec_argv(flavour, np, program, args),
                {**BASE_ENV, "MCOLL_VERBOSE": "1", "MCOLL_CORES": "64", "MCOLL_ADAPT_LONG": "0", **env},
                JOB_TIMEOUT)
    assert r.returncode == 0, r.describe()
    return report(r.stderr), r


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_rules_file_decides_and_the_report_shows_it(flavour, tmp_path):
    """A rules file sending every bcast through the ring (which the built-in rules
    never pick at 2 ranks below 2 MiB): every call ran it."""
    path = write_rules(tmp_path / "r.json", [{"coll": "bcast", "alg": "shm_pipeline"}])
    counts, r = bench_report(flavour, "bcast", ["8", "32K"], {"MCOLL_RULES": path})
    bcast = counts["bcast"]
    assert bcast["calls"] > 0 and bcast["shm_pipeline"] == bcast["calls"] and bcast["fallback"] == 0, r.describe()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_rules_match_the_nodes_shape(flavour, tmp_path):
    """An entry for oversubscribed nodes (as the built-in ones for 3-8 ranks on 2 cores)
    does not apply to a node with a core per rank, and does where ranks share cores."""
    path = write_rules(tmp_path / "r.json", [
        {"coll": "bcast", "oversubscribed": True, "levels": [0, 0], "alg": "shm_pipeline"}])
    counts, r = bench_report(flavour, "bcast", ["8", "64"], {"MCOLL_RULES": path})  # 64 cores
    assert counts["bcast"].get("shm_pipeline", 0) == 0, r.describe()
    counts, r = bench_report(flavour, "bcast", ["8", "64"], {"MCOLL_RULES": path, "MCOLL_CORES": "1"})
    assert counts["bcast"]["shm_pipeline"] == counts["bcast"]["calls"], r.describe()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_precedence_forced_then_user_parameter_then_rules(flavour, tmp_path):
    path = write_rules(tmp_path / "r.json", [{"coll": "bcast", "alg": "shm_pipeline"}])
    # MCOLL_ALG_BCAST beats the rules
    counts, r = bench_report(flavour, "bcast", ["8", "32K"], {"MCOLL_RULES": path, "MCOLL_ALG_BCAST": "shm_tree"})
    assert counts["bcast"]["shm_tree"] == counts["bcast"]["calls"], r.describe()
    # a threshold the user set beats the rules: 32 KiB by single copy (BCAST_CMA_MIN 8K),
    # 8 B and 512 B through a slot, as the thresholds say
    counts, r = bench_report(flavour, "bcast", ["8", "32K"], {"MCOLL_RULES": path, "MCOLL_BCAST_CMA_MIN": "8K"})
    b = counts["bcast"]
    n = b["calls"] // 5  # 8 64 512 4K 32K
    assert b.get("shm_pipeline", 0) <= n and b.get("shm_slot", 0) == 3 * n, r.describe()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_builtin_rules_decide_bcast_by_size(flavour):
    """Without a file or a user-set threshold the built-in rules choose: the counts per
    algorithm are those the rules give for 8, 64, 512, 4K, 32K, 256K and 2M at 2 ranks."""
    counts, r = bench_report(flavour, "bcast", ["8", "2M"], {})
    b = counts["bcast"]
    per_size = b["calls"] // 7
    rules = [e for e in builtin_rules() if e["coll"] == "bcast" and e["level"] == "node"
             and e["ranks_per_node"][0] <= 2 <= e["ranks_per_node"][1]]
    expected = {}
    for n in (8, 64, 512, 4096, 32768, 262144, 2097152):
        alg = next(e["alg"] for e in rules if e["bytes"][0] <= n and (e["bytes"][1] is None or n < e["bytes"][1]))
        expected[alg] = expected.get(alg, 0) + per_size
    ran = {a: c for a, c in b.items() if a not in ("calls", "fallback") and c}
    if "cma" in expected and not cma_works(flavour):
        pytest.skip("single copy does not work on this host")
    assert ran == expected, f"{b} vs {expected}\n{r.describe()}"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_rules_decide_the_gather_family_threshold(flavour, tmp_path):
    """allgather's blocks through the areas at every size (a rules file), then single copy
    from 1 KiB (another; the thresholds: from 8 KiB at 2 ranks): the report counts what
    the rules said."""
    path = write_rules(tmp_path / "a.json", [{"coll": "allgather", "alg": "area"}])
    counts, r = bench_report(flavour, "allgather", ["64", "32K"], {"MCOLL_RULES": path})
    a = counts["allgather"]
    assert a["area"] == a["calls"], r.describe()
    path = write_rules(tmp_path / "b.json", [{"coll": "allgather", "bytes": [0, 1024], "alg": "area"},
                                             {"coll": "allgather", "bytes": [1024, None], "alg": "cma"}])
    counts, r = bench_report(flavour, "allgather", ["64", "32K"], {"MCOLL_RULES": path})
    a = counts["allgather"]
    if not cma_works(flavour):
        pytest.skip("single copy does not work on this host")
    per = a["calls"] // 4  # 64 512 4K 32K
    assert a["area"] == 2 * per and a["cma"] == 2 * per, r.describe()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_rules_decide_between_nodes(flavour, tmp_path):
    """3 fake nodes: a rules file picks rabenseifner between nodes for every reduce of
    2+ nodes (the thresholds: binomial below 32 KiB); the report's reduce.inter line
    counts it for every call."""
    path = write_rules(tmp_path / "r.json", [
        {"coll": "reduce", "level": "inter", "nodes": [2, None], "alg": "rabenseifner"}])
    counts, r = bench_report(flavour, "reduce", ["64", "4K"],
                             {"MCOLL_RULES": path, "MCOLL_TOPO": "nodes=3"}, np=3,
                             report=parse_inter_report)
    inter = counts["reduce"]
    assert inter["calls"] > 0 and inter["rabenseifner"] == inter["calls"], r.describe()
