"""Unit tests that run without mpiexec (tests/unit), in every build: release,
ASan/UBSan and TSan (the sanitizers must be told about fiber switches)."""

import subprocess

import pytest

import mpijob

BUILDS = ["build", "build-asan", "build-tsan"]


@pytest.mark.parametrize("build", BUILDS)
def test_fiber(build):
    program = mpijob.ROOT / build / "unit" / "mcoll-test-fiber"
    if not program.exists():
        pytest.skip(f"{program} not built")
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: 0 failures" in result.stdout
    assert "WARNING: ThreadSanitizer" not in result.stderr, result.stderr
