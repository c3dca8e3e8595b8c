"""The node transport layer (src/node/) stays the one place that
touches peer memory, and stays below the algorithms: these greps keep it so."""

import re

import mpijob

SRC = mpijob.ROOT / "src"


def c_files():
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".c", ".h"))


def code_of(path):
    """The file without its comments and string literals."""
    text = path.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def rel(path):
    return str(path.relative_to(SRC))


def test_only_the_layer_calls_the_peer_memory_syscalls():
    """process_vm_readv/writev and their wrappers are called from src/node/ (and the
    wrappers' own file) only; every engine goes through node/peer.h. The thread-rank
    runtime (its own library) has its transport between processes in one file."""
    calls = re.compile(r"\b(process_vm_readv|process_vm_writev|mcoll__cma_read|mcoll__cma_write)\s*\(")
    # libc/interpose.c defines the application's process_vm_* (T-NBC waits there for
    # protected ranges, then makes the system call): none of mcoll's own peer reads
    allowed = {"shm/cma.c", "shm/shm.h", "libc/interpose.c", "threads/node_copy.c"}
    offenders = [f"{rel(p)}: {m.group(1)}" for p in c_files()
                 if not rel(p).startswith("node/") and rel(p) not in allowed
                 for m in calls.finditer(code_of(p))]
    assert offenders == []
    # shm.h only declares them.
    assert "mcoll__cma_read(pid_t" in code_of(SRC / "shm" / "shm.h")


def test_the_layer_is_below_the_algorithms():
    """src/node/ includes shm/, core/ and node/ only (never coll/, comm/, task/, hier/)."""
    include = re.compile(r'#include\s+"([a-z_]+)/')
    bad = [f"{rel(p)}: {m.group(1)}/" for p in (SRC / "node").iterdir()
           for m in include.finditer(p.read_text()) if m.group(1) not in ("shm", "core", "node")]
    assert bad == []
    assert (SRC / "node" / "peer.h").exists() and (SRC / "node" / "slot.h").exists()


def test_one_slot_protocol_and_one_address_format():
    """The slot runs are advanced in node/slot.h alone, and no engine keeps an
    address in a data line of its own making (the record is node/publish.h's)."""
    run_fields = re.compile(r"(area_slots|red_slots|run)(\.|->)(from|last|seen)\b")
    offenders = [rel(p) for p in c_files()
                 if not rel(p).startswith("node/") and run_fields.search(code_of(p))]
    assert offenders == []
    assert all("cma_addr" not in code_of(p) for p in c_files())


def test_node_counters_and_ring_only_through_the_layer():
    """Engines take area generations through node/ (slot_take, area_take, area_next)
    and never write the channel's counter back, and the ring's slots and consumed
    flags are touched in node/ring.h alone."""
    writes_area_gen = re.compile(r"->area_gen\s*(=[^=]|\+=|\+\+|--)|\+\+\s*\w+(->\w+)*->area_gen")
    ring = re.compile(r"(->|\.)slot\[|(->|\.)consumed\b")
    # comm and shm set the counters up; coll/reduce/red_node.c puts a node back in
    # step after a mismatched call (resync)
    allowed = {"shm/channel.c", "comm/context.c", "coll/reduce/red_node.c"}
    offenders = [rel(p) for p in c_files()
                 if not rel(p).startswith(("node/", "shm/")) and rel(p) not in allowed
                 and (writes_area_gen.search(code_of(p)) or ring.search(code_of(p)))]
    assert offenders == []
