"""mcoll-bench results as the tools read them, from any of three forms: a directory of
mcoll-bench JSON files (a raw run), one such file, or a bundle (one JSON file holding
the condensed documents of a directory: tools/bench/record.py condense). Every reader of
forced runs (fit.py, tools/bench/rules_evidence.py) goes through docs()."""

import json
from pathlib import Path


def docs(path):
    """[(name, doc)] of a directory, a bundle or a single mcoll-bench file; name is the
    file's stem (a bundle keeps its members' stems)."""
    path = Path(path)
    if path.is_dir():
        out = []
        for p in sorted(path.glob("*.json")):
            doc = json.loads(p.read_text())
            if doc.get("tool") == "mcoll-bench":
                out.append((p.stem, doc))
        return out
    doc = json.loads(path.read_text())
    if doc.get("tool") == "mcoll-bench-bundle":
        return [(d["name"], d) for d in doc["docs"]]
    return [(path.stem, doc)]
