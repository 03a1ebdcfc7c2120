#!/usr/bin/env python3
# A model, step for step, of 2-topk-on-device.diff's top-k (src/backend/cuda/select.cu there):
# keys, the radix select with warp 0's digit scan, the groups' threshold T, the candidates, the
# whole-row path when they overflow, the bitonic order; checked against the host's order
# (sample/sampler.c strata_top_k: logit descending, lower id on ties, NaN as -inf, -0 == +0) on
# random, tied, special-value, signed-zero, ascending and short rows. Python 3, no packages;
# about a minute:  python3 bench/device/pending/select_model.py
import struct, random
def key(f):
    if f != f: return 0x007fffff
    b = 0 if f == 0.0 else struct.unpack('<I', struct.pack('<f', f))[0]
    return (~b & 0xffffffff) if (b & 0x80000000) else (b | 0x80000000)
def kth(keys, k):
    prefix, mask, need = 0, 0, k
    for shift in (24,16,8,0):
        hist=[0]*256
        for kk in keys:
            if (kk & mask) == prefix: hist[(kk>>shift)&255]+=1
        found=None
        incl=0
        for lane in range(32):
            c=[hist[255-8*lane-u] for u in range(8)]; s=sum(c)
            excl=incl; incl+=s
            if excl < need <= incl:
                above=excl
                for u in range(8):
                    if above+c[u] >= need:
                        found=(prefix | (255-8*lane-u)<<shift, need-above); break
                    above+=c[u]
        assert found is not None
        prefix, need = found; mask |= 255<<shift
    return prefix, need
def topk_dev(row, k, G_MAX=4096, C_MAX=2048):
    n=len(row); keys=[key(float(v)) for v in row]; G=(n+63)//64
    C=C_MAX+1
    if G <= G_MAX:
        gk=[max(keys[g*64:(g+1)*64]) for g in range(G)]
        T = kth(gk, k)[0] if G > k else 0
        cand=[]
        for g in range(G):
            if gk[g] >= T:
                for j in range(g*64, min(n,(g+1)*64)):
                    if keys[j] >= T: cand.append((keys[j]<<32)|(~j & 0xffffffff))
        C=len(cand)
    path='fast'
    if C > C_MAX:
        path='full'
        T, need = kth(keys, k)
        cand=[(keys[j]<<32)|(~j&0xffffffff) for j in range(n) if keys[j] > T]
        eq=[j for j in range(n) if keys[j]==T][:need]
        cand += [(T<<32)|(~j&0xffffffff) for j in eq]
        assert len(cand)==k
    # bitonic
    P=2
    while P < len(cand): P<<=1
    a=cand+[0]*(P-len(cand))
    size=2
    while size<=P:
        stride=size//2
        while stride>0:
            for t in range(P//2):
                i=(t//stride)*2*stride + t%stride; j=i+stride
                if (a[i] < a[j]) == ((i & size)==0): a[i],a[j]=a[j],a[i]
            stride//=2
        size<<=1
    out=[]
    for i in range(k):
        idx = (~a[i]) & 0xffffffff; v=float(row[idx]); out.append((idx, float('-inf') if v!=v else v))
    return out, path
def topk_host(row, k):
    items=[(float('-inf') if v!=v else float(v), j) for j,v in enumerate(row)]
    # order: logit desc (with -0 == +0), id asc
    items.sort(key=lambda t:(-t[0], t[1]))
    return [(j, float(row[j]) if row[j]==row[j] else float('-inf')) for _,j in items[:k]]

import random
random.seed(1)
f32=lambda v: struct.unpack('<f',struct.pack('<f',v))[0]
n=20000
nan=float('nan'); inf=float('inf')
rows={}
rows['rand']=[f32(random.uniform(-3,3)) for _ in range(n)]
rows['levels']=[float(random.randrange(5)) for _ in range(n)]
rows['special']=[[nan,inf,-inf,-0.0,0.0][q] if q<5 else float(q-5) for q in (random.randrange(8) for _ in range(n))]
rows['equal']=[2.5]*n
rows['nan_inf']=[nan if i%2 else -inf for i in range(n)]
rows['asc']=[float(i) for i in range(n)]
r=[f32(random.uniform(-3,3)) for _ in range(n)]; r[:300]=[7.0]*300; rows['top300']=r
rows['q16']=[round(random.uniform(-3,3)*16)/16 for _ in range(n)]
rows['grp']=[float(i%64) for i in range(n)]
rows['zeros']=[-0.0 if i%64==5 else (0.0 if i%64==9 else -1.0) for i in range(n)]
for cnt in (2048, 2049, 1000):  # candidates at the sort's limit, one past it (the whole row), 1,000
    r=[f32(random.uniform(-3,3)) for _ in range(n)]
    for t in range(cnt): r[(t//32)*64 + t%32]=50.0
    rows['cand%d' % cnt]=r
bad=0
for name,row in rows.items():
    for k in (1,40,256):
        got,path=topk_dev(row,k); want=topk_host(row,k)
        ok = [(a, struct.pack('<f',b)) for a,b in got]==[(a, struct.pack('<f',b)) for a,b in want]
        if not ok: bad+=1
        print(name,k,path,'ok' if ok else 'FAIL', got[:3], want[:3] if not ok else '')
for m in (5,40,300,2100):
    for name in ('levels','zeros','rand'):
        k = m if m<40 else (256 if m==2100 else 40)
        got,path=topk_dev(rows[name][3:3+m],k); want=topk_host(rows[name][3:3+m],k)
        ok=[(a, struct.pack('<f',b)) for a,b in got]==[(a, struct.pack('<f',b)) for a,b in want]
        bad+= not ok
        print('short',m,name,path,'ok' if ok else 'FAIL')
print('bad',bad)
raise SystemExit(1 if bad else 0)
