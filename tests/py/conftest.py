"""Shared by the MPI tests: which builds exist, shown in pytest's header."""

import pytest

import mpijob


def pytest_report_header(config):
    lines = []
    for name in ("build", "build-asan"):
        build = mpijob.find_build(name)
        flavours = ", ".join(build.flavours) or "none (not built)"
        lines.append(f"mcoll {name}/: {flavours}")
    return lines


def pytest_collection_modifyitems(items):
    """Tests on test hosts run alone (tests/run.sh's serial phase): they share the
    hosts' names and addresses, and time the links."""
    for item in items:
        if item.get_closest_marker("hosts"):
            item.add_marker(pytest.mark.serial)
