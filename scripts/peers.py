#!/usr/bin/env python3
"""Peer comparison: the same data, the same initial centroids (the first K objects) and the
same number of Lloyd iterations through
  kmeans fused (GPU) and omp (CPU)        this program, reading the data from one .npy file
  PyTorch                                 a straightforward Lloyd on the same GPU: distances
                                          by matrix product, argmin, index_add_, bincount
  scikit-learn KMeans(algorithm="lloyd")  on the same machine's CPU cores
  Flash-KMeans (tf32, fp64)               svg-project/flash-kmeans (Triton) on the same GPU, when
                                          --flash DIR holds its package (scripts/flash_peer.py)
Inertia agreement is checked (and written) before any time is compared: each peer's final
inertia against this program's seq-equivalent result (fused). Time per iteration: medians
over iterations where a peer exposes them (this program, PyTorch), total fit time divided
by iterations for scikit-learn.

Usage: peers.py [--bin build] [--csv peers.csv] [--workdir DIR] [--flash DIR]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import stamp, torch_lloyd, write_csv  # noqa: E402

CONFIGS = [("256MB-d2-k16", 2, 16), ("256MB-d16-k16", 16, 16), ("256MB-d32-k64", 32, 64)]
LOOPS = 10
AGREE = 1e-6  # relative inertia; distances by matrix product round differently near ties


def torch_lloyd_peer(x_np, k, loops):
    import torch
    x = torch.from_numpy(x_np).to(torch.device("cuda"))
    times, c = torch_lloyd(x, k, loops)
    x2 = (x * x).sum(1, keepdim=True)
    # inertia as scikit-learn defines it: distances to the final centroids, exactly
    d2 = x2 - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]
    labels = d2.argmin(1)
    inertia = float(((x - c[labels]) ** 2).sum().item())
    return statistics.median(times), inertia, torch.cuda.get_device_name()


def sklearn_lloyd(x, k, loops):
    from sklearn.cluster import KMeans
    km = KMeans(n_clusters=k, init=x[:k].copy(), n_init=1, max_iter=loops, tol=0.0, algorithm="lloyd")
    t0 = time.perf_counter()
    km.fit(x)
    total = time.perf_counter() - t0
    return total / km.n_iter_, float(km.inertia_), km.n_iter_


def ours(kmeans, path, impl, k, loops, precision="double"):
    p = subprocess.run([kmeans, f"--impl={impl}", f"--input={path}", f"--clusters={k}", f"--loops={loops}",
                        f"--precision={precision}", "--report=json", "--quiet"], capture_output=True, text=True,
                       check=True)
    r = json.loads(p.stdout)
    return statistics.median(it["total"] for it in r["per_iteration"]), r["inertia"], r["iterations"], r["device"]


def flash_peer(flash_dir, path, k, loops, mode):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flash_peer.py")
    p = subprocess.run([sys.executable, script, f"--flash={flash_dir}", f"--mode={mode}", f"--npy={path}",
                        f"--clusters={k}", f"--loops={loops}", "--inertia"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or ["no output"])[-1])
    r = json.loads(p.stdout)
    return r["ms_per_iter"] / 1e3, r["inertia"], r["iterations"], r["padded_to"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build")
    ap.add_argument("--csv", default="peers.csv")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--flash", default=None, help="folder holding the flash_kmeans package (a peer, not ours)")
    a = ap.parse_args()
    st = stamp()
    kmeans = os.path.join(a.bin, "kmeans")
    rows = []
    with tempfile.TemporaryDirectory(dir=a.workdir) as tmp:
        for label, d, k in CONFIGS:
            n = 256 * 2 ** 20 // (d * 8)
            x = np.random.default_rng(7).random((n, d))
            path = os.path.join(tmp, f"{label}.npy")
            np.save(path, x)
            results = []
            fused_s, fused_inertia, its, gpu = ours(kmeans, path, "fused", k, LOOPS)
            results.append(("kmeans fused (GPU)", fused_s, fused_inertia, its))
            f32_s, f32_inertia, its_f, _ = ours(kmeans, path, "fused", k, LOOPS, "float")
            results.append(("kmeans fused float (GPU)", f32_s, f32_inertia, its_f))
            omp_s, omp_inertia, its_o, _ = ours(kmeans, path, "omp", k, LOOPS)
            results.append((f"kmeans omp ({os.cpu_count()} cores)", omp_s, omp_inertia, its_o))
            try:
                t_s, t_inertia, _ = torch_lloyd_peer(x, k, LOOPS)
                results.append(("PyTorch Lloyd (GPU)", t_s, t_inertia, LOOPS))
            except Exception as e:  # noqa: BLE001 - report, do not hide
                print(f"PyTorch peer failed: {e}", flush=True)
            for mode in ("tf32", "fp64") if a.flash else ():
                try:
                    f_s, f_inertia, f_its, padded = flash_peer(a.flash, path, k, LOOPS, mode)
                    note = f", d padded to {padded}" if padded else ""
                    results.append((f"Flash-KMeans {mode} (GPU{note})", f_s, f_inertia, f_its))
                except Exception as e:  # noqa: BLE001 - report, do not hide
                    print(f"Flash-KMeans {mode} failed: {e}", flush=True)
            s_s, s_inertia, s_its = sklearn_lloyd(x, k, LOOPS)
            results.append((f"scikit-learn Lloyd ({os.cpu_count()} cores)", s_s, s_inertia, s_its))
            for name, secs, inertia, iters in results:
                rel = abs(inertia - fused_inertia) / fused_inertia
                rows.append(dict(config=label, objects=n, coords=d, clusters=k, peer=name, iterations=iters,
                                 iter_s=secs, vs_fused=secs / fused_s, inertia=inertia, inertia_rel_diff=rel,
                                 agrees=rel <= AGREE, **st))
                print(f"{label:<14} {name:<32} {secs * 1e3:10.3f} ms/iter  {secs / fused_s:8.1f}x fused  "
                      f"inertia {inertia:.10e} (rel diff {rel:.1e}{'' if rel <= AGREE else ' DISAGREES'})",
                      flush=True)
    fields = ["config", "objects", "coords", "clusters", "peer", "iterations", "iter_s", "vs_fused", "inertia",
              "inertia_rel_diff", "agrees", "gpu", "driver", "date", "commit"]
    write_csv(a.csv, rows, fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
