#!/usr/bin/env python3
"""Medians over the repeats of bench_coll_all.sh: per T, collective and size the time of
thread ranks (their mcoll-bench "mcoll" column: both columns call the runtime), of
process-rank mcoll and of the host MPI (the process job's two columns), and the ratios.
   coll_table.py OUTDIR [--max-bytes N] [--markdown]"""
import glob
import json
import re
import statistics
import sys

out = sys.argv[1]
max_bytes = int(sys.argv[sys.argv.index('--max-bytes') + 1]) if '--max-bytes' in sys.argv else None
runs = {}
for path in glob.glob(f'{out}/*-T*-*.json'):
    mode, t, _ = re.match(r'.*/(threads|process)-T(\d+)-(\d+)\.json', path).groups()
    try:
        results = json.load(open(path))['results']
    except (ValueError, KeyError):
        continue
    for r in results:
        key = (int(t), r['coll'], r['bytes'])
        cell = runs.setdefault(key, {'thr': [], 'mcoll': [], 'host': []})
        if mode == 'threads':
            cell['thr'].append(r['mcoll_us'])
        else:
            cell['mcoll'].append(r['mcoll_us'])
            cell['host'].append(r['native_us'])
order = []
for path in sorted(glob.glob(f'{out}/threads-T*-1.json')):
    pass
print('| T | collective | bytes | threads us | mcoll us | host us | mcoll/thr | host/thr | n |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|')
for key in sorted(runs, key=lambda k: (k[0], k[1], k[2])):
    cell = runs[key]
    if not cell['thr'] or not cell['mcoll'] or (max_bytes and key[2] > max_bytes):
        continue
    t, m, h = (statistics.median(cell[c]) for c in ('thr', 'mcoll', 'host'))
    n = min(len(cell['thr']), len(cell['mcoll']))
    print(f'| {key[0]} | {key[1]} | {key[2]} | {t:.2f} | {m:.2f} | {h:.2f} | {m / t:.2f} | {h / t:.2f} | {n} |')
