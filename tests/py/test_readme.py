"""The README's parameter table names every parameter of src/core/config.h, with the
same default, and nothing else."""

import re

from mpijob import ROOT


def config_params():
    text = (ROOT / "src" / "core" / "config.h").read_text()
    return {f"MCOLL_{name}": default
            for name, default in re.findall(r'X\((\w+), (?:NUM|STR), "([^"]*)"', text)}


def readme_params():
    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `(MCOLL_\w+)` \|([^|]*)\|", text, re.M)
    return {name: default.strip() for name, default in rows}


def test_config_has_parameters():
    assert len(config_params()) > 10


def test_readme_table_matches_config():
    readme, config = readme_params(), config_params()
    assert readme == config
