"""Tests of tools/py/mcoll_report.py on small synthetic mcoll-bench results."""

import copy
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "py"))
import mcoll_report as report  # noqa: E402


def make_result(coll, nbytes, native_us, mcoll_us, busbw_factor=1.0):
    total = nbytes
    native_gbs = total / native_us / 1e3 if nbytes else None
    mcoll_gbs = total / mcoll_us / 1e3 if nbytes else None
    return {
        "coll": coll, "bytes": nbytes, "total_bytes": total, "count": nbytes // 4,
        "iters": 10, "warmup": 1, "native_us": native_us, "mcoll_us": mcoll_us,
        "ratio": native_us / mcoll_us,
        "algbw_native_gbs": native_gbs, "algbw_mcoll_gbs": mcoll_gbs,
        "busbw_native_gbs": native_gbs * busbw_factor if nbytes else None,
        "busbw_mcoll_gbs": mcoll_gbs * busbw_factor if nbytes else None,
        "memcpy_gbs": 40.0 if nbytes else None,
        "native_samples_us": [native_us] * 7, "mcoll_samples_us": [mcoll_us] * 7,
    }


@pytest.fixture
def doc():
    return {
        "tool": "mcoll-bench", "format": 1, "argv": ["mcoll-bench", "-C", "barrier,allreduce"],
        "mpi_library": "Open MPI v4.1.4, package: Debian OpenMPI\nmore", "flavour": "openmpi",
        "nprocs": 2, "hostname": "vm", "date": "2025-01-01T00:00:00+0000",
        "mcoll_loaded": True, "mcoll_version": "0.1.0", "rounds": 7, "iters": 0,
        "warmup": -1, "results": [
            make_result("barrier", 0, 1.0, 0.5),
            make_result("allreduce", 8, 2.0, 1.0, busbw_factor=1.0),
            make_result("allreduce", 1024, 4.0, 5.0, busbw_factor=1.0),
            make_result("allreduce", 1 << 20, 250.0, 100.0, busbw_factor=1.0),
        ],
    }


def write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_table_rows_one_per_result(doc):
    rows = report.table_rows([doc])
    assert len(rows) == 4
    assert rows[0] == ["openmpi np2", "barrier", "0 B", "1.00", "0.50", "2.00", "-", "-"]
    assert rows[1][:6] == ["openmpi np2", "allreduce", "8 B", "2.00", "1.00", "2.00"]
    assert rows[3][2:6] == ["1 MiB", "250.0", "100.0", "2.50"]
    assert rows[3][6:] == ["4.19", "10.49"]
    assert all(len(r) == len(report.TABLE_HEADER) for r in rows)


def test_ratio_formatting():
    assert report.format_ratio(2.0) == "2.00"
    assert report.format_ratio(0.456) == "0.46"
    assert report.format_ratio(None) == "-"
    assert report.format_ratio(math.nan) == "-"


def test_ratio_computed_when_missing(doc):
    row = dict(doc["results"][2], ratio=None)
    assert report.ratio_of(row) == pytest.approx(0.8)


def test_sizes_and_times_formatting():
    assert report.format_size(8) == "8 B"
    assert report.format_size(4096) == "4 KiB"
    assert report.format_size(1536 * 1024) == "1.5 MiB"
    assert report.format_size(16 << 20) == "16 MiB"
    assert report.format_us(1234.5) == "1234"
    assert report.format_us(12.345) == "12.3"


def test_series_label_marks_runs_without_mcoll(doc):
    assert report.series_label(doc) == "openmpi np2"
    assert report.series_label(dict(doc, mcoll_loaded=False)) == "openmpi np2 (no mcoll)"
    assert report.series_label(dict(doc, complete=False)) == "openmpi np2 (partial)"


def test_series_label_of_a_test_host_setting(doc):
    """bench/hosts.sh tags each job with its setting: 2 hosts x 2 ranks and 4 x 1 are
    both np4, and must stay apart."""
    assert report.series_label(dict(doc, series="openmpi 1gbit 2x2")) == "openmpi 1gbit 2x2"
    nbc = dict(doc, series="mpich 1gbit 4x1", mode="nbc", progress_thread=1)
    assert report.series_label(nbc) == "mpich 1gbit 4x1 nbc pt1"


def test_markdown_has_header_metadata_and_rows(doc):
    text = report.render_markdown([doc])
    lines = text.splitlines()
    header = "| " + " | ".join(report.TABLE_HEADER) + " |"
    assert header in lines
    assert "Open MPI v4.1.4, package: Debian OpenMPI" in text
    assert sum(line.startswith("| openmpi np2 |") for line in lines) == 4


def test_load_rejects_other_json(tmp_path):
    path = write_json(tmp_path / "other.json", {"hello": 1})
    with pytest.raises(ValueError):
        report.load_result(path)


def test_main_writes_markdown_and_png_for_two_series(doc, tmp_path):
    other = copy.deepcopy(doc)
    other.update(flavour="mpich", nprocs=4)
    a = write_json(tmp_path / "a.json", doc)
    b = write_json(tmp_path / "b.json", other)
    md, png = tmp_path / "out.md", tmp_path / "out.png"
    assert report.main([str(a), str(b), "--md", str(md), "--png", str(png)]) == 0
    text = md.read_text(encoding="utf-8")
    assert "| mpich np4 | allreduce |" in text
    assert png.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_main_fails_cleanly_on_missing_file(tmp_path, capsys):
    assert report.main([str(tmp_path / "missing.json")]) == 1
    assert "mcoll_report" in capsys.readouterr().err


def make_cold_result(coll, nbytes, native, mcoll):
    """native/mcoll: (set-up, first, 1-10, 1-N, warm) in µs."""
    row = make_result(coll, nbytes, native[3], mcoll[3])
    for side, (setup, first, first10, _, warm) in (("native", native), ("mcoll", mcoll)):
        row.update({f"{side}_setup_us": setup, f"{side}_first_us": first,
                    f"{side}_first10_us": first10, f"{side}_warm_us": warm,
                    f"{side}_per_call_us": [first] + [warm] * 9})
    row["cold_calls"] = 10
    return row


@pytest.fixture
def cold_doc(doc):
    cold = copy.deepcopy(doc)
    cold.update(mode="cold", cold_calls=10, results=[
        make_cold_result("bcast", 8, (1.0, 1.5, 0.7, 0.6, 0.6), (700.0, 8.0, 0.8, 0.75, 0.5)),
        make_cold_result("bcast", 65536, (1.0, 20.0, 6.0, 6.0, 6.0), (700.0, 40.0, 3.5, 3.3, 3.3)),
    ])
    return cold


def test_modes_label_series_and_default_to_back2back(doc, cold_doc):
    assert report.mode_of(doc) == "back2back"
    assert report.series_label(cold_doc) == "openmpi np2 cold"
    assert report.series_label(dict(doc, mode="latency")) == "openmpi np2 latency"


def test_cold_rows_report_setup_first_calls_warm_and_ratios(cold_doc):
    rows = report.cold_table_rows([cold_doc])
    assert len(rows) == 2
    assert all(len(r) == len(report.COLD_HEADER) for r in rows)
    assert rows[0][:3] == ["openmpi np2 cold", "bcast", "8 B"]
    assert rows[0][3:13] == ["1.00", "700.0", "1.50", "8.00", "0.70", "0.80", "0.60", "0.75",
                             "0.60", "0.50"]
    assert rows[0][13:] == ["1.00", "1.50", "0.80"]  # cold/warm native, mcoll; native/mcoll
    assert rows[1][13:] == ["1.00", "1.00", "1.82"]


def test_markdown_sections_per_mode(doc, cold_doc):
    latency = dict(copy.deepcopy(doc), mode="latency")
    text = report.render_markdown([doc, latency, cold_doc])
    lines = text.splitlines()
    for mode in ("back2back", "latency", "cold"):
        assert f"## {report.MODE_TITLES[mode]}" in lines
    assert f"## {report.MODE_TITLES['nbc']}" not in lines  # no nbc run, no section
    assert "| " + " | ".join(report.COLD_HEADER) + " |" in lines
    assert sum(line.startswith("| openmpi np2 |") for line in lines) == 4
    assert sum(line.startswith("| openmpi np2 latency |") for line in lines) == 4
    assert sum(line.startswith("| openmpi np2 cold |") for line in lines) == 2
    # sections in the order back-to-back, latency, cold
    assert (lines.index("## " + report.MODE_TITLES["back2back"])
            < lines.index("## " + report.MODE_TITLES["latency"])
            < lines.index("## " + report.MODE_TITLES["cold"]))


def test_main_plots_all_modes(doc, cold_doc, tmp_path):
    latency = dict(copy.deepcopy(doc), mode="latency")
    paths = [write_json(tmp_path / f"{i}.json", d) for i, d in enumerate([doc, latency, cold_doc])]
    md, png = tmp_path / "out.md", tmp_path / "out.png"
    assert report.main([*map(str, paths), "--md", str(md), "--png", str(png)]) == 0
    assert "| openmpi np2 cold | bcast | 64 KiB |" in md.read_text(encoding="utf-8")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def make_nbc_result(coll, nbytes, native, mcoll, persistent=True):
    """native/mcoll: (blocking, post+wait, compute, total, compute_in, start+wait) µs."""
    row = make_result(coll, nbytes, native[1], mcoll[1])
    for side, t in (("native", native), ("mcoll", mcoll)):
        row.update({f"{side}_blocking_us": t[0], f"{side}_post_wait_us": t[1],
                    f"{side}_compute_us": t[2], f"{side}_total_us": t[3],
                    f"{side}_compute_in_us": t[4],
                    f"{side}_overlap_pct": 100 * (1 - (t[3] - t[2]) / t[1]),
                    f"{side}_overlap_osu_pct": 100 * (1 - (t[3] - t[4]) / t[1])})
        if persistent:
            row[f"{side}_start_wait_us"] = t[5]
    return row


@pytest.fixture
def nbc_doc(doc):
    nbc = copy.deepcopy(doc)
    nbc.update(mode="nbc", flavour="mpich", progress_thread="1", persistent=True, results=[
        # blocking 10, p+w 11 (1.1x), s+w 9; overlap (1 - (12 - 10) / 11) = 81.8%
        make_nbc_result("allreduce", 65536, (20, 22, 22, 40, 22, 21), (10, 11, 10, 12, 10, 9)),
        # p+w 13 (1.3x), s+w 11 > 10; overlap 1 - (20 - 10) / 13 = 23.1%
        make_nbc_result("alltoall", 1 << 20, (20, 22, 22, 40, 22, 21), (10, 13, 10, 20, 11, 11)),
        # small: no overlap target; total < compute: overlap over 100 shown as 100
        make_nbc_result("bcast", 8, (1, 2, 2, 1.5, 1.5, 1), (1, 1, 1, 0.5, 0.5, 0.5)),
    ])
    return nbc


def test_nbc_series_label_shows_progress_thread(nbc_doc):
    assert report.series_label(nbc_doc) == "mpich np2 nbc pt1"
    assert report.series_label(dict(nbc_doc, progress_thread="0")) == "mpich np2 nbc pt0"


def test_nbc_rows_ratios_overlap_and_targets(nbc_doc):
    header = report.nbc_header([nbc_doc])
    assert header == report.NBC_HEADER + report.NBC_PERSISTENT_HEADER + report.NBC_OVERLAP_HEADER
    rows = report.nbc_table_rows([nbc_doc])
    assert all(len(r) == len(header) for r in rows)
    cells = dict(zip(header, rows[0]))
    assert cells["size"] == "64 KiB"
    assert cells["blocking mcoll µs"] == "10.0" and cells["post+wait mcoll µs"] == "11.0"
    assert cells["p+w/blocking mcoll"] == "1.10" and cells["s+w/blocking mcoll"] == "0.90"
    assert cells["overlap mcoll %"] == "81.8" and cells["overlap native %"] == "18.2"
    assert cells["targets"] == "p+w<=1.2x ok, overlap>=80% ok, s+w<=blocking ok"
    cells = dict(zip(header, rows[1]))
    assert cells["overlap mcoll %"] == "23.1" and cells["overlap mcoll % (OSU)"] == "30.8"
    assert cells["targets"] == "p+w<=1.2x MISS, overlap>=80% MISS, s+w<=blocking MISS"
    cells = dict(zip(header, rows[2]))
    assert cells["overlap mcoll %"] == "100.0" and cells["overlap native %"] == "100.0"
    assert cells["targets"] == "p+w<=1.2x ok, s+w<=blocking ok"  # 8 B: no overlap target


def test_nbc_targets_depend_on_ranks_and_progress_thread(nbc_doc):
    r = nbc_doc["results"][0]
    names = lambda d: [n for n, _ in report.nbc_checks(d, r)]  # noqa: E731
    assert names(nbc_doc) == ["p+w<=1.2x", "overlap>=80%", "s+w<=blocking"]
    assert names(dict(nbc_doc, progress_thread="0")) == ["p+w<=1.2x", "s+w<=blocking"]
    assert names(dict(nbc_doc, nprocs=4)) == ["s+w<=blocking"]  # 4, 8 ranks: reported only


def test_nbc_without_persistent_omits_columns(nbc_doc):
    ompi = copy.deepcopy(nbc_doc)
    ompi.update(flavour="openmpi", persistent=False)
    for r in ompi["results"]:
        del r["native_start_wait_us"], r["mcoll_start_wait_us"]
    header = report.nbc_header([ompi])
    assert not set(report.NBC_PERSISTENT_HEADER) & set(header)
    rows = report.nbc_table_rows([ompi])
    assert all(len(r) == len(header) for r in rows)
    assert "s+w" not in rows[0][-1]
    # with an MPICH run beside it, the columns are there and '-' for Open MPI
    both = report.nbc_table_rows([ompi, nbc_doc])
    header = report.nbc_header([ompi, nbc_doc])
    assert dict(zip(header, both[0]))["start+wait mcoll µs"] == "-"
    assert dict(zip(header, both[3]))["start+wait mcoll µs"] == "9.00"


def test_nbc_summary_row_per_series(nbc_doc):
    pt0 = dict(copy.deepcopy(nbc_doc), progress_thread="0")
    rows = report.nbc_summary_rows([pt0, nbc_doc])
    assert all(len(r) == len(report.NBC_SUMMARY_HEADER) for r in rows)
    # p+w/blocking 1.1, 1.3, 1.0; s+w/blocking 0.9, 1.1, 0.5; overlap (64 KiB and 1 MiB
    # rows only) mcoll 81.8 and 23.1, native 18.2 and 18.2
    assert rows[1] == ["mpich np2 nbc pt1", "3", "1.10", "1.30", "2 of 3", "0.90", "2 of 3",
                       "52.4", "23.1", "18.2"]
    assert rows[0][0] == "mpich np2 nbc pt0" and rows[0][1:] == rows[1][1:]


def test_nbc_target_summary_counts_and_names_misses(nbc_doc):
    lines = report.nbc_target_summary([nbc_doc])
    assert lines[0] == "- **p+w<=1.2x**: 2 of 3 rows met; missed: mpich np2 nbc pt1 alltoall 1 MiB"
    assert lines[1] == ("- **overlap>=80%**: 1 of 2 rows met; missed: "
                        "mpich np2 nbc pt1 alltoall 1 MiB")
    assert lines[2].startswith("- **s+w<=blocking**: 2 of 3 rows met")


def make_idle_doc(doc, pt, cpu_pct, compute_ms, seconds=10):
    idle = copy.deepcopy(doc)
    idle.update(mode="idle", progress_thread=pt, results=[], idle={
        "seconds": seconds, "cpu_seconds": [c / 10 for c in cpu_pct], "cpu_pct": cpu_pct,
        "background_cpu_pct": cpu_pct, "max_cpu_pct": max(cpu_pct),
        "max_background_cpu_pct": max(cpu_pct), "compute_work": 1 << 25,
        "compute_samples_ms": compute_ms, "compute_ms": sorted(compute_ms)[len(compute_ms) // 2]})
    return idle


def test_idle_summary_pairs_jobs_and_checks_targets(doc):
    # ABBA; the load changes between pairs (the second pair twice as slow), the pairs'
    # ratios are 1.01 and 1.02: their median 1.015 (shown 1.02) passes
    docs = [make_idle_doc(doc, "0", [0.01, 0.02], [100, 100, 100]),
            make_idle_doc(doc, "1", [0.5, 0.2], [101, 101, 101]),
            make_idle_doc(doc, "1", [1.5], [204, 204, 204], seconds=1),
            make_idle_doc(doc, "0", [0.02, 0.01], [200, 200, 200], seconds=1)]
    assert [(off["progress_thread"], on["progress_thread"])
            for off, on in report.adjacent_pairs(docs)] == [("0", "1"), ("0", "1")]
    rows = report.idle_summary_rows(docs)
    # idle CPU from the 10 s jobs only: the 1 s job's 1.5% does not count
    assert rows == [["openmpi np2 idle", "2/2", "10", "0.02", "0.50", "150.0", "152.5", "2",
                     "1.02", "ok", "ok"]]
    slow = [make_idle_doc(doc, "0", [0.01], [100]), make_idle_doc(doc, "1", [1.5], [103])]
    assert report.idle_summary_rows(slow)[0][-4:] == ["1", "1.03", "MISS", "MISS"]
    unpaired = [make_idle_doc(doc, "1", [0.1], [100]), make_idle_doc(doc, "1", [0.1], [100])]
    assert report.idle_summary_rows(unpaired)[0][-4:] == ["0", "-", "ok", "-"]
    per_job = report.idle_table_rows(docs)
    assert per_job[1] == ["openmpi np2 idle", "1", "10", "0.50", "0.50", "101.0"]


def test_markdown_and_plot_with_nbc_and_idle(doc, nbc_doc, tmp_path):
    idle = [make_idle_doc(doc, "0", [0.01], [100]), make_idle_doc(doc, "1", [0.2], [101])]
    text = report.render_markdown([doc, nbc_doc, *idle])
    lines = text.splitlines()
    assert "## " + report.MODE_TITLES["nbc"] in lines
    assert "## " + report.MODE_TITLES["idle"] in lines
    assert "| " + " | ".join(report.nbc_header([nbc_doc])) + " |" in lines
    assert "| " + " | ".join(report.IDLE_SUMMARY_HEADER) + " |" in lines
    assert "| " + " | ".join(report.NBC_SUMMARY_HEADER) + " |" in lines
    assert sum(line.startswith("| mpich np2 nbc pt1 |") for line in lines) == 1 + 3  # summary, rows
    assert "- **overlap>=80%**: 1 of 2 rows met; missed: mpich np2 nbc pt1 alltoall 1 MiB" in lines
    assert any(line.startswith("- **mpich np2 nbc pt1**:") and line.endswith(
        "a block's time: the mean of its calls; persistent measured") for line in lines)
    # time panels of every collective, overlap panels of the nbc ones; idle: none
    assert report.plot_panels([doc, nbc_doc, *idle]) == [
        ("barrier", False), ("allreduce", False), ("alltoall", False), ("bcast", False),
        ("allreduce", True), ("alltoall", True), ("bcast", True)]
    paths = [write_json(tmp_path / f"{i}.json", d) for i, d in enumerate([doc, nbc_doc, *idle])]
    md, png = tmp_path / "out.md", tmp_path / "out.png"
    assert report.main([*map(str, paths), "--md", str(md), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # idle runs alone: a table, and a plot that says there is nothing to plot
    assert report.main([str(paths[2]), str(paths[3]), "--png", str(png)]) == 0
