#!/usr/bin/env python3
"""The real-data shapes (embeddings and images: d = 16...784, K = 128...65536) through
`fused` and its peers, in one process on one GPU, per-iteration medians (first-K init,
uniform data in [0, 1), 10 iterations):

  fused double / float     this program; its JSON gives the per-iteration kernel time and how
                           many objects the tensor path re-checked with seq's formula; double
                           also on FP64 DMMA keys (--fused-config=tf32_in_double=0), for the A/B
  compute floor (double)   2 N K d / cuBLAS DGEMM's rate on the shape (`gemm --kernel=cublas`,
                           m capped so that the m x K product fits in memory)
  PyTorch fp32 / fp64      matmul + argmin + index_add_ Lloyd on the same GPU, TF32 off
  Flash-KMeans             svg-project/flash-kmeans (tf32, fp16, fp64, IEEE fp32), when
                           --flash DIR holds its flash_kmeans package; skipped otherwise

Also, with --kmeanspp, k-means++ at 1,000,000 x 128, K = 1024: fused (GPU k-means++) against
the time of its 10 iterations, and omp (CPU k-means++) on every core; and with --crossover,
fused's two paths (--fused-config=path=one-pass|tensor) on the shapes where both run.

Usage: bench_real_shapes.py [--bin build] [--csv real_shapes.csv] [--flash DIR] [--flash-modes tf32,fp64] [--kmeanspp]
                            [--crossover] [--quick] [--no-shapes]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import stamp, torch_lloyd, write_csv  # noqa: E402

ROWS = [(262144, 128, 1024), (4194304, 128, 1024), (1000000, 16, 65536), (1000000, 128, 128), (60000, 784, 256)]
LOOPS = 10


def run_json(cmd, env=None, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def ours(kmeans, n, d, k, precision, config="", init="first", loops=LOOPS):
    """One fit of fused; config: its --fused-config=name=value,... (src/kmeans/tuning.hpp), if any."""
    extra = [f"--fused-config={config}"] if config else []
    r = run_json([kmeans, "--impl=fused", f"--objects={n}", f"--coords={d}", f"--clusters={k}", f"--loops={loops}",
                  f"--precision={precision}", f"--init={init}", "--report=json", "--quiet"] + extra)
    it = r["per_iteration"]
    rechecked = [x["rechecked"] for x in it if "rechecked" in x]
    return dict(ms=1e3 * statistics.median(x["kernel"] for x in it), path=r.get("path", ""),
                rechecked=statistics.mean(rechecked) if rechecked else "", init_s=r["seconds"]["init"],
                loop_s=r["seconds"]["loop"], inertia=r["inertia"])


def dgemm_floor_ms(gemm, n, d, k):
    m = max(1024, min(n, (1 << 28) // k))
    r = run_json([gemm, "--kernel=cublas", "--op=nt", f"--m={m}", f"--n={k}", f"--k={d}", "--precision=double",
                  "--no-check", "--report=json"])
    tflops = r["gflops"] / 1e3
    return 2.0 * n * k * d / (tflops * 1e12) * 1e3, tflops


def torch_lloyd_ms(n, d, k, dtype_name):
    import torch
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.rand((n, d), device="cuda", dtype=getattr(torch, dtype_name), generator=g)
    times, c = torch_lloyd(x, k, LOOPS)
    del x, c
    torch.cuda.empty_cache()
    return 1e3 * statistics.median(times)


def flash_ms(flash_dir, n, d, k, mode):
    """Flash-KMeans per iteration, one precision per process (scripts/flash_peer.py): (ms, its notes)."""
    r = run_json([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "flash_peer.py"),
                  f"--flash={flash_dir}", f"--mode={mode}", f"--objects={n}", f"--coords={d}", f"--clusters={k}",
                  f"--loops={LOOPS}"])
    return r["ms_per_iter"], dict(padded_to=r["padded_to"], flash_update="fused" if r["fused"] else "unfused")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build")
    ap.add_argument("--csv", default="real_shapes.csv")
    ap.add_argument("--flash", default=None, help="folder holding the flash_kmeans package")
    ap.add_argument("--flash-modes", default="tf32,fp16,fp64,ieee", help="Flash's precisions to run")
    ap.add_argument("--kmeanspp", action="store_true")
    ap.add_argument("--crossover", action="store_true")
    ap.add_argument("--quick", action="store_true", help="first and last rows only")
    ap.add_argument("--no-shapes", action="store_true", help="skip the shapes table (e.g. the crossover alone)")
    a = ap.parse_args()
    st = stamp()
    kmeans, gemm = os.path.join(a.bin, "kmeans"), os.path.join(a.bin, "gemm")
    rows = []

    def add(section, n, d, k, who, precision, ms, **extra):
        rows.append(dict(section=section, objects=n, coords=d, clusters=k, who=who, precision=precision,
                         ms_per_iter=ms, **extra, **st))
        more = " ".join(f"{key}={val}" for key, val in extra.items() if val != "")
        print(f"{section:<10} {n:>8} x {d:<4} K={k:<6} {who:<22} {precision:<6} {ms:10.3f} ms  {more}", flush=True)

    for n, d, k in [] if a.no_shapes else (ROWS[:1] + ROWS[-1:]) if a.quick else ROWS:
        floor, rate = dgemm_floor_ms(gemm, n, d, k)
        add("shapes", n, d, k, "floor (cuBLAS DGEMM)", "double", floor, tflops=round(rate, 2))
        for precision in ("double", "float"):
            r = ours(kmeans, n, d, k, precision)
            add("shapes", n, d, k, "fused", precision, r["ms"], path=r["path"], rechecked=r["rechecked"],
                vs_floor=round(r["ms"] / floor, 3) if precision == "double" else "")
            if "tf32 candidates" in r["path"]:  # double on FP64 DMMA keys instead, for the A/B
                r = ours(kmeans, n, d, k, precision, config="tf32_in_double=0")
                add("shapes", n, d, k, "fused (DMMA keys)", precision, r["ms"], path=r["path"],
                    rechecked=r["rechecked"], vs_floor=round(r["ms"] / floor, 3))
            if "wgmma" in r["path"] and precision == "float":  # the same fit on the mma.sync kernel, for the A/B
                r = ours(kmeans, n, d, k, precision, config="wgmma=0")
                add("shapes", n, d, k, "fused (mma.sync)", precision, r["ms"], path=r["path"],
                    rechecked=r["rechecked"])
        for dtype in ("float32", "float64"):
            try:
                add("shapes", n, d, k, "PyTorch", dtype, torch_lloyd_ms(n, d, k, dtype))
            except Exception as e:  # noqa: BLE001 - out of memory on the largest shapes: say so
                print(f"PyTorch {dtype} at {n} x {d}, K={k}: {str(e).splitlines()[0][:120]}", flush=True)
        if a.flash:
            for mode in a.flash_modes.split(","):
                try:
                    ms, notes = flash_ms(a.flash, n, d, k, mode)
                    add("shapes", n, d, k, "Flash-KMeans", mode, ms, **notes)
                except Exception as e:  # noqa: BLE001 - out of memory or a Triton failure: say so, go on
                    print(f"Flash {mode} at {n} x {d}, K={k}: {str(e).strip().splitlines()[-1][:200]}", flush=True)

    if a.kmeanspp:
        n, d, k = 1000000, 128, 1024
        for precision in ("double", "float"):
            r = ours(kmeans, n, d, k, precision, init="kmeans++")
            add("kmeans++", n, d, k, "fused GPU k-means++", precision, 1e3 * r["init_s"],
                loop_10_ms=round(1e3 * r["loop_s"], 3), inertia=r["inertia"])
        r = run_json([kmeans, "--impl=omp", f"--objects={n}", f"--coords={d}", f"--clusters={k}", "--loops=1",
                      "--init=kmeans++", "--report=json", "--quiet"])
        add("kmeans++", n, d, k, f"omp k-means++ ({os.cpu_count()} cores)", "double", 1e3 * r["seconds"]["init"])

    if a.crossover:
        n = 1 << 20
        for d in (2, 8, 16, 32):
            for k in (16, 64, 128, 256, 512, 1024):
                for precision in ("double", "float"):
                    for path in ("one-pass", "tensor"):
                        try:
                            r = ours(kmeans, n, d, k, precision, config=f"path={path}")
                        except RuntimeError as e:
                            print(f"crossover {d} {k} {precision} {path}: {e}", flush=True)
                            continue
                        if r["path"].split(",")[0] == path:  # "tensor, wgmma" is the tensor path
                            add("crossover", n, d, k, f"fused {path}", precision, r["ms"])

    fields = sorted({key for r in rows for key in r}, key=lambda f: (f not in (
        "section", "objects", "coords", "clusters", "who", "precision", "ms_per_iter"), f))
    write_csv(a.csv, rows, fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
