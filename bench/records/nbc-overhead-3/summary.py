#!/usr/bin/env python3
"""Summary of ab.sh runs: per MPI, coll, bytes, side: medians over reps of
mcoll blk, p+w, s+w and of the per-job ratios p+w/blk, s+w/blk."""
import json, glob, sys, statistics as st, collections
dirs = sys.argv[1:]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for d in dirs:
    for fn in glob.glob(d + '/*.json'):
        f, side = fn.split('/')[-1].split('-')[:2]
        j = json.load(open(fn))
        for r in j['results']:
            k = (f, r['coll'], r['bytes'])
            b, pw, sw = r['mcoll_blocking_us'], r['mcoll_post_wait_us'], r.get('mcoll_start_wait_us')
            rows[k][side].append((b, pw, sw, pw / b, (sw / b) if sw else float('nan')))
order = {'barrier': 0, 'bcast': 1, 'allreduce': 2, 'reduce': 3}
def fmt(x): return '%.2f' % x
print('| MPI | coll | bytes | base blk | base p+w | base s+w | base pw/b | base sw/b | new blk | new p+w | new s+w | new pw/b | new sw/b |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for k in sorted(rows, key=lambda k: (k[0], order.get(k[1], 9), k[2])):
    cells = []
    for side in ('base', 'new'):
        v = rows[k][side]
        if not v: cells += ['-'] * 5; continue
        cells += [fmt(st.median(x[i] for x in v)) for i in range(5)]
    n = len(rows[k]['new'])
    print('| %s | %s | %s | %s |' % (k[0], k[1], k[2], ' | '.join(cells)))
print('\nreps per side:', {s: len(v) for s, v in next(iter(rows.values())).items()})
