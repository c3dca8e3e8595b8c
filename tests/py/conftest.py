"""Shared by the MPI tests: which builds exist, shown in pytest's header."""

import mpijob


def pytest_report_header(config):
    lines = []
    for name in ("build", "build-asan"):
        build = mpijob.find_build(name)
        flavours = ", ".join(build.flavours) or "none (not built)"
        lines.append(f"mcoll {name}/: {flavours}")
    return lines
