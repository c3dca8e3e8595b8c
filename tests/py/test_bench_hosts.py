"""bench/run.sh --hosts (bench/hosts.sh), the cluster benchmark: its usage, and the
summary it makes of a run's files (--report-only: no test hosts, no jobs). The run
itself needs root and minutes per setting; it is exercised by hand (records in
bench/records/cluster/)."""

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "run.sh"


def test_usage_names_the_settings():
    result = subprocess.run([RUN, "--hosts", "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    for option in ("--rates", "--hosts-n", "--per-host", "--jobs", "--report-only"):
        assert option in result.stdout


def test_report_only_summarises_a_run(tmp_path):
    stamp = "20260101-0000"
    (tmp_path / f"{stamp}-hosts-command.txt").write_text("# bench/run.sh --hosts test run\n")
    (tmp_path / f"{stamp}-hosts-rows.tsv").write_text(
        "setting\tflavour\twhat\tsize\thost\tmcoll\tvalue\n"
        "1gbit 2x1\topenmpi\tft-like TNBC=1 / TNBC=0\t-\t-\t-\t0.76\n")
    result = subprocess.run([RUN, "--hosts", "--report-only", stamp, "--results", tmp_path],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    md = (tmp_path / f"{stamp}-hosts.md").read_text()
    assert "| 1gbit 2x1 | openmpi | ft-like TNBC=1 / TNBC=0 | - | - | - | 0.76 |" in md


def test_report_only_names_series_by_setting(tmp_path):
    stamp = "20260101-0000"
    (tmp_path / f"{stamp}-hosts-command.txt").write_text("# test\n")
    (tmp_path / f"{stamp}-hosts-rows.tsv").write_text("setting\tflavour\twhat\tsize\thost\tmcoll\tvalue\n")
    doc = {"mode": "latency", "flavour": "openmpi", "nprocs": 4, "mcoll_loaded": True, "results": []}
    path = tmp_path / f"{stamp}-hosts-1gbit-2x2-openmpi-blocking.json"
    path.write_text(json.dumps(doc))
    subprocess.run([RUN, "--hosts", "--report-only", stamp, "--results", tmp_path],
                   capture_output=True, text=True, timeout=60)
    assert json.loads(path.read_text())["series"] == "openmpi 1gbit 2x2"


WATCH = ROOT / "bench" / "watch_job.sh"
MARKER = "^# mcoll-bench: done"


def test_watch_job_ends_a_job_that_hangs_after_its_results(tmp_path):
    out = tmp_path / "job.txt"
    result = subprocess.run([WATCH, "1", MARKER, out, "--", "sh", "-c",
                             "echo row; echo '# mcoll-bench: done'; exec sleep 60"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 75
    assert out.read_text().splitlines()[:2] == ["row", "# mcoll-bench: done"]


def test_watch_job_keeps_the_status_of_a_job_that_ends(tmp_path):
    out = tmp_path / "job.txt"
    done = subprocess.run([WATCH, "5", MARKER, out, "--", "sh", "-c", "echo '# mcoll-bench: done'"],
                          timeout=30)
    assert done.returncode == 0
    failed = subprocess.run([WATCH, "5", MARKER, out, "--", "sh", "-c", "echo partial; exit 3"],
                            timeout=30)
    assert failed.returncode == 3
    assert out.read_text() == "partial\n"


MATRIX = ROOT / "tools" / "bench" / "hosts_matrix.py"


def _blocking(path, rows):
    path.write_text(json.dumps({"mode": "latency", "results": [
        {"coll": c, "bytes": b, "native_us": n, "mcoll_us": m} for c, b, n, m in rows]}))


def test_matrix_puts_layouts_in_rows_and_rates_side_by_side(tmp_path):
    stamp = "20260101-0000"
    _blocking(tmp_path / f"{stamp}-hosts-1gbit-4x2-openmpi-blocking.json",
              [("bcast", 65536, 1000.0, 500.0), ("bcast", 1048576, 9000.0, 9000.0)])
    _blocking(tmp_path / f"{stamp}-hosts-10gbit-4x2-openmpi-blocking.json",
              [("bcast", 65536, 300.0, 600.0)])
    _blocking(tmp_path / f"{stamp}-hosts-1gbit-2x1-mpich-blocking.json",
              [("bcast", 65536, 520.0, 520.0)])
    files = sorted(tmp_path.glob("*-blocking.json"))
    result = subprocess.run(["python3", MATRIX, *files, "--png", tmp_path / "m.png"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ("| hosts x ranks | coll | size | openmpi 1gbit: host / mcoll µs, ratio | "
                        "openmpi 10gbit: host / mcoll µs, ratio | mpich 1gbit: host / mcoll µs, ratio | "
                        "mpich 10gbit: host / mcoll µs, ratio |")
    assert "| 4x2 | bcast | 64 KiB | 1000 / 500, **2.00** | 300 / 600, **0.50** | - | - |" in lines
    assert "| 2x1 | bcast | 64 KiB | - | - | 520 / 520, **1.00** | - |" in lines
    assert lines[-1].startswith("| all rows | | | median 1.50, mcoll faster in 1, slower in 0 of 2 |")
    assert (tmp_path / "m.png").stat().st_size > 1000


def test_lock_and_sizes_are_options():
    text = subprocess.run([RUN, "--hosts", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "--lock" in text and "--blocking-sizes" in text and "280 s" in text
