#!/usr/bin/env python3
"""CPU benchmark: kmeans seq and omp against scikit-learn's Lloyd KMeans, same machine,
same run, same data, init (the first K objects), iteration count and thread count.

For every configuration and thread count it runs each contender --repeats times and
reports medians. Two per-iteration figures:
  iter      time of the Lloyd iterations alone / iterations (kmeans' loop seconds;
            for scikit-learn the whole fit, which is all it exposes)
  fit       everything but loading the data / iterations, for both (init, setup, the
            loop, the final E-step and inertia) - the like-for-like figure against fit()
The inertia of every run is checked against scikit-learn's before any time is compared.

Usage: bench_cpu.py [--kmeans build/kmeans] [--csv out.csv] [--repeats 5]
       [--configs 1000000x16x16,262144x2x16] [--loops 10] [--threads 1,2]
Needs numpy, scikit-learn and threadpoolctl (Debian: python3-sklearn)."""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits


def run_kmeans(binary, path, impl, k, loops, threads):
    out = subprocess.run([binary, f"--input={path}", f"--impl={impl}", f"--clusters={k}", f"--loops={loops}",
                          f"--threads={threads}", "--report=json", "--quiet"],
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    s = r["seconds"]
    fit = s["init"] + s["setup"] + s["loop"] + s["finish"]
    return r["inertia"], r["iterations"], s["loop"] / r["iterations"], fit / r["iterations"]


def run_sklearn(X, k, loops, threads):
    with threadpool_limits(limits=threads):
        km = KMeans(n_clusters=k, init=X[:k], n_init=1, max_iter=loops, tol=0, algorithm="lloyd")
        t = time.perf_counter()
        km.fit(X)
        t = time.perf_counter() - t
    return km.inertia_, km.n_iter_, t / km.n_iter_, t / km.n_iter_


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kmeans", default=os.path.join(os.path.dirname(__file__), "..", "build", "kmeans"))
    ap.add_argument("--csv", default="bench_cpu.csv")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--configs", default="1048576x16x16,4194304x2x16,262144x32x64")
    ap.add_argument("--loops", type=int, default=10)
    ap.add_argument("--threads", default="1,%d" % os.cpu_count())
    a = ap.parse_args()
    threads_list = [int(t) for t in a.threads.split(",")]
    rows = []
    for config in a.configs.split(","):
        n, d, k = (int(v) for v in config.split("x"))
        X = np.random.default_rng(0).random((n, d))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x.npy")
            np.save(path, X)
            for threads in threads_list:
                contenders = [("sklearn", lambda: run_sklearn(X, k, a.loops, threads))]
                if threads == 1:
                    contenders.append(("seq", lambda: run_kmeans(a.kmeans, path, "seq", k, a.loops, 1)))
                contenders.append(("omp", lambda: run_kmeans(a.kmeans, path, "omp", k, a.loops, threads)))
                results = {}
                for name, fn in contenders:
                    runs = [fn() for _ in range(a.repeats)]
                    results[name] = runs
                ref_inertia, ref_iters = results["sklearn"][0][0], results["sklearn"][0][1]
                for name, runs in results.items():
                    inertia, iters = runs[0][0], runs[0][1]
                    rel = abs(inertia - ref_inertia) / ref_inertia
                    if rel > 1e-9 or iters != ref_iters:
                        sys.exit(f"{name} {config}: inertia {inertia} vs scikit-learn {ref_inertia} "
                                 f"(rel {rel:.1e}), iterations {iters} vs {ref_iters}: not comparable")
                    rows.append(dict(objects=n, coords=d, clusters=k, threads=threads, impl=name, iterations=iters,
                                     iter_median_s=statistics.median(r[2] for r in runs),
                                     fit_median_s=statistics.median(r[3] for r in runs),
                                     inertia_rel_to_sklearn=rel, repeats=a.repeats))
                for row in rows[-len(results):]:
                    print(f"{n}x{d}x{k} threads={threads} {row['impl']:<8} iter {row['iter_median_s'] * 1e3:8.2f} ms"
                          f"  fit/iter {row['fit_median_s'] * 1e3:8.2f} ms", flush=True)
    # Ratios, within one configuration and run.
    for row in rows:
        same = [r for r in rows if (r["objects"], r["coords"], r["clusters"]) == (row["objects"], row["coords"],
                                                                                  row["clusters"])]
        seq = [r for r in same if r["impl"] == "seq"]
        skl = [r for r in same if r["impl"] == "sklearn" and r["threads"] == row["threads"]]
        row["speedup_vs_seq"] = seq[0]["iter_median_s"] / row["iter_median_s"] if seq else ""
        row["fit_speedup_vs_sklearn"] = skl[0]["fit_median_s"] / row["fit_median_s"] if skl else ""
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print("\n| objects x d x K | threads | impl | ms/iter (loop) | ms/iter (fit) | vs seq | vs sklearn (fit) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        vs_seq = f"{r['speedup_vs_seq']:.2f}x" if r["speedup_vs_seq"] != "" else ""
        print(f"| {r['objects']}x{r['coords']}x{r['clusters']} | {r['threads']} | {r['impl']} | "
              f"{r['iter_median_s'] * 1e3:.2f} | {r['fit_median_s'] * 1e3:.2f} | {vs_seq} | "
              f"{r['fit_speedup_vs_sklearn']:.2f}x |")


if __name__ == "__main__":
    main()
