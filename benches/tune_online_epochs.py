# Tuning stream (not in the benchmark): 3 anisotropic blobs + 20% uniform background, d=2, ε=1, R ∈ {10, 100}, n = 60k.
import sys; sys.path.insert(0,'benches')
import bench_online_compare as b
import numpy as np
def tuning(n,d,seed):
    rng=np.random.default_rng(900+seed)
    c=0.2+0.6*rng.random((3,d)); lab=rng.integers(0,3,n)
    sd=np.array([0.02,0.06])[:d] if d==2 else 0.04
    pts=c[lab]+sd*rng.standard_normal((n,d))
    bg=rng.random(n)<0.2
    pts[bg]=rng.random((bg.sum(),d))
    return np.clip(pts,0,1)
b.STREAMS["tuning"]=(tuning,(2,))
out=[]
for R in (10,100):
    rows=[]
    for seed in range(3):
        rows+=b.run_setting("tuning",2,1.0,R,60_000,seed,("default","floor"))
    per={}
    for r in rows:
        if not str(r["method"]).endswith("(time)"):
            per.setdefault(r["method"],[]).append(r["range_rel"])
    out.append(f"R={R} default {np.mean(per['default']):.4f} floor {np.mean(per['floor']):.4f}")
print(sys.argv[1], " | ".join(out))
