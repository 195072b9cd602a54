#!/usr/bin/env python3
"""Agreement with scikit-learn's Lloyd KMeans on generated and real data.

Same data (written to .npy and read by kmeans), same init (the first K objects), n_init=1,
tol=0, the same iteration limit: the iteration count must match and the inertia must agree
within 1e-9 relative in double (both compute the same means and distances in double; they
differ only in summation order, so agreement is ~1e-13 unless a label flips at a near-tie,
and 1e-9 would catch any real disagreement of the update or the inertia rule).
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


def ours(path, k, loops, impl):
    out = subprocess.run([KMEANS, f"--input={path}", f"--clusters={k}", f"--loops={loops}", f"--impl={impl}",
                          "--report=json", "--quiet"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def check(name, X, k, loops):
    global failures
    X = np.ascontiguousarray(X, dtype=np.float64)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.npy")
        np.save(path, X)
        ref = KMeans(n_clusters=k, init=X[:k], n_init=1, max_iter=loops, tol=0, algorithm="lloyd").fit(X)
        for impl in ("seq", "omp"):
            r = ours(path, k, loops, impl)
            rel = abs(r["inertia"] - ref.inertia_) / ref.inertia_
            ok = rel <= REL and r["iterations"] == ref.n_iter_
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
print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
