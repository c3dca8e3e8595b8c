"""Tests of the performance model (tools/py/mcoll_model): pure Python, no MPI."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "py"))
from mcoll_model import cost, formulas as F, machine as M, predict as P, seed002  # noqa: E402


def test_bruck_and_long_message_by_hand():
    # 8 ranks, 1 KiB blocks, alpha 2 µs, beta 1 ns/B: 3 rounds of alpha, 3*7/2 blocks moved.
    assert F.bruck(8, 1024, 2.0, 0.001) == pytest.approx(3 * 2 + 0.5 * 3 * 7 * 1.024)
    assert F.long_message(8, 1024, 2.0, 0.001) == pytest.approx(7 * (2 + 1.024))
    assert F.lg(1) == 0 and F.lg(2) == 1 and F.lg(5) == 3 and F.lg(1024) == 10


def test_mg1_wait_and_inverse():
    assert F.mg1_wait(0.5, 16) == pytest.approx(15 / 16 * 0.5 / 1.0)
    assert F.mg1_wait(0.0, 16) == 0.0
    assert F.mg1_wait(0.9, 2) == pytest.approx(0.5 * 0.9 / 0.2)
    for rho in (0.1, 0.7, 0.95):
        assert F.rho_from_wait(F.mg1_wait(rho, 16), 16) == pytest.approx(rho)
    with pytest.raises(ValueError):
        F.mg1_wait(1.0, 16)


def test_contention_step_by_hand():
    # 4 KiB = 128 packets of 256 bit, 3 hops, rho 0.7, 16x16: w = 15/16*0.7/0.6 = 1.09375
    # cycles; 128*3*1.09375*3.2 ns = 1.344 µs.
    assert F.contention_step(4096, 3, 0.7, 16, 256, 0.0032) == pytest.approx(1.344)
    t = F.contention(512, 4096, 2.37, 1 / 6343, 3, 0.7, 16, 256, 0.0032)
    assert t == pytest.approx(511 * (2.37 + 4096 / 6343 + 1.344))


def test_paper_new_model_structure():
    # The paper's new-model cells come out of (p-1) r (X(k) + contention) with its old
    # model's per-message X (old / ((p-1) r)) and round loads: 4 KB, 8 per node, 512
    # ranks, rho 0.7; 16 KB, 12 per node, 512 ranks, rho 0.8.
    rows = {(r["block_bytes"], r["ranks_per_node"], r["ranks"]): r for r in seed002.read_tables()}
    for (k, r, p), rho in (((4096, 8, 512), 0.70), ((16384, 12, 512), 0.80),
                           ((4096, 8, 8192), 0.95), ((16384, 8, 2048), 0.90)):
        row = rows[(k, r, p)]
        x = row["old_model_us"] / ((p - 1) * r)
        new = (p - 1) * r * (x + F.contention_step(k, 3, rho, 16, 256, 0.0032))
        assert new == pytest.approx(row["new_model_us"], rel=0.002)


def test_tables_transcribed_whole():
    rows = seed002.read_tables()
    assert len(rows) == 20
    assert {r["ranks"] for r in rows} == {512, 1024, 2048, 4096, 8192}
    assert {(r["block_bytes"], r["ranks_per_node"]) for r in rows} == {
        (4096, 8), (4096, 12), (16384, 8), (16384, 12)}
    # Spot checks against the seed text.
    by = {(r["block_bytes"], r["ranks_per_node"], r["ranks"]): r for r in rows}
    assert by[(4096, 8, 2048)]["measured_us"] == 3230697
    assert by[(16384, 12, 8192)]["new_model_us"] == 7801452


def test_reproduction_within_target():
    out, fits = seed002.reproduce()
    assert len(out) == 20
    med = seed002.median_abs(o["err_new"] for o in out)
    assert med <= 0.10
    # Our old model differs from the paper's only by alpha + k beta (table 1 vs. theirs).
    assert seed002.median_abs(o["err_old"] for o in out) < 0.04
    # The burst (4 KB, 8 per node, 2048 ranks: 3.2 s) is left out of that series' fit.
    assert fits[(4096, 8)][2] == [2048]
    for o in out:
        assert 0 < o["rho"] < 1


def test_reproduce_cli_last_line():
    res = subprocess.run([str(ROOT / "bin" / "mcoll"), "model", "reproduce-002"],
                         capture_output=True, text=True, check=True)
    last = res.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"median \|error\| vs\. the paper's new model: (\d+(\.\d+)?)%", last)
    assert m and float(m.group(1)) <= 10.0
    assert res.stdout.count("\n 4 KB") + res.stdout.count("\n16 KB") == 20


def test_expressions_are_data_only():
    env = {"n": 4096.0, "r": 4}
    assert cost.evaluate("lg(r)*n*r/2", env) == 2 * 4096 * 4 / 2
    assert cost.evaluate("r == 2 and n <= 56", env) is False
    assert cost.evaluate("ceil(n/1000)", env) == 5
    for bad in ("__import__('os')", "n.__class__", "open('x')", "[1][0]"):
        with pytest.raises((ValueError, NameError)):
            cost.evaluate(bad, env)


def test_table_matches_the_c_algorithms():
    table = cost.load_table()
    c_names = set()
    for f in (ROOT / "src" / "coll").rglob("*.[ch]"):
        c_names |= set(re.findall(r'\{"([a-z_0-9]+)", *"', f.read_text()))
    # the node and inter-node levels, as src/coll registers them (mcoll__<coll>_algs and
    # mcoll__<coll>_inter_algs)
    table_names = {alg for level in ("node", "inter") for algs in table[level].values() for alg in algs}
    # gatherv/scatterv's `slot` (coll/move.h): the model prices them as gather/scatter
    # (aliases), and the choice between `slot` and `area` is left to the adaptive round
    assert table_names | {"slot"} == c_names
    for coll, algs in table["node"].items():
        env = cost.environment(M.load(None), coll, 1024)
        for alg, entry in algs.items():
            assert cost.terms_us(entry["terms"], M.load(None), env) >= 0


def test_memory_contention_slows_each_copier():
    m = M.load(None, cores_per_node=8, ranks_per_node=8)
    m.topo["llc_bytes"] = 1 << 20
    one = m.copy_us(8 << 20, 1)
    four = m.copy_us(8 << 20, 4)
    # defaults: 10 GB/s alone; 20 GB/s shared by 4 -> 5 GB/s each.
    assert one == pytest.approx((8 << 20) / 10e3)
    assert four == pytest.approx((8 << 20) / 5e3)
    # In cache, no memory contention.
    assert m.copy_us(1 << 10, 4) == pytest.approx(1024 / 25e3)


def test_oversubscription_costs_scheduler_turns():
    fit = M.load(None, ranks_per_node=2, cores_per_node=2)
    over = M.load(None, ranks_per_node=8, cores_per_node=2)
    assert fit.allsync_us() == 0.1 and over.allsync_us() == (8 / 2 - 1) * 5.0
    assert over.sync_us() == 0.1
    t_fit = cost.choose("allreduce", fit, 8)[0]
    t_over = cost.choose("allreduce", over, 8)[0]
    assert t_over - t_fit == pytest.approx(3 * 5.0 - 0.1, rel=0.05)


def test_restrictions_hold():
    m = M.load(None, ranks_per_node=2)
    assert cost.node_cost("alltoall", "pair_inline", m, 56) is not None
    assert cost.node_cost("alltoall", "pair_inline", m, 64) is None
    m4 = M.load(None, ranks_per_node=4, cores_per_node=4)
    assert cost.node_cost("alltoall", "pair_inline", m4, 8) is None
    m.node["cma"] = False
    algs = {a for _, a, _ in cost.costs("bcast", m, 1 << 20)}
    assert "cma" not in algs and "shm_pipeline" in algs
    assert cost.node_cost("bcast", "shm_slot", m, 4096) is None


def test_choice_changes_with_size():
    m = M.load(None)
    assert cost.choose("bcast", m, 8)[1] == "shm_slot"
    assert cost.choose("alltoall", m, 8)[1] == "pair_inline"
    big = {a for _, a, _ in cost.costs("allreduce", m, 1 << 20)[:1]}
    small = {a for _, a, _ in cost.costs("allreduce", m, 8)[:1]}
    assert big != small


def test_inter_node_alltoall_carries_seed002_contention():
    m = M.load("bxj", nodes=64, ranks_per_node=8)
    t, node_alg, inter = cost.choose("alltoall", m, 4096)
    assert inter == "direct"
    # the inter phase dominates: r*(P-r) messages through the NIC, each with its wait
    rho = m.rho(512)
    per = 2.37 + 4096 / 6343 + F.contention_step(4096, 3, rho, 16, 256, 0.0032)
    assert t == pytest.approx(8 * (512 - 8) * per, rel=0.01)


def test_predict_shape_and_cli():
    m = M.load("fat_tree_256x32")
    rows = P.predict(m, ["bcast", "alltoall"], [8, 1 << 20])
    assert [(r["coll"], r["bytes"]) for r in rows] == [
        ("bcast", 8), ("bcast", 1 << 20), ("alltoall", 8), ("alltoall", 1 << 20)]
    for r in rows:
        assert r["us"] > 0 and r["node_alg"] and r["inter_alg"]
    assert rows[1]["us"] > rows[0]["us"]
    res = subprocess.run([str(ROOT / "bin" / "mcoll"), "model", "predict", "-m", "fat_tree_256x32",
                          "-c", "allreduce", "-s", "8,64K", "--json"],
                         capture_output=True, text=True, check=True)
    rows = json.loads(res.stdout)
    assert len(rows) == 2 and all(r["coll"] == "allreduce" for r in rows)
    res = subprocess.run([str(ROOT / "bin" / "mcoll"), "model", "predict", "-m", "fat_tree_256x32",
                          "--nodes", "16"], capture_output=True, text=True, check=True)
    assert "16 nodes x 32 ranks" in res.stdout
    # barrier once, the other 10 collectives at the 4 default sizes
    assert len([ln for ln in res.stdout.splitlines() if re.match(r"\w+ +\d", ln)]) == 41


def test_machine_files_load():
    for f in (ROOT / "tools" / "py" / "mcoll_model" / "machines").glob("*.json"):
        m = M.load(str(f))
        assert m.topo["nodes"] >= 1 and 0 <= m.rho(m.topo["nodes"] * m.topo["ranks_per_node"]) < 1


def test_parse_size():
    assert P.parse_size("8") == 8 and P.parse_size("4K") == 4096 and P.parse_size("1M") == 1 << 20
    assert math.isclose(P.parse_size("1.5K"), 1536)


def test_compare_on_synthetic_results(tmp_path):
    from mcoll_model import compare as C
    m = M.load("here", ranks_per_node=2, nodes=1)
    results = []
    for coll, n in (("bcast", 8), ("bcast", 65536), ("reduce_scatter", 1024), ("barrier", 0)):
        t = cost.choose(coll, m, cost.model_bytes(coll, n, 2))[0]
        results.append({"coll": coll, "bytes": n, "mcoll_us": 1.25 * t, "native_us": t})
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"nprocs": 2, "flavour": "x", "mode": "latency", "results": results}))
    doc, _, rows = C.compare("here", path)
    assert len(rows) == 4
    for r in rows:
        assert r["error"] == pytest.approx(1 / 1.25 - 1)
    per, overall = C.summary(rows)
    assert overall == pytest.approx(0.2) and set(per) == {"bcast", "reduce_scatter", "barrier"}
    md = C.markdown(doc, M.load("here"), rows)
    assert "median |error| over all rows: 20.0%" in md
    # reduce_scatter's bench size is the per-rank block; the model's the whole vector
    assert cost.model_bytes("reduce_scatter", 1024, 2) == 2048 and cost.model_bytes("bcast", 8, 2) == 8


def test_compare_here_at_two_ranks_within_target():
    # The 2-rank latency-mode run the model was calibrated on (mcoll_model/calibration/)
    # against the committed machine file: the target is a median error <= 20%.
    from mcoll_model import compare as C
    for flavour in ("openmpi", "mpich"):
        path = ROOT / "tools" / "py" / "mcoll_model" / "calibration" / f"20261123-1604-{flavour}-np2-latency.json"
        _, _, rows = C.compare("here", path)
        assert len(rows) == 136
        assert C.summary(rows)[1] <= 0.20


def test_paper_rho_is_round_and_formula_matches():
    out, _ = seed002.reproduce(rho_source="paper")
    first = [round(o["rho_paper"], 3) for o in out[:5]]     # 4 KB, 8 per node
    assert first == [0.7, 0.805, 0.88, 0.93, 0.95]
    # with the paper's loads only alpha + k beta differ (table 1's against the paper's)
    assert seed002.median_abs(o["err_new"] for o in out) < 0.03


def test_fat_tree_hops():
    # 40-port switches: 20 nodes under a leaf (1 hop), the others across the spine (3).
    m = M.load("fat_tree_256x32", nodes=20)
    assert m.hops() == 1.0
    m = M.load("fat_tree_256x32", nodes=256)
    assert m.hops() == pytest.approx((19 * 1 + 236 * 3) / 255)
    assert M.load("bxj").hops() == 3


class _StubMachine:
    """Simple, distinct prices per term kind, the same as the C pricer below."""
    net = {"alpha_us": 2.0, "hops": 3, "switch_radix": 16, "packet_bits": 256, "cycle_ns": 3.2}

    def sync_us(self):
        return 0.1

    def allsync_us(self):
        return 0.5

    def copy_us(self, b, c, cached=False):
        if b <= 0:
            return 0.0
        return b * 3e-4 + c * 0.03 if cached else b * 1e-4 * c + 0.01

    def xcopy_us(self, b, c):
        return b * 2e-4 + c * 0.02 if b > 0 else 0.0

    def cma_us(self, calls, b, r):
        return calls * 0.4 + b * 1e-4 + r * 0.05 if b > 0 or calls > 0 else 0.0

    def fold_us(self, b, f=1):
        return b * 2e-4 + f * 0.07

    def level_msg_us(self, level, count, b):
        return count * 0.3 + b * 1e-3

    def net_beta_us(self):
        return 1e-3

    def net_msg_us(self, count, b):
        return count * 2.0 + b * 1e-3

    def net_exchange_us(self, rounds, b):
        return rounds * 3.0 + b * 1e-3

    def net_exchange_extra_us(self):
        return 0.0

    def hops(self):
        return 3

    def rho(self, ranks):
        return 0.5


C_PRICER = r'''
#include <stdio.h>
static double sync_(void *c, double a) { (void)c; return 0.1 * a; }
static double allsync_(void *c, double a) { (void)c; return 0.5 * a; }
static double copy_(void *c, double b, double k) { (void)c; return b > 0 ? b * 1e-4 * k + 0.01 : 0; }
static double copy_cached_(void *c, double b, double k) { (void)c; return b > 0 ? b * 3e-4 + k * 0.03 : 0; }
static double xcopy_(void *c, double b, double k) { (void)c; return b > 0 ? b * 2e-4 + k * 0.02 : 0; }
static double cma_(void *c, double n, double b, double r) { (void)c; return (b > 0 || n > 0) ? n * 0.4 + b * 1e-4 + r * 0.05 : 0; }
static double fold_(void *c, double b, double f) { (void)c; return b * 2e-4 + f * 0.07; }
static double p2p_(void *c, double n, double b) { (void)c; return n * 0.3 + b * 1e-3; }
static double net_(void *c, double n, double b) { (void)c; return n * 2.0 + b * 1e-3; }
static double net_x_(void *c, double n, double b) { (void)c; return n * 3.0 + b * 1e-3; }
static double net_a2a_(void *c, double m, double k) {
    (void)c;
    if (m <= 0) return 0;
    double w = (1 - 1.0 / 16) * 0.5 / (2 * (1 - 0.5));
    return m * (2.0 + k * 1e-3 + k * 8 / 256 * 3 * w * 0.0032);
}
int main(void)
{
    struct mcoll_cost_pricer p = {0, allsync_, cma_, copy_, copy_cached_, fold_, net_, net_a2a_, net_x_,
                                  p2p_, sync_, xcopy_};
    ENVS
    for (unsigned i = 0; i < sizeof envs / sizeof envs[0]; i++)
        for (int j = 0; j < mcoll_cost_table_len; j++) {
            const struct mcoll_cost_entry *t = &mcoll_cost_table[j];
            printf("%s %s %s %u %d %.12g\n", t->section, t->coll, t->alg, i, t->ok(&envs[i]),
                   t->cost(&envs[i], &p));
        }
    return 0;
}
'''


def test_generated_c_matches_the_python_costs(tmp_path):
    import shutil
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    from mcoll_model import gen_c
    envs = [dict(n=n, r=r, N=N, P=r * N, S=S, chunk=65536, cma_chunk=262144, k=2, tile=4096,
                 slot_max=512, area=4 << 20, cma=1)
            for n, r, N, S in ((8, 2, 1, 1), (4096, 4, 16, 2), (1 << 20, 8, 256, 2), (40, 2, 3, 1))]
    init = ", ".join("{" + ", ".join(str(float(e[v])) for v in gen_c.VARS) + "}" for e in envs)
    src = tmp_path / "t.c"
    src.write_text(gen_c.generate() + C_PRICER.replace(
        "ENVS", f"const struct mcoll_cost_env envs[] = {{{init}}};"))
    exe = tmp_path / "t"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src),
                    "-lm"], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    table = cost.load_table()
    stub = _StubMachine()
    lines = out.split("\n")[:-1]
    assert len(lines) == len(envs) * sum(len(a) for s in ("node", "inter")
                                         for a in table[s].values())
    for line in lines:
        section, coll, alg, i, ok, c_cost = line.split()
        entry = table[section][coll][alg]
        env = dict(envs[int(i)], cma=True)
        py_ok = cost.evaluate(entry["needs"], env) if "needs" in entry else True
        assert bool(int(ok)) == bool(py_ok), line
        assert float(c_cost) == pytest.approx(cost.terms_us(entry["terms"], stub, env),
                                              rel=1e-9, abs=1e-12), line


def _link_machine(tmp_path, us):
    """A machine file whose net section is a link curve (as --calibrate across hosts
    writes it): 8 B .. 1 MiB one way in `us`."""
    sizes = [8, 512, 65536, 1 << 20]
    path = tmp_path / "link.json"
    path.write_text(json.dumps({"name": "link", "net": {"alpha_us": us[0], "nic_MBps": 125,
                                                        "link_curve": {"sizes": sizes, "us": us}}}))
    return path


def test_net_messages_priced_by_the_link_curve(tmp_path):
    m = M.load(_link_machine(tmp_path, [50.0, 60.0, 600.0, 8500.0]))
    assert m.net_msg_us(0, 100) == 0.0
    assert m.net_msg_us(1, 8) == pytest.approx(50.0)
    assert m.net_msg_us(2, 1024) == pytest.approx(2 * 60.0)           # 512 B each
    assert m.net_msg_us(1, 4) == pytest.approx(50.0)                  # below the curve
    assert m.net_msg_us(1, 2 << 20) == pytest.approx(2 * 8500.0)      # its last bandwidth
    mid = m.net_msg_us(1, 4096)                                       # log-log between points
    assert 60.0 < mid < 600.0
    assert mid == pytest.approx(math.exp(math.log(60) + (math.log(600) - math.log(60)) * 3 / 7), rel=1e-6)
    # a cost term between nodes takes it: binomial bcast over 2 nodes is one message
    m2 = M.load(_link_machine(tmp_path, [50.0, 60.0, 600.0, 8500.0]), nodes=2, ranks_per_node=1)
    env = cost.environment(m2, "bcast", 65536)
    assert cost.terms_us([["net", "lg(N)", "n*lg(N)"]], m2, env) == pytest.approx(600.0)
    # a point faster than a smaller size (a busy host's noise) is raised to it
    bumpy = M.load(_link_machine(tmp_path, [50.0, 300.0, 90.0, 8500.0]))
    assert bumpy.net_msg_us(1, 4096) == pytest.approx(300.0)
    assert bumpy.net_msg_us(1, 32768) == pytest.approx(300.0)
    # ... and no message passes faster than the link's sustained rate (125 MB/s here)
    assert bumpy.net_msg_us(1, 65536) == pytest.approx(65536 / 125)
    # without a curve: alpha and bandwidth
    plain = M.load(None)
    assert plain.net_msg_us(3, 3000) == pytest.approx(3 * plain.net["alpha_us"] + 3000 / plain.net["nic_MBps"])


def test_a_link_curve_below_the_sustained_rate_is_raised_to_it(tmp_path):
    """A ping-pong on a token-bucket link passes messages up to the burst unshaped (the
    bucket refills during the way back): 32 KiB in 150 us where 1 Gbit/s needs 262 us.
    Calls one after the other drain the bucket, so each message costs at least its
    bytes at nic_MBps (the slope of messages sent back to back), count by count."""
    path = tmp_path / "burst.json"
    path.write_text(json.dumps({"name": "burst", "net": {
        "alpha_us": 11.0, "nic_MBps": 117.0,
        "link_curve": {"sizes": [8, 4096, 32768, 262144], "us": [11.0, 19.0, 150.0, 2400.0]}}}))
    m = M.load(path)
    assert m.net_msg_us(1, 8) == pytest.approx(11.0)              # latency-bound: the curve
    assert m.net_msg_us(1, 32768) == pytest.approx(32768 / 117.0)  # burst-bound: the rate
    assert m.net_msg_us(4, 4 * 32768) == pytest.approx(4 * 32768 / 117.0)
    assert m.net_msg_us(1, 262144) == pytest.approx(2400.0)       # beyond: the curve again


def test_model_predicts_the_recorded_cluster_rows(tmp_path):
    """bench/records/network-model/: each cluster run (bcast, allreduce, alltoall, 8 B to
    512 KiB, 2 test hosts x 1 rank, latency mode, both MPIs, tbf latency 1ms and 50ms)
    against the link calibrated just before it in the same lock. Within 20% (median
    |error|): every run's bandwidth-bound rows (8 KiB and up), and over the runs each
    collective and all rows; a single run's small rows move with the host's load (two
    runs of the same setting differ by up to 94% there, a median 6-19%)."""
    import statistics
    from mcoll_model import compare as C
    rec = Path(__file__).resolve().parents[2] / "bench" / "records" / "network-model"
    runs = json.loads((rec / "runs.json").read_text())["runs"]
    assert len(runs) >= 8 and {r["mpi"] for r in runs} == {"openmpi", "mpich"}
    per_coll, overall = {}, []
    for run in runs:
        link, cluster = tmp_path / "link.json", tmp_path / "cluster.json"
        link.write_text(json.dumps(run["link"]))
        cluster.write_text(json.dumps(run["cluster"]))
        doc, m, rows = C.compare(link, cluster, nodes=2)
        assert m.net.get("stream_curve") and len(rows) == 27, run["run"]
        big = [abs(r["error"]) for r in rows if r["bytes"] >= 8192]
        assert statistics.median(big) <= 0.20, (run["run"], big)
        per, allm = C.summary(rows)
        for coll, e in per.items():
            per_coll.setdefault(coll, []).append(e)
        overall.append(allm)
    assert statistics.median(overall) <= 0.20, overall
    for coll, errs in per_coll.items():
        assert statistics.median(errs) <= 0.20, (coll, errs)


def test_compare_across_nodes(tmp_path):
    from mcoll_model import compare as C
    link = _link_machine(tmp_path, [50.0, 60.0, 600.0, 8500.0])
    m = M.load(link, ranks_per_node=2, nodes=2)
    results = []
    for coll, n in (("bcast", 8), ("allreduce", 65536), ("alltoall", 4096)):
        results.append({"coll": coll, "bytes": n, "mcoll_us": 2 * cost.choose(coll, m, n)[0]})
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"nprocs": 4, "flavour": "x", "mode": "latency", "results": results}))
    doc, m_used, rows = C.compare(link, path, nodes=2, choice="cheapest")
    assert m_used.topo["nodes"] == 2 and m_used.topo["ranks_per_node"] == 2
    assert [r["error"] for r in rows] == pytest.approx([-0.5] * 3)
    assert all(" + " in r["algorithm"] for r in rows)     # the inter-node algorithm named
    assert "4 ranks on 2 nodes" in C.markdown(doc, m_used, rows)
    with pytest.raises(ValueError):
        C.compare(link, path, nodes=3)


def test_tune_prices_the_inter_node_choice_by_a_calibrated_link(tmp_path):
    from mcoll_model import tune as T
    # On 4 nodes rabenseifner sends more messages and fewer bytes than recursive
    # doubling: a link with cheap messages switches to it sooner than the prior's
    # threshold, one whose messages cost 10 ms later.
    cheap = _link_machine(tmp_path, [1.0, 1.0, 600.0, 8500.0])
    dear_path = tmp_path / "dear.json"
    dear_path.write_text(json.dumps({"name": "dear", "net": {
        "alpha_us": 1e4, "nic_MBps": 125,
        "link_curve": {"sizes": [8, 1 << 20], "us": [1e4, 1e4 + 8400]}}}))

    def inter(net):
        doc = T.tune("here", (2,), (4,), colls=["allreduce"], tolerance=2.0, prior=T.PRIOR,
                     net=net, net_tolerance=0.05)
        return doc, [(r["bytes"], r["alg"]) for r in doc["rules"] if r["level"] == "inter"]
    doc, cheap_rules = inter(cheap)
    assert "--net" in doc["made_by"] and "--net-tolerance 0.05" in doc["made_by"]
    _, dear_rules = inter(dear_path)
    _, prior_rules = inter(None)   # without --net: the prior's threshold
    assert [alg for _, alg in prior_rules] == ["recursive_doubling", "rabenseifner"]
    prior_edge = prior_rules[1][0][0]
    assert [alg for _, alg in cheap_rules] == ["recursive_doubling", "rabenseifner"]
    assert cheap_rules[1][0][0] < prior_edge          # cheap messages: halving sooner
    assert [alg for _, alg in dear_rules] == ["recursive_doubling", "rabenseifner"]
    assert dear_rules[1][0][0] > prior_edge


def test_builtin_rules_between_nodes_follow_the_calibrated_link():
    """The built-in rules between nodes are the model's choice on the link measured
    across test hosts (tune.BUILTIN_NET), and a sound one: per collective and node
    count at most one switch going up in size (a curve whose noise decided would flip
    back and forth, as the one measured at load 27-38 did); alltoall stays direct
    (grid_rsend lost every measured setting: bench/records/grid-alltoall/)."""
    from mcoll_model import tune as T
    net = M.load(T.BUILTIN_NET).net
    assert net.get("link_curve") and net.get("stream_curve") and net.get("exchange_us")
    doc = T.builtin()
    assert f"--net {T.BUILTIN_NET}" in doc["made_by"]
    inter = {}
    for e in doc["rules"]:
        if e["level"] == "inter":
            inter.setdefault((e["coll"], tuple(e["nodes"])), []).append(e)
    assert inter
    for (coll, nodes), entries in inter.items():
        assert len(entries) <= 2, (coll, nodes, entries)
        if coll == "alltoall":
            assert [e["alg"] for e in entries] == ["direct"]
    # the link decides: without it the same prior gives other edges between nodes
    plain = T.tune("here", (2, 4, 8), (2, 4, 8), tolerance=T.BUILTIN_TOLERANCE, prior=T.PRIOR,
                   calibrated_tolerance=T.BUILTIN_CALIBRATED_TOLERANCE)
    assert [e for e in plain["rules"] if e["level"] == "inter"] != \
        [e for e in doc["rules"] if e["level"] == "inter"]


def _shared(machine_cores, nodes, per_node):
    m = M.load("testhosts_1gbit", nodes=nodes, ranks_per_node=per_node)
    if machine_cores:
        m.data["topology"]["machine_cores"] = machine_cores
    return m


def test_test_hosts_sharing_cores_wait_a_slice_per_step():
    """Test hosts share one machine's cores (topology.machine_cores): with more ranks than
    those, each dependent step between nodes waits for its peer to be scheduled,
    SHARED_STEP_US P/M without a measured curve; with ranks <= cores, or without
    machine_cores, no change."""
    for coll in ("bcast", "allreduce", "allgather", "alltoall"):
        for n in (8, 4096, 1 << 20):
            assert cost.choose(coll, _shared(2, 2, 1), n) == cost.choose(coll, _shared(None, 2, 1), n)
    assert _shared(2, 4, 1).shared_step_wait_us() == pytest.approx(M.SHARED_STEP_US * 2)
    assert _shared(2, 4, 2).shared_step_wait_us() == pytest.approx(M.SHARED_STEP_US * 4)
    assert _shared(None, 4, 2).shared_step_wait_us() == 0.0
    # bcast of 4 KiB over 4 nodes: binomial, 2 steps; allgather's ring: 3
    t, _, inter = cost.choose("bcast", _shared(2, 4, 1), 4096)
    assert inter == "binomial"
    assert t == pytest.approx(cost.choose("bcast", _shared(None, 4, 1), 4096)[0] + 2 * 2 * M.SHARED_STEP_US)
    t, _, _ = cost.choose("allgather", _shared(2, 4, 1), 4096)
    assert t == pytest.approx(cost.choose("allgather", _shared(None, 4, 1), 4096)[0] + 3 * 2 * M.SHARED_STEP_US)


def test_the_shared_step_wait_grows_with_the_ranks_per_core(tmp_path, monkeypatch):
    """The wait for a descheduled peer grows about as P/M (bench/records/net8/: about 4
    ms a step at 4 ranks on 2 cores, 8-9 ms at 8), not as 1 - M/P, which saturates at
    one turn: doubling the ranks per core doubles it, a machine file's shared_step_us
    scales it, and over cluster-4's oversubscribed 1 Gbit/s rows the new form predicts
    better than the old one did (bench/records/net9/)."""
    w3, w4, w8 = (_shared(2, n, r).shared_step_wait_us() for n, r in ((3, 1), (4, 1), (4, 2)))
    assert w8 == pytest.approx(2 * w4) and w4 == pytest.approx(4 / 3 * w3)
    assert 2500 <= w4 <= 5000 and 6000 <= w8 <= 10000   # net8's measured steps, within 25%
    m = _shared(2, 4, 1)
    m.data["node"]["shared_step_us"] = 1000.0
    assert m.shared_step_wait_us() == pytest.approx(2000.0)
    # the wait prices every step: bcast's binomial at 4 nodes x 2 ranks, 2 steps of 4 P/M
    t, _, inter = cost.choose("bcast", _shared(2, 4, 2), 4096)
    assert inter == "binomial"
    assert t == pytest.approx(cost.choose("bcast", _shared(None, 4, 2), 4096)[0] + 2 * w8)
    import statistics
    from mcoll_model import compare as C
    runs = json.loads((ROOT / "bench" / "records" / "cluster-4" / "runs.json").read_text())["runs"]
    runs = [r for r in runs if r["rate"] == "1gbit" and r["hosts"] * r["per_host"] > 2]
    assert len(runs) == 6

    def median_error(tmp):
        e = []
        for run in runs:
            lp, cp = tmp / "link.json", tmp / "cluster.json"
            lp.write_text(json.dumps(run["link"]))
            cp.write_text(json.dumps(run["cluster"]))
            e += [abs(r["error"]) for r in C.compare(lp, cp, nodes=run["hosts"], choice="built-in")[2]]
        return statistics.median(e)

    new = median_error(tmp_path)
    with monkeypatch.context() as mp:
        def old_form(self):
            cores, ranks = self.topo.get("machine_cores"), self.topo["nodes"] * self.topo["ranks_per_node"]
            return 5400.0 * (1 - cores / ranks) if cores and ranks > cores else 0.0
        mp.setattr(M.Machine, "shared_step_wait_us", old_form)
        old = median_error(tmp_path)
    assert new < old - 0.03, (new, old)


def test_shared_cores_choose_fewer_steps_between_nodes():
    """Priced by steps, an oversubscribed shared machine prefers the inter-node algorithm
    with fewer dependent steps: bcast of 64 KiB at 4 nodes binomial (2 steps) rather than
    scatter-allgather (5); alltoall never grid_rsend (its control rounds add steps)."""
    assert cost.choose("bcast", _shared(None, 4, 1), 65536)[2] == "scatter_allgather"
    assert cost.choose("bcast", _shared(2, 4, 1), 65536)[2] == "binomial"
    for per in (1, 2):
        for n in (16384, 32768, 65536, 262144):
            assert cost.choose("alltoall", _shared(2, 4, per), n)[2] == "direct"


def test_the_model_predicts_the_recorded_4_host_rows_better_with_the_shared_cores(tmp_path):
    """bench/records/cluster-4/runs.json: the cluster benchmark's blocking jobs at 1 and 10
    Gbit/s, 2 and 4 hosts x 1 and 2 ranks, both MPIs, with the link each rate and MPI
    calibrated in the same run (which found the hosts on one kernel: machine_cores 2).
    Over the oversubscribed jobs (4 and 8 ranks on the 2 cores) the model without the
    shared cores is off by a median 95% (10 of 240 rows within 20%); with them by 49% (46
    rows within 20%): not the 20% of issue 24, these rows are scheduler-bound. The jobs
    at ranks <= cores do not change and stay within 20% (each job's median)."""
    import statistics
    from mcoll_model import compare as C
    runs = json.loads((ROOT / "bench" / "records" / "cluster-4" / "runs.json").read_text())["runs"]
    assert {(r["hosts"], r["per_host"]) for r in runs} == {(2, 1), (2, 2), (4, 1), (4, 2)}
    assert {r["mpi"] for r in runs} == {"openmpi", "mpich"}
    errs = {"with": [], "without": [], "bound": []}
    for run in runs:
        assert run["link"]["topology"]["machine_cores"] == 2, run["run"]
        for key in ("with", "without"):
            link = dict(run["link"], topology=dict(run["link"]["topology"]))
            if key == "without":
                del link["topology"]["machine_cores"]
            lp, cp = tmp_path / "link.json", tmp_path / "cluster.json"
            lp.write_text(json.dumps(link))
            cp.write_text(json.dumps(run["cluster"]))
            _, _, rows = C.compare(lp, cp, nodes=run["hosts"], choice="built-in")
            e = [abs(r["error"]) for r in rows]
            if run["hosts"] * run["per_host"] > 2:
                errs[key] += e
            elif key == "with":
                errs["bound"].append(statistics.median(e))
    assert len(errs["with"]) == len(errs["without"]) == 240
    assert statistics.median(errs["without"]) > 0.9
    assert statistics.median(errs["with"]) < 0.55
    assert sum(e <= 0.2 for e in errs["with"]) > 3 * sum(e <= 0.2 for e in errs["without"])
    assert max(errs["bound"]) <= 0.2, errs["bound"]


def test_compare_knows_bcast_first_arrival_on_shared_cores():
    """`mcoll model compare` mirrors the library's choice of first_arrival for bcast
    (src/coll/bcast/bcast.c): nodes sharing cores, Open MPI, 4+ nodes of 1 rank from
    64 KiB pieces, 3 nodes of 1 rank from 128 KiB pieces, 4+ nodes of 2 ranks at
    64-256 KiB; the tree elsewhere on shared cores (bench/records/net16/)."""
    from mcoll_model import compare as C
    shared = dict(shared_cores=True, ranks_per_node=1, flavour="openmpi")
    two = {**shared, "ranks_per_node": 2}
    assert C.rules_inter("bcast", 4, 65536, **shared) == "first_arrival"
    assert C.rules_inter("bcast", 4, 1 << 20, **shared) == "first_arrival"
    assert C.rules_inter("bcast", 3, 1 << 20, **shared) == "first_arrival"
    assert C.rules_inter("bcast", 3, 131072, **shared) == "first_arrival"
    assert C.rules_inter("bcast", 3, 65536, **shared) == "binomial"
    assert C.rules_inter("bcast", 4, 32768, **shared) == "binomial"
    assert C.rules_inter("bcast", 2, 1 << 20, **shared) == "binomial"
    assert C.rules_inter("bcast", 4, 65536, **two) == "first_arrival"
    assert C.rules_inter("bcast", 4, 1 << 20, **two) == "binomial"
    assert C.rules_inter("bcast", 2, 65536, **two) == "binomial"
    assert C.rules_inter("bcast", 4, 65536, **{**shared, "flavour": "mpich"}) == "binomial"
    assert C.rules_inter("bcast", 4, 65536, ranks_per_node=1, flavour="openmpi") == "scatter_allgather"


def test_compare_prices_the_algorithm_mcoll_ran_between_nodes(tmp_path):
    """`mcoll model compare` prices, between nodes, the algorithm mcoll's built-in rules
    took for the row (what the measured time ran), not the model's own cheapest: at 4
    hosts a bcast of 64 KiB ran scatter-allgather (5 steps) where the model would take
    binomial (2). Over bench/records/cluster-4's 4-host jobs (160 rows) that moves the
    median |error| from 47% to 30% and the rows within 20% from 31 to 56 (issue 24
    part 7, bench/records/net6/)."""
    import statistics
    from mcoll_model import compare as C
    assert C.rules_inter("bcast", 4, 65536) == "scatter_allgather"
    assert C.rules_inter("bcast", 4, 4 << 20) == "scatter_allgather"  # one 256 KiB piece
    assert C.rules_inter("alltoall", 4, 65536) == "direct"
    assert C.rules_inter("bcast", 4, 65536, shared_cores=True) == "binomial"
    runs = json.loads((ROOT / "bench" / "records" / "cluster-4" / "runs.json").read_text())["runs"]
    errs = {"rules": [], "cheapest": []}
    for run in runs:
        lp, cp = tmp_path / "link.json", tmp_path / "cluster.json"
        lp.write_text(json.dumps(run["link"]))
        cp.write_text(json.dumps(run["cluster"]))
        both = {}
        for choice in errs:  # these runs predate bcast's tree on shared cores
            _, _, rows = C.compare(lp, cp, nodes=run["hosts"],
                                   choice="built-in" if choice == "rules" else choice)
            both[choice] = rows
            if run["hosts"] == 4:
                errs[choice] += [abs(r["error"]) for r in rows]
        if run["hosts"] == 4:
            ran = {(r["coll"], r["bytes"]): r["algorithm"] for r in both["rules"]}
            assert ran[("bcast", 65536)].endswith("+ scatter_allgather"), run["run"]
    assert len(errs["rules"]) == 160
    assert statistics.median(errs["rules"]) < statistics.median(errs["cheapest"]) - 0.1
    assert sum(e <= 0.2 for e in errs["rules"]) > sum(e <= 0.2 for e in errs["cheapest"]) + 15


def test_the_4x1_rows_after_the_lone_rank_fix_within_20_percent_on_mpich(tmp_path):
    """bench/records/net6/runs-4x1.json (4 hosts x 1 rank, 1 Gbit/s, both MPIs, the link
    calibrated in the same run): priced by what mcoll ran, MPICH's rows are within 20%
    at the median (10%, 14 of 20 rows; the model's own cheapest: 23%, 10 rows); Open
    MPI's are not (40%: its bcast and allgather rows took 2-4 scheduler slices more)."""
    import statistics
    from mcoll_model import compare as C
    runs = json.loads((ROOT / "bench" / "records" / "net6" / "runs-4x1.json").read_text())["runs"]
    med = {}
    for run in runs:
        lp, cp = tmp_path / "link.json", tmp_path / "cluster.json"
        lp.write_text(json.dumps(run["link"]))
        cp.write_text(json.dumps(run["cluster"]))
        for choice in ("rules", "cheapest"):  # (recorded before bcast's tree on shared cores)
            _, _, rows = C.compare(lp, cp, nodes=4, choice="built-in" if choice == "rules" else choice)
            assert len(rows) == 20
            med[run["mpi"], choice] = statistics.median(abs(r["error"]) for r in rows)
    assert med["mpich", "rules"] <= 0.2 < med["mpich", "cheapest"]
    assert med["openmpi", "rules"] < med["openmpi", "cheapest"]
