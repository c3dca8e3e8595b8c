"""Tests of the heat maps of tools/py/mcoll_report.py: the grid built from rows, the
colour scale, the PNGs a report writes, and the README's picture."""

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "py"))
import mcoll_report as report  # noqa: E402
from test_report import make_nbc_result, make_result  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
README_PICTURE = ROOT / "docs" / "images" / "reference-ratios.png"


def bench_doc(flavour="openmpi", nprocs=2, mode="back2back", results=None):
    return {"tool": "mcoll-bench", "format": 1, "mode": mode, "flavour": flavour,
            "nprocs": nprocs, "hostname": "vm", "mcoll_loaded": True, "rounds": 7,
            "results": results if results is not None else [
                make_result("barrier", 0, 1.0, 0.5),
                make_result("allreduce", 8, 2.0, 1.0),
                make_result("allreduce", 1024, 4.0, 5.0),
                make_result("bcast", 1024, 3.0, 1.5)]}


def test_grid_has_a_cell_per_coll_and_size_and_none_where_no_row():
    rows = [{"panel": "a", "coll": "bcast", "bytes": 8, "value": 2.0},
            {"panel": "a", "coll": "reduce", "bytes": 1024, "value": 0.5},
            {"panel": "a", "coll": "bcast", "bytes": 1024, "value": 1.5},
            {"panel": "b", "coll": "bcast", "bytes": 8, "value": math.nan},
            {"panel": "b", "coll": "scan", "bytes": 8, "value": None},
            {"panel": "b", "coll": "scan", "bytes": 16, "value": 3.0}]
    panels = report.heatmap_panels(rows)
    assert panels == [("a", ["bcast", "reduce"], [8, 1024], [[2.0, 1.5], [None, 0.5]]),
                      ("b", ["scan"], [16], [[3.0]])]
    assert report.heatmap_panels([]) == []


def test_ratio_rows_one_per_result_labelled_by_series():
    docs = [bench_doc(), bench_doc("mpich", 4, "latency")]
    rows = report.ratio_rows(docs)
    assert len(rows) == 8
    assert rows[0] == {"panel": "openmpi np2 back to back", "coll": "barrier", "bytes": 0,
                       "value": 2.0}
    assert rows[2]["value"] == pytest.approx(0.8)
    assert rows[4]["panel"] == "mpich np4 latency"
    # a -V run (bench/overlap.sh): the two settings name the panel
    varied = dict(bench_doc(nprocs=4), vary={"param": "INTER_OVERLAP", "values": ["0", "1"]})
    assert report.ratio_rows([varied])[0]["panel"] == "openmpi np4 INTER_OVERLAP 0 vs 1 back to back"


def test_overlap_rows_are_points_mcoll_minus_native_of_nbc_runs():
    nbc = bench_doc("mpich", 2, "nbc", [
        make_nbc_result("bcast", 65536, (10, 10, 10, 12, 10, 9), (10, 10, 10, 11, 10, 9))])
    nbc["results"][0].update(native_overlap_pct=-30.0, mcoll_overlap_pct=85.0)
    rows = report.overlap_rows([bench_doc(), nbc])
    # native clamped to 0 (OSU's convention): 85 - 0
    assert rows == [{"panel": "mpich np2 nbc", "coll": "bcast", "bytes": 65536, "value": 85.0}]


def test_colour_scale_is_symmetric_around_no_difference():
    assert report.heat_limit(report.HEAT_RATIO, [1.2, 0.9]) == 1.0      # 0.5 .. 2
    assert report.heat_limit(report.HEAT_RATIO, [3.0, 0.9]) == 2.0      # 0.25 .. 4
    assert report.heat_limit(report.HEAT_RATIO, [0.2]) == 3.0           # 1/8 .. 8
    assert report.heat_limit(report.HEAT_RATIO, [40.0]) == 3.0          # saturated
    assert report.heat_limit(report.HEAT_POINTS, [5.0]) == 100.0
    assert report.heat_coordinate(report.HEAT_RATIO, 0.5) == -1.0
    assert report.heat_coordinate(report.HEAT_RATIO, 2.0) == 1.0
    assert report.heat_ticks(report.HEAT_RATIO, 2.0) == (
        [-2, -1, 0, 1, 2], ["0.25", "0.5", "1", "2", "4"])
    assert report.heat_ticks(report.HEAT_POINTS, 100.0)[1] == ["-100", "-50", "0", "+50", "+100"]


def test_cell_labels_fit_four_characters():
    assert [report.heat_label(report.HEAT_RATIO, v) for v in (0.478, 1.0, 1.28, 9.94, 13.3)] == [
        "0.48", "1.0", "1.3", "9.9", "13"]
    assert report.heat_label(report.HEAT_POINTS, 35.4) == "+35"
    assert report.heat_label(report.HEAT_POINTS, -7.0) == "-7"
    assert report.heat_label(report.HEAT_POINTS, -0.2) == "0"


def test_heatmap_draws_any_table_of_rows(tmp_path):
    # rows from elsewhere, e.g. a cluster run over hosts: the same function draws them
    rows = [{"panel": f"openmpi {nodes} nodes x 2", "coll": coll, "bytes": 1 << k,
             "value": 0.5 + 0.25 * k}
            for nodes in (2, 4) for coll in ("bcast", "allreduce") for k in range(6)]
    path = tmp_path / "cluster.png"
    report.heatmap(rows, path, "cluster run")
    assert path.read_bytes()[:8] == PNG_MAGIC
    empty = tmp_path / "empty.png"
    report.heatmap([], empty, "nothing")
    assert empty.read_bytes()[:8] == PNG_MAGIC


def test_report_writes_heat_map_first_then_curves_and_overlap(tmp_path):
    nbc = bench_doc("mpich", 2, "nbc", [
        make_nbc_result("bcast", 65536, (10, 10, 10, 12, 10, 9), (10, 10, 10, 11, 10, 9))])
    paths = []
    for i, d in enumerate([bench_doc(), nbc]):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(d), encoding="utf-8")
    png = tmp_path / "out.png"
    assert report.main([*map(str, paths), "--md", str(tmp_path / "out.md"),
                        "--png", str(png)]) == 0
    for name in ("out.png", "out-curves.png", "out-overlap.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC, name
    # the heat map is a palette image: small
    from PIL import Image
    with Image.open(png) as image:
        assert image.mode == "P"
    only = tmp_path / "only.png"
    assert report.main([str(paths[0]), "--md", str(tmp_path / "o.md"), "--png", str(only),
                        "--heatmap-only", "--dpi", "60"]) == 0
    assert only.exists() and not (tmp_path / "only-curves.png").exists()
    curves = tmp_path / "c.png"
    assert report.main([str(paths[0]), "--md", str(tmp_path / "c.md"),
                        "--curves-png", str(curves)]) == 0
    assert curves.read_bytes()[:8] == PNG_MAGIC


def test_readme_picture_is_small_and_made_from_the_reference_record():
    assert README_PICTURE.read_bytes()[:8] == PNG_MAGIC
    assert README_PICTURE.stat().st_size < 200 * 1024
    assert "docs/images/reference-ratios.png" in (ROOT / "README.md").read_text()
    # the record it is drawn from has the four series the README's table quotes
    reference = ROOT / "bench" / "records" / "reference"
    docs = [report.load_result(reference / f"{f}.json") for f in
            ("openmpi-np2", "openmpi-np2-latency", "mpich-np2", "mpich-np2-latency")]
    panels = report.heatmap_panels(report.ratio_rows(docs))
    assert [p[0] for p in panels] == ["openmpi np2 back to back", "openmpi np2 latency",
                                      "mpich np2 back to back", "mpich np2 latency"]

