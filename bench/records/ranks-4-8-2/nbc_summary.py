#!/usr/bin/env python3
"""nbc.sh's runs: per MPI, choice, bytes, build: medians over repetitions of mcoll's
blocking, post+wait, start+wait (us) and of the per-job ratios to the blocking call."""
import collections, glob, json, statistics as st, sys
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for fn in glob.glob(sys.argv[1] + '/*.json'):
    f, alg, side, _ = fn.split('/')[-1][:-5].split('-')
    for r in json.load(open(fn))['results']:
        b, pw, sw = r['mcoll_blocking_us'], r['mcoll_post_wait_us'], r.get('mcoll_start_wait_us') or float('nan')
        rows[(f, alg, r['bytes'])][side].append((b, pw, sw, pw / b, sw / b))
print('| MPI | bcast | bytes | base blk | base p+w | base s+w | base pw/b | base sw/b | new blk | new p+w | new s+w | new pw/b | new sw/b | jobs |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for k in sorted(rows):
    cells = []
    for side in ('base', 'new'):
        v = rows[k][side]
        cells += ['%.2f' % st.median(x[i] for x in v) for i in range(5)] if v else ['-'] * 5
    print('| %s | %s | %s | %s | %d |' % (*k, ' | '.join(cells), len(rows[k]['new'])))
