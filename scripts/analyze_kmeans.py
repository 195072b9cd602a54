#!/usr/bin/env python3
"""k-means analysis runs on a GPU machine: the block-size sweep of every GPU implementation
on the lab's configurations, seq and omp as baselines, and the device's measured ceilings.
One CSV row per (configuration, implementation, block): medians over the iterations of the
time per iteration and of each phase (h2d, kernel, cpu, d2h), the speedup over seq, the
memory floor and the achieved bandwidth and arithmetic rate for the roofline view.

  configurations  {256 MB, d=2, K=16}, {256 MB, d=16, K=16} and {256 MB, d=32, K=64}, 10 loops, double
  blocks          32, 64, 128, 256, 512, 1024 for every GPU implementation
  seq             3 loops (per-iteration figures are comparable; it does not depend on block)

Usage: analyze_kmeans.py [--bin build] [--csv kmeans_blocks.csv] [--ceilings ceilings.csv]"""
import argparse
import csv
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import medians, memory_floor, registry, run_json, stamp  # noqa: E402

CONFIGS = [("256MB-d2-k16", 2, 16), ("256MB-d16-k16", 16, 16), ("256MB-d32-k64", 32, 64)]
BLOCKS = [32, 64, 128, 256, 512, 1024]
LOOPS, SEQ_LOOPS = 10, 3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build")
    ap.add_argument("--csv", default="kmeans_blocks.csv")
    ap.add_argument("--ceilings", default="ceilings.csv")
    a = ap.parse_args()
    kmeans, probe_bin = os.path.join(a.bin, "kmeans"), os.path.join(a.bin, "kmeans-probe")
    st = stamp()
    probe = json.loads(subprocess.run([probe_bin, "--gemm=8192,8192,8192"], capture_output=True, text=True,
                                      check=True).stdout)
    bandwidth = probe["read_bandwidth_gbs"] * 1e9
    g = probe["gemm"][0]
    fp64 = 2.0 * g["m"] * g["n"] * g["k"] / g["double_seconds"]
    fp32 = 2.0 * g["m"] * g["n"] * g["k"] / g["float_seconds"]
    with open(a.ceilings, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["read_bandwidth_gbs", "fp64_gemm_tflops", "fp32_gemm_tflops", "gemm_shape",
                                          "gpu", "driver", "date", "commit"])
        w.writeheader()
        w.writerow(dict(read_bandwidth_gbs=bandwidth / 1e9, fp64_gemm_tflops=fp64 / 1e12, fp32_gemm_tflops=fp32 / 1e12,
                        gemm_shape="8192^3", **st))
    print(f"# {st['gpu']}: read {bandwidth / 1e9:.0f} GB/s, cuBLAS DGEMM {fp64 / 1e12:.1f} TFLOP/s, "
          f"SGEMM {fp32 / 1e12:.1f} TFLOP/s (TF32 off)", flush=True)
    impls = registry(kmeans)
    rows = []
    for label, d, k in CONFIGS:
        seq_iter = None
        for entry in impls:
            impl, on_gpu = entry["name"], entry["where"] == "gpu"
            for block in (BLOCKS if on_gpu else [128]):
                cmd = [kmeans, f"--impl={impl}", "--size=256", f"--coords={d}", f"--clusters={k}",
                       f"--loops={SEQ_LOOPS if impl == 'seq' else LOOPS}", f"--block={block}", "--report=json",
                       "--quiet"]
                r, error = run_json(cmd)
                base = dict(config=label, impl=impl, block=block if on_gpu else "", **st)
                if error:
                    print(f"{label} {impl} block {block}: {error}", flush=True)
                    rows.append(dict(base, status="error: " + error))
                    continue
                med = medians(r)
                n = r["objects"]
                min_bytes = memory_floor(n, d, 8, 1.0)  # bytes: objects read once + labels written (1 B/s)
                flops = 3.0 * n * d * k + n * d  # distances (sub, mul, add) + accumulation
                if impl == "seq":
                    seq_iter = med["total"]
                device_time = med["kernel"] if on_gpu and med["kernel"] > 0 else med["total"]
                row = dict(base, objects=n, coords=d, clusters=k, iterations=r["iterations"], threads=r["threads"],
                           iter_s=med["total"], h2d_s=med["h2d"], kernel_s=med["kernel"], cpu_s=med["cpu"],
                           d2h_s=med["d2h"], speedup_vs_seq=seq_iter / med["total"] if seq_iter else "",
                           floor_s=min_bytes / bandwidth, floor_ratio=med["total"] * bandwidth / min_bytes,
                           achieved_gbs=min_bytes / med["total"] / 1e9,
                           kernel_gbs=min_bytes / device_time / 1e9, gflops=flops / med["total"] / 1e9,
                           intensity=flops / min_bytes, inertia=r["inertia"], status="ok")
                rows.append(row)
                print(f"{label:<14} {impl:<14} block {block:>4} {med['total'] * 1e3:9.3f} ms/iter  "
                      f"h2d {med['h2d'] * 1e3:.3f} kernel {med['kernel'] * 1e3:.3f} cpu {med['cpu'] * 1e3:.3f} "
                      f"d2h {med['d2h'] * 1e3:.3f}  x{row['floor_ratio']:.1f} floor", flush=True)
    fields = ["config", "impl", "block", "objects", "coords", "clusters", "iterations", "threads", "iter_s", "h2d_s",
              "kernel_s", "cpu_s", "d2h_s", "speedup_vs_seq", "floor_s", "floor_ratio", "achieved_gbs",
              "kernel_gbs", "gflops", "intensity", "inertia", "status", "gpu", "driver", "date", "commit"]
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
