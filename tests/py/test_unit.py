"""Unit tests that run without mpiexec (tests/unit), in every build: release,
ASan/UBSan and TSan (the sanitizers must be told about fiber switches)."""

import subprocess

import pytest

import mpijob

# The sanitizer builds are made for the full tier only.
BUILDS = ["build", pytest.param("build-asan", marks=mpijob.FULL), pytest.param("build-tsan", marks=mpijob.FULL)]


@pytest.mark.parametrize("build", BUILDS)
def test_fiber(build):
    program = mpijob.ROOT / build / "unit" / "mcoll-test-fiber"
    if not program.exists():
        pytest.skip(f"{program} not built")
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: 0 failures" in result.stdout
    assert "WARNING: ThreadSanitizer" not in result.stderr, result.stderr


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_transport(build, ranks):
    """The node transport layer (src/node/) over forked processes: slot protocol,
    publish/hold, peer reads and writes through CMA and memcpy, test twins."""
    program = mpijob.ROOT / build / "unit" / "mcoll-test-transport"
    if not program.exists():
        pytest.skip(f"{program} not built")
    result = subprocess.run([str(program), str(ranks)], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok: 0 failures ({ranks} ranks)" in result.stdout
    assert "publish/hold (memcpy)" in result.stdout
    assert "ring: " in result.stdout
    assert "WARNING: ThreadSanitizer" not in result.stderr, result.stderr


@pytest.mark.parametrize("fault", ["--break-slots", "--break-hold", "--break-ring"])
def test_transport_detects_broken_protocol(fault):
    """Leaving out the slot wait, the ring's wait or the hold must make the unit test fail: it sees
    data overwritten under its readers."""
    program = mpijob.ROOT / "build" / "unit" / "mcoll-test-transport"
    if not program.exists():
        pytest.skip(f"{program} not built")
    result = subprocess.run([str(program), "3", fault], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode != 0, result.stdout
    assert "overwritten" in result.stderr or "changed under its readers" in result.stderr, \
        result.stderr
