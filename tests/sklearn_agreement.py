#!/usr/bin/env python3
"""Agreement with scikit-learn's Lloyd KMeans on generated and real data.

Same data (written to .npy and read by kmeans), same init (the first K objects), n_init=1,
tol=0, the same iteration limit: the iteration count must match and the inertia must agree
within 1e-9 relative in double (both compute the same means and distances in double; they
differ only in summation order, so agreement is ~1e-13 unless a label flips at a near-tie,
and 1e-9 would catch any real disagreement of the update or the inertia rule).
With sample weights (--weights, scikit-learn's sample_weight) the same, and the centroids within
1e-9 of the data's scale and every label equal.
Exit 77 (skipped) when scikit-learn is not installed. Usage: sklearn_agreement.py kmeans"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from sklearn.cluster import KMeans
    from sklearn import datasets
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

KMEANS = sys.argv[1]
REL = 1e-9
failures = 0


def ours(path, k, loops, impl, weights=None, output=None):
    args = [KMEANS, f"--input={path}", f"--clusters={k}", f"--loops={loops}", f"--impl={impl}", "--report=json",
            "--quiet"]
    if weights:
        args.append(f"--weights={weights}")
    if output:
        args.append(f"--output={output}")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def check(name, X, k, loops, weights=None):
    global failures
    X = np.ascontiguousarray(X, dtype=np.float64)
    with tempfile.TemporaryDirectory() as tmp:
        path, wpath, out = (os.path.join(tmp, f) for f in ("x.npy", "w.npy", "out.npy"))
        np.save(path, X)
        if weights is not None:
            np.save(wpath, weights)
        ref = KMeans(n_clusters=k, init=X[:k], n_init=1, max_iter=loops, tol=0, algorithm="lloyd").fit(
            X, sample_weight=weights)
        for impl in ("seq", "omp"):
            r = ours(path, k, loops, impl, wpath if weights is not None else None, out)
            rel = abs(r["inertia"] - ref.inertia_) / ref.inertia_
            ok = rel <= REL and r["iterations"] == ref.n_iter_ and r["sample_weights"] == (weights is not None)
            if weights is not None:
                centroids, labels = np.load(out), np.load(os.path.join(tmp, "out.labels.npy"))
                ok = ok and np.abs(centroids - ref.cluster_centers_).max() <= REL * np.abs(X).max()
                ok = ok and np.array_equal(labels, ref.labels_)
            failures += 0 if ok else 1
            print(f"{'ok  ' if ok else 'FAIL'} {name:<22} {impl:<4} n={X.shape[0]:<7} d={X.shape[1]:<3} k={k:<3} "
                  f"iterations {r['iterations']:>3} vs {ref.n_iter_:>3}  inertia {r['inertia']:.15g} vs "
                  f"{ref.inertia_:.15g}  rel {rel:.1e}")


rng = np.random.default_rng(0)
check("uniform", rng.random((20000, 16)), 16, 10)
check("uniform-d2", rng.random((50001, 2)), 16, 30)
blobs, _ = datasets.make_blobs(n_samples=30000, n_features=8, centers=12, random_state=1)
check("blobs", blobs, 12, 100)
check("iris (real)", datasets.load_iris().data, 3, 100)
check("wine (real)", datasets.load_wine().data, 3, 100)
check("digits (real)", datasets.load_digits().data, 10, 100)
check("breast cancer (real)", datasets.load_breast_cancer().data, 2, 100)
# Weighted: continuous weights with some zeros, and integer weights, on blobs and real data.
w = rng.random(blobs.shape[0]) * 3
w[rng.random(blobs.shape[0]) < 0.1] = 0
check("blobs weighted", blobs, 12, 100, w)
iris = datasets.load_iris().data
check("iris weighted (integer)", iris, 3, 100, rng.integers(1, 5, iris.shape[0]).astype(np.float64))
wine = datasets.load_wine().data
check("wine weighted", wine, 3, 100, rng.random(wine.shape[0]) + 0.01)
print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
