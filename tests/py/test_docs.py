"""docs/ and bench/records/: the generated parameter page is current, links resolve
inside the repository, and the records stay small and complete."""

import re
import subprocess
import sys

from mpijob import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
RECORDS = ROOT / "bench" / "records"


def test_parameters_page_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "py" / "gen_parameters.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_parameters_page_has_every_parameter():
    sys.path.insert(0, str(ROOT / "tools" / "py"))
    import gen_parameters
    page = (ROOT / "docs" / "parameters.md").read_text()
    params = gen_parameters.parameters()
    config = (ROOT / "src" / "core" / "config.h").read_text()
    assert len(params) == config.count("  X(")
    for name, _, default, _ in params:
        assert re.search(rf"^\| `{name}` \| \w+ \| {re.escape(f'`{default}`') if default else ''} \|",
                         page, re.M), name


def slug(heading):
    return re.sub(r"[^\w\- ]", "", heading).strip().lower().replace(" ", "-")


def test_links_resolve_inside_the_repository():
    assert len(DOCS) >= 9
    for doc in DOCS + sorted(RECORDS.glob("*/README.md")):
        for target in re.findall(r"\]\(([^)]+)\)", doc.read_text()):
            assert not target.startswith(("http", "/")), (doc.name, target)
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            assert dest.exists() and ROOT in dest.parents, (doc.name, target)
            if anchor:
                assert anchor in {slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}, \
                    (doc.name, target)


def test_no_wording_of_the_day():
    for doc in DOCS:
        body = doc.read_text()
        for word in ("today", "yesterday", "issue ", "seed 0", "session", "../shared"):
            assert word not in body.lower(), (doc.name, word)


def test_records_are_small_and_say_what_they_are():
    folders = [d for d in RECORDS.iterdir() if d.is_dir()]
    assert len(folders) >= 5
    total = 0
    for d in folders:
        readme = d / "README.md"
        assert readme.exists(), d.name
        assert re.search(r"20\d\d-\d\d-\d\d", readme.read_text()), d.name   # dated
        assert "Machine" in readme.read_text() or "machine" in readme.read_text(), d.name
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        assert size < 1 << 20, (d.name, size)
        total += size
    assert total < 4 << 20


def test_bench_holds_records_not_raw_runs():
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "bench"], capture_output=True,
                           text=True, check=True).stdout.split()
    # A record is condensed: a handful of files per claim, not a run's every sample
    # (about 40 claims of a few files each, plus the benchmark's own scripts).
    assert 0 < len(files) <= 200
    per_claim = {}
    for f in files:
        parts = f.split("/")
        if len(parts) > 3 and parts[1] == "records":
            per_claim[parts[2]] = per_claim.get(parts[2], 0) + 1
    assert max(per_claim.values()) <= 20, per_claim
    assert not [f for f in files if f.startswith("bench/results/")]
    assert "bench/raw/" in (ROOT / ".gitignore").read_text().split()


def test_docs_cite_records_that_exist():
    for doc in DOCS + [ROOT / "README.md"]:
        for ref in re.findall(r"bench/records/([\w-]+)", doc.read_text()):
            assert (RECORDS / ref).is_dir(), (doc.name, ref)
