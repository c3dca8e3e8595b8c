#!/usr/bin/env python3
"""Medians over the repeats of bench_coll_all.sh: per T, collective and size the time of
thread ranks (their mcoll-bench "mcoll" column: both columns call the runtime), of
process-rank mcoll and of the host MPI (the process job's two columns), and the ratios
(> 1: thread ranks faster).
   coll_table.py OUTDIR [--max-bytes N]        one row per T, collective and size
   coll_table.py OUTDIR --summary              per T and collective: the ratios' geometric
                                               mean and minimum, <= 4 KiB and above
   coll_table.py OUTDIR --counts               per T: rows >= 1.5x mcoll, slower than mcoll,
                                               slower than the host (and than "before")
With BEFORE=DIR in bench_coll_all.sh (another build's thread ranks in the same repeats,
before-T*.json) the rows gain its time and before/thr."""
import glob
import json
import math
import re
import statistics
import sys

out = sys.argv[1]
max_bytes = int(sys.argv[sys.argv.index('--max-bytes') + 1]) if '--max-bytes' in sys.argv else None
ORDER = ['barrier', 'bcast', 'reduce', 'allreduce', 'allgather', 'allgatherv', 'gather',
         'gatherv', 'scatter', 'scatterv', 'alltoall', 'alltoallv', 'reduce_scatter_block',
         'reduce_scatter', 'scan', 'exscan']
runs = {}
for path in glob.glob(f'{out}/*-T*-*.json'):
    mode, t, _ = re.match(r'.*/(threads|process|before)-T(\d+)-(\d+)\.json', path).groups()
    try:
        results = json.load(open(path))['results']
    except (ValueError, KeyError):
        continue
    for r in results:
        cell = runs.setdefault((int(t), r['coll'], r['bytes']),
                               {'thr': [], 'mcoll': [], 'host': [], 'before': []})
        if mode == 'threads':
            cell['thr'].append(r['mcoll_us'])
        elif mode == 'before':
            cell['before'].append(r['mcoll_us'])
        else:
            cell['mcoll'].append(r['mcoll_us'])
            cell['host'].append(r['native_us'])
rows = []
for key in sorted(runs, key=lambda k: (k[0], ORDER.index(k[1]) if k[1] in ORDER else 99, k[2])):
    cell = runs[key]
    if not cell['thr'] or not cell['mcoll'] or (max_bytes and key[2] > max_bytes):
        continue
    t, m, h = (statistics.median(cell[c]) for c in ('thr', 'mcoll', 'host'))
    b = statistics.median(cell['before']) if cell['before'] else None
    rows.append((*key, t, m, h, min(len(cell['thr']), len(cell['mcoll'])), b))


def gmean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


if '--counts' in sys.argv:
    has_before = any(r[7] for r in rows)
    print('| T | rows | >= 1.5x mcoll | slower than mcoll | slower than host |'
          + (' faster than before | slower than before |' if has_before else ''))
    print('|---|---:|---:|---:|---:|' + ('---:|---:|' if has_before else ''))
    for tt in sorted({r[0] for r in rows}):
        part = [r for r in rows if r[0] == tt and r[2] <= 4096]
        cells = [len(part), sum(r[4] / r[3] >= 1.5 for r in part), sum(r[4] < r[3] for r in part),
                 sum(r[5] < r[3] for r in part)]
        if has_before:
            cells += [sum(r[7] > r[3] for r in part if r[7]), sum(r[7] < r[3] for r in part if r[7])]
        print(f'| {tt} | ' + ' | '.join(map(str, cells)) + ' |')
    sys.exit(0)

if '--summary' in sys.argv:
    print('| T | collective | mcoll/thr <= 4 KiB: geo. mean (min) | host/thr <= 4 KiB | '
          'mcoll/thr > 4 KiB: geo. mean (min) | host/thr > 4 KiB |')
    print('|---|---|---:|---:|---:|---:|')
    for tt in sorted({r[0] for r in rows}):
        for coll in ORDER:
            small = [r for r in rows if r[0] == tt and r[1] == coll and r[2] <= 4096]
            large = [r for r in rows if r[0] == tt and r[1] == coll and r[2] > 4096]
            if not small:
                continue
            cells = []
            for part in (small, large):
                if not part:
                    cells += ['-', '-']
                    continue
                mt = [r[4] / r[3] for r in part]
                ht = [r[5] / r[3] for r in part]
                cells += [f'{gmean(mt):.2f} ({min(mt):.2f})', f'{gmean(ht):.2f} ({min(ht):.2f})']
            print(f'| {tt} | {coll} | ' + ' | '.join(cells) + ' |')
    sys.exit(0)
print('| T | collective | bytes | threads us | mcoll us | host us | mcoll/thr | host/thr | repeats |'
      ' before us | before/thr |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for tt, coll, size, t, m, h, n, b in rows:
    extra = f' {b:.2f} | {b / t:.2f} |' if b else ' - | - |'
    print(f'| {tt} | {coll} | {size} | {t:.2f} | {m:.2f} | {h:.2f} | {m / t:.2f} | {h / t:.2f} | {n} |'
          + extra)
