#!/usr/bin/env python3
"""Table for summary.md: per run (fake nodes or test hosts, MPI, delays) and size, the
time from the last arrival to the last completion (us) of the host MPI, mcoll's fixed
leader and first_arrival, and fixed/first (> 1: first_arrival sooner)."""
import glob, json, os

os.chdir(os.path.dirname(os.path.abspath(__file__)))
print("| run | delays | bytes | host us | fixed leader us | first_arrival us | fixed/first |")
print("|---|---|---|---|---|---|---|")
for f in sorted(glob.glob("*.json")):
    d = json.load(open(f))
    where = "fake nodes=2" if f.startswith("fake") else "hosts 2+2"
    for r in d["rows"]:
        print(f"| {where} {d['mpi']} | {d['delays']} | {r['bytes']} | {r['host_us']:.1f} | "
              f"{r['fixed_leader_us']:.1f} | {r['first_arrival_us']:.1f} | "
              f"{r['fixed_leader_us'] / r['first_arrival_us']:.2f} |")
