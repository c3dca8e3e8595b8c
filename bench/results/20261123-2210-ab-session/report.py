import json,glob,statistics as st,collections,sys
flav=sys.argv[1] if len(sys.argv)>1 else 'openmpi'
for mode in ['', '-lat']:
    rows=collections.defaultdict(lambda: collections.defaultdict(list))
    for b in ['base','new']:
        for f in sorted(glob.glob(f'bench/results/20261123-2210-ab-session/{flav}-{b}-[0-9]{mode}.json')):
            for r in json.load(open(f))['results']:
                k=(r['coll'],r['bytes'])
                # per round: mcoll/native ratio inside the same round (alternating)
                for m,n in zip(r['mcoll_samples_us'], r['native_samples_us']):
                    rows[k][b].append(m/n)
                rows[k][b+'_m'] += r['mcoll_samples_us']
    print('mode', 'latency' if mode else 'back2back', flav)
    rat=[];rat2=[]
    worst=[]
    for k,v in rows.items():
        if not v['new'] or not v['base']: continue
        x=st.median(v['new'])/st.median(v['base']); rat.append(x)
        y=min(v['new_m'])/min(v['base_m']); rat2.append(y)
        worst.append((round(x,2),round(y,2),k))
    worst.sort(reverse=True)
    print(' normalized (mcoll/native per round) new/base: median',round(st.median(rat),3),' best-sample new/base: median',round(st.median(rat2),3))
    print(' highest:',worst[:6])
