#!/usr/bin/env python3
"""Flash-KMeans (svg-project/flash-kmeans, Triton) as a peer: one precision per process, so that
TRITON_F32_DEFAULT (tf32 or ieee) is read before its kernels compile. Its package is not part of this
project: --flash names the folder that holds `flash_kmeans/` (../shared/peers/README.md says how to bring
it). Time per iteration as that README measures it: (t(loops + 1) - t(1)) / loops, first-K init, tol -1.

The stored version's kernels index coordinates with tl.arange(0, D), which needs a power of two, and
its tl.dot needs D >= 16; other d are padded with zero columns to the next power of two, at least 16
(distances and labels unchanged, the work grows by padded/d), and the row says so. Its fused finalize
launches a (1, K) grid, so K > 65535 takes its unfused update (`fused=False`, its own earlier path: the
sorted update, then the mean and the shift in PyTorch). Prints one JSON line: ms_per_iter, padded_to,
fused, and with --inertia the final inertia in double.

--metric cosine or dot times its batch_kmeans_Cosine or batch_kmeans_Dot instead (no --inertia).

Usage: flash_peer.py --flash DIR --mode tf32|fp16|fp64|ieee --clusters K
                     (--npy FILE | --objects N --coords D [--seed S]) [--loops 10] [--inertia]
                     [--metric euclid|cosine|dot]"""
import argparse
import inspect
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flash", required=True)
    ap.add_argument("--mode", required=True, choices=["tf32", "fp16", "fp64", "ieee"])
    ap.add_argument("--clusters", type=int, required=True)
    ap.add_argument("--npy", default=None)
    ap.add_argument("--objects", type=int, default=0)
    ap.add_argument("--coords", type=int, default=0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--loops", type=int, default=10)
    ap.add_argument("--inertia", action="store_true")
    ap.add_argument("--metric", default="euclid", choices=["euclid", "cosine", "dot"])
    a = ap.parse_args()
    if a.inertia and a.metric != "euclid":
        ap.error("--inertia is for --metric euclid")
    if not a.npy and (a.objects <= 0 or a.coords <= 0):
        ap.error("give --npy FILE, or --objects N and --coords D")
    os.environ["TRITON_F32_DEFAULT"] = "ieee" if a.mode == "ieee" else "tf32"
    if not os.path.isdir(os.path.join(a.flash, "flash_kmeans")):
        print(f"flash_peer.py: no flash_kmeans package under {a.flash}", file=sys.stderr)
        return 2
    sys.path.insert(0, a.flash)
    import torch
    from flash_kmeans import kmeans_triton_impl as impl  # no torch fallback: fail loudly

    takes_fused = "fused" in inspect.signature(impl.batch_kmeans_Euclid).parameters  # (versions differ)

    def batch_kmeans_Euclid(*args, fused=True, **kwargs):  # the metric's entry point
        if a.metric == "euclid":
            return impl.batch_kmeans_Euclid(*args, **kwargs, **({"fused": fused} if takes_fused else {}))
        return (impl.batch_kmeans_Cosine if a.metric == "cosine" else impl.batch_kmeans_Dot)(*args, **kwargs)

    if a.npy:
        import numpy as np
        x64 = torch.from_numpy(np.load(a.npy)).to("cuda", torch.float64)
    else:
        g = torch.Generator(device="cuda").manual_seed(a.seed)
        x64 = torch.rand((a.objects, a.coords), device="cuda", dtype=torch.float32, generator=g).double()
    n, d = x64.shape
    k = a.clusters
    dtype = {"tf32": torch.float32, "ieee": torch.float32, "fp16": torch.float16, "fp64": torch.float64}[a.mode]
    pad = max(16, 1 << (d - 1).bit_length())
    x = torch.zeros((1, n, pad), device="cuda", dtype=dtype)
    x[0, :, :d] = x64.to(dtype)
    if not a.inertia:
        del x64
        torch.cuda.empty_cache()
    init = x[:, :k].clone()
    fused = k <= 65535
    batch_kmeans_Euclid(x, k, max_iters=2, tol=-1.0, init_centroids=init.clone(), fused=fused)  # compile, warm up

    def t(iters):
        torch.cuda.synchronize()
        s = time.perf_counter()
        out = batch_kmeans_Euclid(x, k, max_iters=iters, tol=-1.0, init_centroids=init.clone(), fused=fused)
        torch.cuda.synchronize()
        return time.perf_counter() - s, out

    t1, _ = t(1)
    tn, _ = t(a.loops + 1)
    r = dict(mode=a.mode, metric=a.metric, ms_per_iter=1e3 * (tn - t1) / a.loops, padded_to=pad if pad != d else "", fused=fused,
             gpu=torch.cuda.get_device_name())
    if a.inertia:  # distances to Flash's centroids after `loops` iterations, in double
        _, cent, _ = batch_kmeans_Euclid(x, k, max_iters=a.loops, tol=-1.0, init_centroids=init.clone(), fused=fused)
        c = cent[0, :, :d].double()
        c2 = (c * c).sum(1)
        total = 0.0
        for s in range(0, n, 1 << 16):
            xs = x64[s:s + (1 << 16)]
            lab = ((xs * xs).sum(1, keepdim=True) - 2.0 * xs @ c.T + c2[None, :]).argmin(1)
            total += float(((xs - c[lab]) ** 2).sum())
        r["inertia"] = total
        r["iterations"] = a.loops
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
