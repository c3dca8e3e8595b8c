"""T-NBC trace and order (src/tnbc/trace.c, the ordered schedule in src/tnbc/alltoall.c).

tests/mpi/test_tnbc.c's "order" case makes two alltoalls from one call site and after
each reads one word of every received block in a known order (2 ranks: 1,0; 3: 1,2,0;
4: 2,3,1,0). MCOLL_TNBC_TRACE must record exactly that order per rank, under the same
site key in every run (an offset into the program, not an address). MCOLL_TNBC_ORDER
with a file must make every rank complete first the block the file puts first (its
sender goes alone, the others after it; the trace of that run records the completion
order; at 2 ranks that is the whole order), with results identical to T-NBC off."""

import re

import pytest

import mpijob
from mpijob import mpiexec_argv, run_job

BUILD = mpijob.find_build("build")
JOB_TIMEOUT = 120
ON = {"MCOLL_TNBC": "1", "MCOLL_PROGRESS_THREAD": "1", "MCOLL_VERBOSE": "1",
      "MCOLL_FALLBACK": "error", "MCOLL_TNBC_CORES_SHARED": "1"}


def flavour_marks(flavour):
    if flavour in BUILD.flavours:
        return []
    return [pytest.mark.skip(reason=f"build/{flavour}/lib/libmcoll.so not built")]


def read_order(np):
    """The order the program reads its blocks in (test_tnbc.c: read_order)."""
    order = list(range(np - 1, -1, -1))
    if np > 2:
        order[0], order[1] = np - 2, np - 1
    return order


def run_order_case(flavour, np, env):
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    result = run_job(mpiexec_argv(flavour, np, program, ["order"]), dict(ON, **env), JOB_TIMEOUT)
    if result.returncode != 0 or "test_tnbc: passed (order)" not in result.stdout:
        pytest.fail(f"test_tnbc order failed\n{result.describe()}")
    m = re.search(r"read order (\S+) \(sum ([0-9a-f]+)\)", result.stdout)
    assert m, result.describe()
    assert [int(x) for x in m.group(1).split(",")] == read_order(np)
    return m.group(2)


def trace_lines(prefix, np):
    """{rank: fields of its alltoall line} from <prefix>.<rank>."""
    lines = {}
    for r in range(np):
        text = (prefix.parent / f"{prefix.name}.{r}").read_text()
        found = [dict(kv.split("=", 1) for kv in line.split())
                 for line in text.splitlines() if line.startswith("site=")]
        found = [f for f in found if f["coll"] == "alltoall" and f["size"] == str(np)]
        assert len(found) == 1, text
        lines[r] = found[0]
    return lines


def ints(text):
    return [int(x) for x in text.split(",")] if text else []


PARAMS = [pytest.param(f, np, marks=flavour_marks(f) + ([] if np == 2 else [mpijob.FULL]), id=f"{f}-{np}")
          for f in mpijob.FLAVOURS for np in (2, 3, 4)]


@pytest.mark.parametrize("flavour,np", PARAMS)
def test_trace_records_read_order(flavour, np, tmp_path):
    keys = []
    for run in range(2):
        prefix = tmp_path / f"trace{run}"
        run_order_case(flavour, np, {"MCOLL_TNBC_TRACE": str(prefix)})
        lines = trace_lines(prefix, np)
        for r, f in lines.items():
            assert ints(f["touched"]) == read_order(np), (r, f)
            assert f["rank"] == str(r) and f["blocks"] == str(np) and f["calls"] == "2", f
            assert int(f["count"]) == np * 256 * 1024, f
            assert sorted(ints(f["done"])) == list(range(np)), f
            assert re.fullmatch(r"mcoll-test-tnbc\+0x[0-9a-f]+", f["site"]), f
        keys.append({f["site"] for f in lines.values()})
    assert len(keys[0]) == 1 and keys[0] == keys[1], keys


@pytest.mark.full
@pytest.mark.parametrize("flavour,np", PARAMS)
def test_order_sets_completion_order(flavour, np, tmp_path):
    """Two orders: each rank's own trace (the read order), and one file for all ranks
    written here (sources rotated by one: an order no rank reads in); every rank
    completes the block put first before any other (at 2 ranks: all in the given
    order), and the data is right (the program checks every word; the sum is that of
    a run with T-NBC off)."""
    reference = run_order_case(flavour, np, {"MCOLL_TNBC": "0"})
    traced = tmp_path / "trace"
    run_order_case(flavour, np, {"MCOLL_TNBC_TRACE": str(traced)})
    site = trace_lines(traced, np)[0]
    rotated = tmp_path / "rotated"
    wanted = [(k + 1) % np for k in range(np)]
    rotated.write_text(f"# written by the test\nsite={site['site']} coll=alltoall size={np} "
                       f"count={site['count']} touched={','.join(map(str, wanted))}\n")
    for order_file, order in ((traced, read_order(np)), (rotated, wanted)):
        out = tmp_path / f"done-{order_file.name}"
        total = run_order_case(flavour, np, {"MCOLL_TNBC_ORDER": str(order_file),
                                             "MCOLL_TNBC_TRACE": str(out)})
        assert total == reference
        for r, f in trace_lines(out, np).items():
            done = ints(f["done"])
            assert sorted(done) == list(range(np)) and done[0] == order[0], (order_file.name, r, f)
            if np == 2:
                assert done == order, (order_file.name, r, f)
    # and with the order alone (no trace: the calls return early)
    assert run_order_case(flavour, np, {"MCOLL_TNBC_ORDER": str(rotated)}) == reference


TRACED_CASES = ["touch", "late", "free", "realloc", "munmap", "next", "read", "thread", "handler",
                "fork", "exit", "alltoallv", "allgatherv", "colls"]


@pytest.mark.full
@pytest.mark.parametrize("flavour,case", [pytest.param(f, c, marks=flavour_marks(f), id=f"{f}-{c}")
                                          for f in mpijob.FLAVOURS for c in TRACED_CASES])
def test_hazards_while_tracing(flavour, case, tmp_path):
    """Under MCOLL_TNBC_TRACE the pages stay protected after the data is in: every
    hazard of test_tnbc.c must still see the received data (interposed calls release
    the pages, the handler records and unprotects), and each rank writes its file."""
    program = BUILD.bin(flavour, "mcoll-test-tnbc")
    prefix = tmp_path / "trace"
    result = run_job(mpiexec_argv(flavour, 2, program, [case]),
                     dict(ON, MCOLL_TNBC_TRACE=str(prefix)), JOB_TIMEOUT)
    if result.returncode != 0 or f"test_tnbc: passed ({case})" not in result.stdout:
        pytest.fail(f"test_tnbc {case} failed while tracing\n{result.describe()}")
    for r in range(2):
        text = (tmp_path / f"trace.{r}").read_text()
        assert text.startswith("# mcoll T-NBC trace"), text
        assert "site=mcoll-test-tnbc+0x" in text, text
