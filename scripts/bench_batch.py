#!/usr/bin/env python3
"""Flash-KMeans's headline grid against this program's batches, in one GPU call: B problems of N
objects, d = 128, K clusters, fp16 data (uniform in [0, 1), seeded), the first K objects of each
problem as its initial centroids, Euclidean and cosine.

  ours    kmeans --input=batch.npy (the fp16 array, a batch, in float: its iterations together, one
          CUDA graph each) --init=first --loops=LOOPS --metric=...; time per iteration = the
          median of the batch's iterations (wall, host-synced, as Flash's)
  Flash   batch_kmeans_Euclid / batch_kmeans_Cosine on the same fp16 tensor (B, N, d) on the GPU,
          (t(LOOPS + 1) - t(1)) / LOOPS with tol -1 (every iteration runs)

Also, per point: how many of Flash's labels from the initial centroids (one iteration) differ from
the exact ones (the fp16 data converted exactly, distances in float64; for cosine the largest
cosine).

Usage: bench_batch.py --bin build --flash DIR [--csv out.csv] [--loops 100] [--quick]
                      [--variant NAME=ARGS]...  (ours again with ARGS, e.g.
                      --variant nomovers=--fused-config=movers_after=0)
Without --flash it times ours alone."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import stamp, write_csv  # noqa: E402

GRID_B = (8, 32)
GRID_N = (16384, 32768, 65536, 131072)
GRID_K = (100, 1000)
D = 128


def ours(kmeans, path, k, loops, metric, extra=()):
    p = subprocess.run([kmeans, "--impl=fused", f"--input={path}", f"--clusters={k}", f"--loops={loops}",
                        "--init=first", f"--metric={'euclidean' if metric == 'euclid' else metric}",
                        "--report=json", "--quiet", *extra], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip())
    report = json.loads(p.stdout)
    problems = report["problems"]
    if not report["together"]:
        raise RuntimeError("the batch's iterations did not run together")
    setup = sum(r["seconds"]["setup"] + r["seconds"]["init"] + r["seconds"]["finish"] for r in problems)
    # the mean over the batch's iterations (the graphs' captures included): the longest problem
    # ran in every one of them
    longest = max(problems, key=lambda r: r["iterations"])
    mean = longest["seconds"]["loop"] / max(longest["iterations"], 1)
    return report["seconds_per_iteration"], mean, setup, sum(r["iterations"] for r in problems) / len(problems)


def flash_time(fn, x, k, loops):
    import torch
    init = x[:, :k].clone()
    fn(x, k, max_iters=2, tol=-1.0, init_centroids=init.clone())  # compile, warm up

    def t(iters):
        torch.cuda.synchronize()
        s = time.perf_counter()
        fn(x, k, max_iters=iters, tol=-1.0, init_centroids=init.clone())
        torch.cuda.synchronize()
        return time.perf_counter() - s

    return (t(loops + 1) - t(1)) / loops


def flash_label_errors(fn, x, k, metric):
    """Flash's labels from the initial centroids (one assignment) against the exact ones."""
    import torch
    init = x[:, :k].clone()
    labels = fn(x, k, max_iters=1, tol=-1.0, init_centroids=init.clone())[0]
    wrong = 0
    for b in range(x.shape[0]):
        xb = x[b].double()
        cb = init[b].double()
        if metric == "cosine":
            xb = xb / xb.norm(dim=1, keepdim=True).clamp_min(1e-300)
            cb = cb / cb.norm(dim=1, keepdim=True).clamp_min(1e-300)
            exact = (xb @ cb.T).argmax(1)
        else:
            exact = ((cb * cb).sum(1)[None, :] - 2.0 * (xb @ cb.T)).argmin(1)
        wrong += int((labels[b].long() != exact).sum().item())
    return wrong


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build")
    ap.add_argument("--flash", default=None)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--loops", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="B = 8, N = 16384 and 131072 only")
    ap.add_argument("--points", default=None, metavar="B:N,...", help="only these (B, N) of the grid")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="also time ours with these options (space-separated), as columns ours_NAME_*")
    a = ap.parse_args()
    variants = [(name, args.split()) for name, _, args in (v.partition("=") for v in a.variant)]
    import numpy as np
    import torch
    kmeans = os.path.join(a.bin, "kmeans")
    if a.flash:
        sys.path.insert(0, a.flash)
        from flash_kmeans.kmeans_triton_impl import batch_kmeans_Cosine, batch_kmeans_Euclid
        fns = {"euclid": batch_kmeans_Euclid, "cosine": batch_kmeans_Cosine}
    rows = []
    meta = stamp()
    grid = [(b, n) for b in GRID_B for n in GRID_N]
    if a.quick:
        grid = [(8, 16384), (8, 131072)]
    if a.points:
        grid = [tuple(int(v) for v in p.split(":")) for p in a.points.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for b, n in grid:
            g = torch.Generator(device="cuda").manual_seed(b * 1000003 + n)
            x = torch.rand((b, n, D), device="cuda", dtype=torch.float32, generator=g).half()
            path = os.path.join(tmp, "batch.npy")
            np.save(path, x.cpu().numpy())
            for k in GRID_K:
                for metric in ("euclid", "cosine"):
                    row = dict(meta, B=b, N=n, d=D, K=k, metric=metric, loops=a.loops)
                    for name, extra in [("", [])] + variants:
                        key = f"ours_{name}_" if name else "ours_"
                        per, mean, row[key + "setup_s"], row[key + "iterations"] = ours(
                            kmeans, path, k, a.loops, metric, extra)
                        row[key + "ms_per_iter"], row[key + "mean_ms_per_iter"] = 1e3 * per, 1e3 * mean
                    if a.flash:
                        row["flash_ms_per_iter"] = 1e3 * flash_time(fns[metric], x, k, a.loops)
                        row["flash_wrong_labels"] = flash_label_errors(fns[metric], x, k, metric)
                        row["ours_over_flash"] = row["ours_ms_per_iter"] / row["flash_ms_per_iter"]
                    rows.append(row)
                    print(json.dumps({key: (round(v, 4) if isinstance(v, float) else v) for key, v in row.items()
                                      if key not in meta}), flush=True)
            del x
            torch.cuda.empty_cache()
    if a.csv:
        write_csv(a.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
