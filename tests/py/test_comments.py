"""Comments in the C sources say what must stay true, not where an idea came from or
what a benchmark showed once: no issue/seed references, no paths to raw benchmark runs
or to documents outside the repository, no dated or day-relative wording, and no
benchmark figures (they go stale; docs/performance.md keeps them, with their record).
Pure Python, no build needed."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SOURCES = sorted(p for d in ("src", "include", "tools/bench", "tools/info")
                 for p in (ROOT / d).rglob("*") if p.suffix in (".c", ".h"))

# References that mean nothing to a reader of the repository: checked in comments and
# in string literals (algorithm descriptions are printed by mcoll-info).
REFERENCES = re.compile(
    r"\bseeds?\s*0\d\d\b|\bthe seed'?s\b|\bissue\s*#?\d+|\bdefect\s*#?\d+"
    r"|bench/results|\bSPECS\.md|\bDESIGN\.md|\bshared/"
    r"|\byesterday\b|\btoday'?s?\b|\b20\d\d-?[01]\d-?[0-3]\d\b", re.I)

# Benchmark figures, checked in comments only: speed ratios ("1.2-1.4x native",
# "0.5x") and timings ("0.42 us", "~30 µs").
FIGURES = re.compile(r"\b\d+(\.\d+)?(-\d+(\.\d+)?)?x (native|warm|faster|slower)\b"
                     r"|\b\d+(\.\d+|-\d+(\.\d+)?)x\b|\b\d+(\.\d+)?\s?(µs|us|ns)\b")

# Figures that are settings or fixed by the system, not measurements.
ALLOWED_FIGURES = re.compile(r"timer slack of 1 µs \(the default 50 µs")


def comments_and_strings(text):
    """(kind, line, text) of every comment and string literal in C source."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    for m in pattern.finditer(text):
        token = m.group(0)
        kind = "string" if token[0] in "\"'" else "comment"
        yield kind, text.count("\n", 0, m.start()) + 1, token


def scan(text):
    """(line, what) of every reference and figure in the comments (and of every
    reference in the string literals) of C source text."""
    out = []
    for kind, line, token in comments_and_strings(text):
        flat = " ".join(token.split())  # a figure may be wrapped across comment lines
        out += [(line, f"reference {m.group(0)!r}") for m in REFERENCES.finditer(flat)]
        if kind == "comment":
            out += [(line, f"figure {m.group(0)!r}")
                    for m in FIGURES.finditer(ALLOWED_FIGURES.sub("", flat))]
    return out


def test_sources_found():
    assert any(p.match("src/coll/*/*.c") for p in (s.relative_to(ROOT) for s in SOURCES))


@pytest.mark.parametrize("text, bad", [
    ("/* MAHCAF (seed 004): ... */", True),
    ("/* see bench/results/20261123-1037 */", True),
    ("/* Not done yet (issue 8, defect 7) */", True),
    ('"CP bcast (seed 004)"', True),
    ("/* 2 ranks, 32-512 KiB, 1.2-1.4x native */", True),
    ("/* 0.42 us with it, 0.37 without */", True),
    ("/* 4 MiB went from ~300 to\n * ~150 µs */", True),
    ("/* MAHCAF (docs/architecture.md): one skeleton */", False),
    ("/* at most 10 ms, blocks of 4x more calls, 2 x 128 calls, +0x<offset> */", False),
    ("/* calls 1-100 ~1.5x warm; below 8 KiB the areas win, 0.4x */", True),
    ('x = 0x1f; s = "us"; /* rank us */', False),
])
def test_scanner(text, bad):
    assert bool(scan(text)) == bad, scan(text)


def test_comments_state_reasons_not_history():
    bad = [f"{p.relative_to(ROOT)}:{line}: {what}"
           for p in SOURCES for line, what in scan(p.read_text(encoding="utf-8"))]
    assert not bad, ("comments must give the reason, not a seed/issue reference or a "
                     "benchmark figure (figures: docs/performance.md):\n" + "\n".join(bad))
