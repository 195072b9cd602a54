#!/usr/bin/env python3
"""GPU benchmark of the k-means ladder, on a GPU machine, in one run.

For every configuration, precision and implementation of the registry it runs kmeans once
and takes medians over the iterations: time per iteration and each phase. It measures the
device's read bandwidth and the cuBLAS time of the N x d by d x K product in the same run
(kmeans-probe) and writes CSV with
  speedup_vs_seq  seq's median iteration / this one (seq runs fewer loops on the big
                  configurations; per-iteration figures make them comparable)
  floor_ratio     median iteration / memory floor, the floor being (objects' bytes read
                  once + labels written) / measured read bandwidth
  gemm_ratio      median iteration / cuBLAS time of the same product
Usage: bench_gpu.py [--kmeans build/kmeans] [--probe build/kmeans-probe] [--csv out.csv] [--quick]"""
import argparse
import csv
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, medians, memory_floor, registry, run_json  # noqa: E402

# (label, data options, loops, seq loops)
CONFIGS = [
    ("256MB-d2-k16", ["--size=256", "--coords=2", "--clusters=16"], 10, 3),
    ("256MB-d16-k16", ["--size=256", "--coords=16", "--clusters=16"], 10, 3),
    ("256MB-d32-k64", ["--size=256", "--coords=32", "--clusters=64"], 10, 2),
    ("1024MB-d16-k16", ["--size=1024", "--coords=16", "--clusters=16"], 10, 2),
    ("N262144-d128-k1024", ["--objects=262144", "--coords=128", "--clusters=1024"], 10, 1),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kmeans", default=os.path.join(HERE, "..", "build", "kmeans"))
    ap.add_argument("--probe", default=os.path.join(HERE, "..", "build", "kmeans-probe"))
    ap.add_argument("--csv", default="bench_gpu.csv")
    ap.add_argument("--quick", action="store_true", help="the first two configurations only")
    a = ap.parse_args()
    configs = CONFIGS[:2] if a.quick else CONFIGS
    probe = json.loads(subprocess.run([a.probe, "--gemm=262144,1024,128"], capture_output=True, text=True,
                                      check=True).stdout)
    bandwidth = probe["read_bandwidth_gbs"] * 1e9
    gemm = probe["gemm"][0]
    print(f"# {probe['device']}: read bandwidth {probe['read_bandwidth_gbs']:.0f} GB/s, cuBLAS 262144x1024x128 "
          f"{gemm['double_seconds'] * 1e3:.3f} ms double, {gemm['float_seconds'] * 1e3:.3f} ms float", flush=True)
    rows = []
    for label, data, loops, seq_loops in configs:
        for precision in ("double", "float"):
            seq_iter = None
            seq_inertia = None
            for impl in [e["name"] for e in registry(a.kmeans)]:
                n_loops = seq_loops if impl == "seq" else loops
                cmd = [a.kmeans, f"--impl={impl}", *data, f"--loops={n_loops}", f"--precision={precision}",
                       "--report=json", "--quiet"]
                r, error = run_json(cmd)
                if error:
                    print(f"{label} {precision} {impl}: {error}", flush=True)
                    rows.append(dict(config=label, precision=precision, impl=impl, error=error))
                    continue
                med = medians(r)
                floor = memory_floor(r["objects"], r["coords"], 8 if precision == "double" else 4, bandwidth)
                if impl == "seq":
                    seq_iter, seq_inertia = med["total"], r["inertia"]
                gemm_s = gemm[f"{precision}_seconds"] if label.startswith("N262144") else None
                row = dict(config=label, precision=precision, impl=impl, device=r["device"], objects=r["objects"],
                           coords=r["coords"], clusters=r["clusters"], iterations=r["iterations"],
                           iter_median_s=med["total"], h2d_s=med["h2d"], kernel_s=med["kernel"], cpu_s=med["cpu"],
                           d2h_s=med["d2h"], setup_s=r["seconds"]["setup"],
                           speedup_vs_seq=seq_iter / med["total"] if seq_iter else "",
                           floor_s=floor, floor_ratio=med["total"] / floor, bandwidth_gbs=bandwidth / 1e9,
                           gemm_s=gemm_s if gemm_s else "", gemm_ratio=med["total"] / gemm_s if gemm_s else "",
                           inertia=r["inertia"], error="")
                rows.append(row)
                print(f"{label:<20} {precision:<6} {impl:<14} {med['total'] * 1e3:10.3f} ms/iter  "
                      f"x{row['floor_ratio']:.2f} floor  speedup {row['speedup_vs_seq'] if seq_iter else 0:8.1f}  "
                      f"h2d {med['h2d'] * 1e3:.3f} kern {med['kernel'] * 1e3:.3f} cpu {med['cpu'] * 1e3:.3f} "
                      f"d2h {med['d2h'] * 1e3:.3f}", flush=True)
    fields = list(next(r for r in rows if "device" in r).keys())
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
