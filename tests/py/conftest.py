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


# Seconds each long file took in CI's side-by-side phase (full tier, 2 workers). The
# workers take files in collection order, so the longest go first: a long file started
# last would leave the other worker idle at the end. Only the order depends on these.
FILE_SECONDS = {
    "test_mpi_coll": 359, "test_thread_ranks": 318, "test_nbc": 297,
    "test_mpich_coll": 195, "test_float_consistency": 178, "test_tnbc": 172,
    "test_mismatch": 153, "test_persistent": 121, "test_datatypes": 87,
    "test_resources": 63, "test_alltoall_grid": 58, "test_descriptors": 42,
    "test_threads": 36, "test_tnbc_trace": 35, "test_rules": 35,
    "test_progress": 31, "test_slurm": 28, "test_fortran": 25,
}


def pytest_collection_modifyitems(items):
    """Tests on test hosts run alone (tests/run.sh's serial phase): they share the
    hosts' names and addresses, and time the links. Long files first (FILE_SECONDS)."""
    for item in items:
        if item.get_closest_marker("hosts"):
            item.add_marker(pytest.mark.serial)
    order = {id(item): k for k, item in enumerate(items)}
    items.sort(key=lambda item: (-FILE_SECONDS.get(item.path.stem, 0), order[id(item)]))
