#!/usr/bin/env python3
"""Before/after on one GPU in one call: runs bench_gpu.py --quick on two builds in turn, ROUNDS
times (alternating, so drift hits both alike), plus a few GEMM kernels, and prints the median
time per iteration of each (config, precision, implementation) for both builds and their ratio.

Usage: compare_builds.py BEFORE_DIR AFTER_DIR [--rounds 3] [--out DIR]
(each DIR holds kmeans, kmeans-probe and, optionally, gemm)"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GEMM_RUNS = [("tensor", "double", 4096), ("regblock", "float", 4096), ("shared", "double", 2048),
             ("cublas", "double", 4096)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    times = {}  # (build, config, precision, impl) -> [seconds per iteration]
    for r in range(a.rounds):
        for build in ("before", "after"):
            d = getattr(a, build)
            path = os.path.join(a.out, f"bench_{build}_{r}.csv")
            subprocess.run([sys.executable, os.path.join(HERE, "bench_gpu.py"), "--quick", "--kmeans",
                            os.path.join(d, "kmeans"), "--probe", os.path.join(d, "kmeans-probe"), "--csv", path],
                           check=True, stdout=subprocess.DEVNULL)
            for row in csv.DictReader(open(path)):
                if row.get("iter_median_s"):
                    key = (build, row["config"], row["precision"], row["impl"])
                    times.setdefault(key, []).append(float(row["iter_median_s"]))
            gemm = os.path.join(d, "gemm")
            for kernel, precision, size in GEMM_RUNS if os.path.exists(gemm) else []:
                p = subprocess.run([gemm, f"--kernel={kernel}", f"--precision={precision}", f"--size={size}",
                                    "--reps=5", "--no-check", "--report=json"], capture_output=True, text=True)
                if p.returncode == 0:
                    key = (build, f"gemm-{size}", precision, kernel)
                    times.setdefault(key, []).append(json.loads(p.stdout)["seconds"]["kernel"])
    rows = []
    for (build, config, precision, impl), v in times.items():
        if build != "before" or ("after", config, precision, impl) not in times:
            continue
        b, n = statistics.median(v), statistics.median(times[("after", config, precision, impl)])
        rows.append(dict(config=config, precision=precision, impl=impl, before_ms=b * 1e3, after_ms=n * 1e3,
                         ratio=n / b, before_runs=" ".join(f"{x * 1e3:.3f}" for x in v),
                         after_runs=" ".join(f"{x * 1e3:.3f}" for x in times[("after", config, precision, impl)])))
    with open(os.path.join(a.out, "compare_builds.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"{'config':<15} {'prec':<6} {'impl':<14} {'before ms':>10} {'after ms':>10} {'after/before':>12}")
    for r in rows:
        print(f"{r['config']:<15} {r['precision']:<6} {r['impl']:<14} {r['before_ms']:10.3f} {r['after_ms']:10.3f} "
              f"{r['ratio']:12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
