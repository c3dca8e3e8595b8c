"""The README: short, in the agreed order, and naming only things that exist -- every
parameter with the default src/core/config.h gives it, every path, every option of the
commands it shows, every link, and the reference benchmark's figures as its record has
them."""

import json
import re
import statistics
import subprocess

from mpijob import ROOT

README = ROOT / "README.md"
SECTIONS = ["What you gain", "Requirements", "Build and install", "Running a program",
            "What is covered", "Parameters users touch", "Opt-in features",
            "Tests and benchmarks", "The repository", "Documentation"]
COLLS = ["barrier", "bcast", "reduce", "allreduce", "reduce_scatter", "reduce_scatter_block",
         "scan", "exscan", "allgather", "allgatherv", "gather", "gatherv", "scatter", "scatterv",
         "alltoall", "alltoallv", "alltoallw"]
TOP_DIRS = ("bin", "src", "tools", "tests", "bench", "scripts", "docs", "include", "apps", "cmake")


def text():
    return README.read_text()


def config_params():
    src = (ROOT / "src" / "core" / "config.h").read_text()
    return {f"MCOLL_{name}": default
            for name, default in re.findall(r'X\((\w+), (?:NUM|STR), "([^"]*)"', src)}


def test_config_table_parses():
    # the table as the README test and tools/py/gen_parameters.py read it: every X( entry
    src = (ROOT / "src" / "core" / "config.h").read_text()
    assert len(config_params()) == src.count("  X(") and "MCOLL_DISABLE" in config_params()


def test_short_and_in_order():
    lines = text().splitlines()
    assert len(lines) <= 160
    assert [l for l in lines if len(l) > 160] == []
    assert lines[0].startswith("# mcoll")
    assert re.findall(r"^## (.+)$", text(), re.M) == SECTIONS


def test_parameter_table_matches_config():
    rows = re.findall(r"^\| `(MCOLL_\w+)` \|([^|]*)\|", text(), re.M)
    config = config_params()
    assert len(rows) >= 5
    for name, default in rows:
        assert name in config, name
        assert default.strip() == config[name], name


def test_every_variable_named_exists():
    config = config_params()
    colls = {c.upper() for c in COLLS}
    for name in set(re.findall(r"\bMCOLL_[A-Z_]*[A-Z]\b", text())):
        forced = name.startswith("MCOLL_ALG_") and name[len("MCOLL_ALG_"):] in colls
        assert name in config or forced or name == "MCOLL_ALG", name


def test_every_path_named_exists():
    ignored = (ROOT / ".gitignore").read_text().split()
    paths = re.findall(r"(?<![\w/.])((?:%s)/[\w./<>*-]*)" % "|".join(TOP_DIRS), text())
    assert len(paths) > 20
    for p in set(paths):
        p = p.rstrip(".")
        base = p.split("<")[0].split("*")[0]  # placeholders: the folder they are in
        if any(base.startswith(i) for i in ignored):
            continue
        assert (ROOT / base).exists(), p


def test_links_stay_in_the_repository():
    for target in re.findall(r"\]\(([^)]+)\)", text()):
        assert not target.startswith(("http", "/", "..")), target
        path, _, anchor = target.partition("#")
        assert (ROOT / path).exists(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, target


def test_no_wording_of_the_day():
    for word in ("today", "yesterday", "issue ", "seed 0", "session", "../shared"):
        assert word not in text().lower(), word


def options_of(script):
    return set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", (ROOT / script).read_text()))


def test_command_options_exist():
    """Every option the README gives a repository script is one the script knows."""
    body = text()
    for script in ("bin/mcollrun", "bench/run.sh", "tests/run.sh", "scripts/setup.sh"):
        used = set()
        for line in body.splitlines():
            m = re.search(re.escape(script) + r"((?: +--?[\w-]+(?: +\S+)?)*)", line)
            if m:
                used |= set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", m.group(1)))
        assert used <= options_of(script), (script, used - options_of(script))
    assert "--full" in options_of("tests/run.sh")


def test_docs_it_links_exist_and_link_back_nowhere_outside():
    docs = re.findall(r"\]\((docs/[\w.]+\.md)", text())
    assert len(set(docs)) >= 9
    for d in set(docs):
        body = (ROOT / d).read_text()
        assert "../shared" not in body and "bench/results/20" not in body.replace(
            "git show 1868efd:bench/results/", ""), d


def test_gain_table_is_the_reference_record():
    """The 'What you gain' table: each series' faster rows and median ratio as the
    reference record's data give them, and the commit the record names."""
    body = text()
    record = (ROOT / "bench" / "records" / "reference" / "README.md").read_text()
    commit = re.search(r"Commit measured: `(\w+)`", record).group(1)
    gain = body[body.index("## What you gain"):body.index("## Requirements")]
    assert f"commit `{commit}`" in gain
    subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", commit], check=True)
    faster, medians = [], []
    for name in ("openmpi-np2", "openmpi-np2-latency", "mpich-np2", "mpich-np2-latency"):
        doc = json.loads((ROOT / "bench" / "records" / "reference" / f"{name}.json").read_text())
        ratios = [r["ratio"] for r in doc["results"] if r.get("ratio")]
        faster.append(f"{sum(r > 1 for r in ratios)} of {len(ratios)}")
        medians.append(f"{statistics.median(ratios):.2f}")
    row = re.search(r"^\| rows where mcoll is faster \|(.*)\|$", gain, re.M).group(1)
    assert [c.strip() for c in row.split("|")] == faster
    row = re.search(r"^\| median over all rows \|(.*)\|$", gain, re.M).group(1)
    assert [c.strip() for c in row.split("|")] == medians


def test_collectives_named_are_the_wrapped_ones():
    """'The 17 collectives' of the coverage section: each is a row of the table its entry
    points are made from, has its body in src/pmpi, and is named in the README."""
    cover = text()[text().index("## What is covered"):text().index("## Parameters users touch")]
    assert f"The {len(COLLS)} collectives" in cover
    table = (ROOT / "src" / "core" / "collectives.h").read_text()
    assert sorted(re.findall(r"^\s*C\(\w+, (\w+),", table, re.M)) == sorted(COLLS)
    bodies = "".join(p.read_text() for p in (ROOT / "src" / "pmpi").glob("*.c"))
    assert sorted(re.findall(r"^int mcoll__wrap_(\w+)\(", bodies, re.M)) == sorted(COLLS)
    for name in ("barrier", "bcast", "reduce_scatter(_block)", "allgather(v)", "alltoall(v,w)"):
        assert name in cover, name
