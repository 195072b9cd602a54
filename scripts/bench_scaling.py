#!/usr/bin/env python3
"""Strong scaling of `kmeans --gpus=N` on one machine, in one run.

For each configuration and precision it runs the same problem (same data, same initial
centroids) on 1, 2, ... GPUs and writes one CSV row per run: the median time per iteration
(iterations 2.., the first pays for warm-up), its kernel and allreduce phases, the speed-up
over one GPU and the efficiency (speed-up / GPUs), and whether the result (inertia, the
iteration count) is the one-GPU result exactly.
Usage: bench_scaling.py [--kmeans build/kmeans] [--gpus 1,2,4] [--csv scaling.csv] [--quick]"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, run_json, stamp, write_csv  # noqa: E402

# (label, data options): the two shapes (4 GB of doubles at d=16; 2^24 objects x 128)
CONFIGS = [
    ("4GB-d16-k16", ["--size=4096", "--coords=16", "--clusters=16"]),
    ("N16777216-d128-k1024", ["--objects=16777216", "--coords=128", "--clusters=1024"]),
]
QUICK = [("256MB-d16-k16", ["--size=256", "--coords=16", "--clusters=16"]),
         ("N262144-d128-k1024", ["--objects=262144", "--coords=128", "--clusters=1024"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kmeans", default=os.path.join(HERE, "..", "build", "kmeans"))
    ap.add_argument("--gpus", default="1,2,4")
    ap.add_argument("--impl", default="fused")
    ap.add_argument("--loops", type=int, default=10)
    ap.add_argument("--csv", default="scaling.csv")
    ap.add_argument("--quick", action="store_true", help="small shapes (a smoke test)")
    a = ap.parse_args()
    counts = [int(g) for g in a.gpus.split(",")]
    run = stamp()
    rows = []
    for label, data in (QUICK if a.quick else CONFIGS):
        for precision in ("double", "float"):
            base = None
            for gpus in counts:
                cmd = [a.kmeans, f"--impl={a.impl}", *data, f"--loops={a.loops}", f"--precision={precision}",
                       f"--gpus={gpus}", "--report=json", "--quiet"]
                r, error = run_json(cmd)
                row = dict(run, config=label, precision=precision, impl=a.impl, gpus=gpus)
                if error:
                    print(f"{label} {precision} gpus={gpus}: {error}", flush=True)
                    rows.append(dict(row, error=error))
                    continue
                its = r["per_iteration"][1:] or r["per_iteration"]
                med = {k: statistics.median(it[k] for it in its) for k in ("total", "kernel", "allreduce")}
                if base is None:
                    base = dict(total=med["total"], inertia=r["inertia"], iterations=r["iterations"])
                speedup = base["total"] / med["total"]
                row.update(device=r["device"], path=r["path"], objects=r["objects"], iterations=r["iterations"],
                           iteration_s=med["total"], kernel_s=med["kernel"], allreduce_s=med["allreduce"],
                           speedup=speedup, efficiency=speedup / gpus * counts[0], setup_s=r["seconds"]["setup"],
                           inertia=r["inertia"],
                           same_result=int(r["inertia"] == base["inertia"] and r["iterations"] == base["iterations"]))
                rows.append(row)
                print(f"{label} {precision} gpus={gpus}: {med['total'] * 1e3:.3f} ms/iter (kernel "
                      f"{med['kernel'] * 1e3:.3f}, allreduce {med['allreduce'] * 1e3:.3f}) speed-up {speedup:.2f} "
                      f"same={row['same_result']}", flush=True)
    write_csv(a.csv, rows)


if __name__ == "__main__":
    main()
