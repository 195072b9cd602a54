#!/usr/bin/env python3
"""The Python module against scikit-learn and against its own C++ API.

1. Fashion-MNIST (60,000 x 784, K = 256): kmeans_gpu.KMeans(impl=...) and scikit-learn's
   KMeans(algorithm="lloyd") from the same initial centres (scikit-learn's kmeans_plusplus,
   seeded), n_init=1, tol=0, the same max_iter: fit time (median of --repeats), iterations,
   inertia, in double and float.
2. Calling overhead: fit on 1,000 x 2 (K = 8, 10 iterations, first-K init) through Python,
   against the same fit through the C++ API timed in C++ (kmeans_gpu._core.time_cpp_fit).

    PYTHONPATH=build/python python3 scripts/bench_python.py --out plots/python_bench.csv
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import numpy as np
from sklearn.cluster import KMeans as SkKMeans
from sklearn.cluster import kmeans_plusplus

import kmeans_gpu
from common import write_csv


def fashion_mnist(folder):
    with gzip.open(os.path.join(folder, "train-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    n = int.from_bytes(raw[4:8], "big")
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, 784)


def timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--clusters", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--impls", default=None, help="comma list (default: fused with a GPU, else omp)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sklearn-repeats", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    rows = []
    impls = a.impls.split(",") if a.impls else [kmeans_gpu._core.default_implementation()]
    images = fashion_mnist(a.data)
    print(f"gpu: {kmeans_gpu.gpu_available()}  cores: {os.cpu_count()}  data: {images.shape}", flush=True)
    for dtype in (np.float64, np.float32):
        X = np.ascontiguousarray(images, dtype=dtype) / dtype(255)
        init, _ = kmeans_plusplus(X, a.clusters, random_state=0)
        sk_t, sk = timed(lambda: SkKMeans(a.clusters, init=init, n_init=1, max_iter=a.iterations, tol=0,
                                          algorithm="lloyd").fit(X), a.sklearn_repeats)
        for impl in impls:
            ours_t, ours = timed(lambda: kmeans_gpu.KMeans(a.clusters, init=init, max_iter=a.iterations, tol=0,
                                                           impl=impl).fit(X), a.repeats)
            rep = ours.report_
            row = dict(part="fashion-mnist", impl=impl, precision=rep["precision"], n=X.shape[0], d=X.shape[1],
                       k=a.clusters, iterations=ours.n_iter_, sklearn_iterations=sk.n_iter_, seconds=ours_t,
                       sklearn_seconds=sk_t, speedup=sk_t / ours_t, inertia=ours.inertia_,
                       sklearn_inertia=sk.inertia_, inertia_rel_diff=abs(ours.inertia_ - sk.inertia_) / sk.inertia_,
                       labels_differ=int((ours.labels_ != sk.labels_).sum()),
                       setup_s=rep["seconds"]["setup"], loop_s=rep["seconds"]["loop"],
                       finish_s=rep["seconds"]["finish"], device=rep["device"])
            rows.append(row)
            print(row, flush=True)

    small = np.random.default_rng(0).random((1000, 2))
    for impl in impls + (["omp"] if "omp" not in impls else []):
        kmeans_gpu.KMeans(8, init="first", max_iter=10, tol=0, impl=impl).fit(small)  # warm (CUDA context)
        py_t, _ = timed(lambda: kmeans_gpu.KMeans(8, init="first", max_iter=10, tol=0, impl=impl).fit(small), 200)
        cpp_t = statistics.median(kmeans_gpu._core.time_cpp_fit(small, impl, 8, 10, 200))
        row = dict(part="overhead", impl=impl, precision="double", n=1000, d=2, k=8, seconds=py_t,
                   cpp_seconds=cpp_t, overhead_ms=(py_t - cpp_t) * 1e3)
        rows.append(row)
        print(row, flush=True)

    if a.out:
        write_csv(a.out, rows)


if __name__ == "__main__":
    sys.exit(main())
