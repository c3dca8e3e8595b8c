#!/usr/bin/env python3
"""Table for summary.md: per MPI, collective and forced inter-node algorithm, host time /
mcoll time per size (> 1: mcoll faster), and from the verbose report whether the forced
algorithm ran every inter-node call ("ran": calls of it / inter-node calls; "denied":
calls where its restrictions did not hold and the normal choice ran, reported)."""
import glob, json, os, re

os.chdir(os.path.dirname(os.path.abspath(__file__)))
print("| MPI | coll | forced between nodes | ran / inter calls | denied | host/mcoll 8 B (barrier: 0 B) | 512 B | 32 KiB |")
print("|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob("*.json")):
    mpi, coll, alg = f[:-5].split("-", 2)
    rows = {r["bytes"]: r for r in json.load(open(f))["results"]}
    err = open(f[:-5] + ".err").read()
    m = re.search(rf"^mcoll: {coll}\.inter calls=(\d+)(.*)$", err, re.M)
    calls = int(m.group(1)) if m else 0
    ran = int(re.search(rf"{alg}=(\d+)", m.group(2)).group(1)) if m else 0
    denied = sum(int(n) for n in re.findall(rf"^mcoll: {coll}\.inter forced {alg} not allowed: .*=(\d+)$", err, re.M))
    sizes = (0, None, None) if coll == "barrier" else (8, 512, 32768)
    ratios = " | ".join(f"{rows[b]['ratio']:.2f}" if b in rows else "-" for b in sizes)
    print(f"| {mpi} | {coll} | {alg} | {ran} / {calls} | {denied} | {ratios} |")
