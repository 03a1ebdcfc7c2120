#!/usr/bin/env python3
# Decode hit rates of the VRAM tier's LFU under three admission rules, from a route trace
# (strata run --trace-out): every miss taken in ("all", what strata sim's LFU does), only over a
# less used victim ("gate", strata_vram_learn), and a random share p of the misses ("frac": in
# --gpu-miss auto only the copied misses enter the tier). The prompt's chunk fills the cache first;
# only the one-token passes are counted (the engine's split_hit_rate). 2026-12-07, for
# docs/expert-store.md ("How far the hit rate can go").
#   python3 bench/sim_admission.py TRACE [SLOTS ...]   (default 31 63: the 25% / 50% shares of 128)
import random, sys
lines=[l for l in open(sys.argv[1]) if l.strip()]
toks=[]; chunk=[]; inchunk=0
for l in lines:
    if l.startswith('#'):
        if l.startswith('# chunk tokens='): inchunk=int(l.split('=')[1])
        continue
    groups=[list(map(int,g.split())) for g in l.split('|')]
    toks.append((groups, inchunk>0)); inchunk=max(0,inchunk-1)
L=len(toks[0][0])
def run(S, mode, p=1.0, seed=1):
    rnd=random.Random(seed); hits=miss=0
    for l in range(L):
        res=set(); freq={}; last={}; t=0
        # prompt: one access group of all distinct experts of the prompt tokens
        pe=[]; 
        for g,ic in toks:
            if ic:
                for e in g[l]:
                    if e not in pe: pe.append(e)
        for e in pe:
            freq[e]=freq.get(e,0)+1; t+=1; last[e]=t
            if e not in res:
                if len(res)<S: res.add(e)
                else:
                    v=min(res,key=lambda x:(freq.get(x,0),last.get(x,0))); res.remove(v); res.add(e)
        for g,ic in toks:
            if ic: continue
            req=g[l]
            for e in req:
                t+=1
                freq[e]=freq.get(e,0)+1; last[e]=t
                if e in res: hits+=1; continue
                miss+=1
                admit = mode=='all' or (mode=='frac' and rnd.random()<p) or mode=='gate'
                cand=[x for x in res if x not in req]
                if len(res)<S:
                    if admit: res.add(e)
                    continue
                if not admit or not cand: continue
                v=min(cand,key=lambda x:(freq.get(x,0),last.get(x,0)))
                if mode=='gate' and freq[v]>=freq[e]: continue
                res.remove(v); res.add(e)
    return hits/(hits+miss)
for S in [int(a) for a in sys.argv[2:]] or (31, 63):
    print(S, 'LFU all %.3f'%run(S,'all'), 'gate %.3f'%run(S,'gate'), ' '.join('frac%.2f %.3f'%(p,run(S,'frac',p)) for p in (0.5,0.25,0.1)))
