"""A Fashion-MNIST-shaped fit from Python, X as a NumPy array and as a CuPy array (read in place),
in interleaved rounds: the wall time of fit and the report's stages, ms (docs/performance.md: "Data
already on the GPU"). The data: 60000 x 784 integers in [0, 255] around 10 centres, float64.

Usage: PYTHONPATH=build/python python3 scripts/bench_device_fit.py [--rounds 3]"""
import argparse
import time

import cupy as cp
import numpy as np

from kmeans_gpu import KMeans


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    r = np.random.default_rng(0)
    centres = r.integers(0, 256, (10, 784))
    X = np.clip(centres[r.integers(0, 10, 60000)] + r.normal(0, 40, (60000, 784)), 0, 255).round()
    Xd = cp.asarray(X)
    kw = dict(init="k-means++", random_state=1, max_iter=50, tol=0, impl="fused")
    KMeans(256, **kw).fit(X[:5000])  # the CUDA context and the kernels' loading
    for rnd in range(a.rounds):
        for name, data in (("numpy", X), ("cupy", Xd)):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            est = KMeans(256, **kw).fit(data)
            wall = time.perf_counter() - t
            s = est.report_["seconds"]
            stages = " ".join(f"{k}={s[k] * 1e3:.1f}" for k in ("init", "setup", "loop", "finish"))
            print(f"{name} round {rnd}: fit={wall * 1e3:.1f} {stages} inertia={est.inertia_!r} n_iter={est.n_iter_}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
