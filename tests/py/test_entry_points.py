"""Every row of the table of collectives (src/core/collectives.h) becomes its entry
points in the built library: blocking, MPI_I*, persistent, large-count and Fortran,
as far as the host MPI has them."""

import re
import subprocess

import pytest

from mpijob import BUILD, FLAVOURS, ROOT, flavour_param

ROW = re.compile(r"^\s*C\((\w+), (\w+), (\w+), (\w+), (\w+)\)", re.M)


def table():
    text = (ROOT / "src" / "core" / "collectives.h").read_text()
    return [m.groups() for m in ROW.finditer(text)]


def exported(flavour):
    lib = BUILD.path / flavour / "lib" / "libmcoll.so"
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_table_has_every_collective():
    names = [row[0] for row in table()]
    assert len(names) == 17 and len(set(names)) == 17, names
    for name, lower, upper, shape, tnbc in table():
        assert lower == name.lower() and upper == name.upper()
        assert shape in ("NONE", "SCALAR", "VECTOR", "W") and tnbc in ("TNBC", "NO_TNBC")


@pytest.mark.parametrize("flavour", [flavour_param(f) for f in FLAVOURS])
def test_every_row_has_its_entry_points(flavour):
    symbols = exported(flavour)
    persistent = next((p for p in ("MPI_", "MPIX_") if p + "Bcast_init" in symbols), None)
    large_count = "MPI_Bcast_c" in symbols
    fortran = "ompi_bcast_f" in symbols
    # Debian's MPICH is MPI-4 (persistent, large-count); Open MPI binds Fortran to PMPI.
    if flavour == "mpich":
        assert persistent == "MPI_" and large_count
    else:
        assert fortran
    missing = []
    for name, lower, _upper, shape, _tnbc in table():
        want = [f"MPI_{name}", f"MPI_I{lower}"]
        if persistent:
            want.append(f"{persistent}{name}_init")
        if large_count and shape != "NONE":
            want.append(f"MPI_{name}_c")
            if shape == "SCALAR":
                want.append(f"MPI_I{lower}_c")
        if fortran:
            want += [f"mpi_{lower}", f"mpi_{lower}_", f"mpi_{lower}__", f"ompi_{lower}_f"]
        missing += [s for s in want if s not in symbols]
    assert not missing, missing
