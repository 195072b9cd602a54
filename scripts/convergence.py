#!/usr/bin/env python3
"""Convergence data for the analysis suite: the inertia of every iteration (from the JSON
report's per_iteration) for each implementation and init on one data set, same seed.

Writes CSV rows (impl, init, iteration, inertia, changed, shift, stamp) that plot_all.py draws as
convergence.png. Usage: convergence.py [--kmeans build/kmeans] [--impls omp,fused] [--csv out.csv]"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, registry, run_json, stamp, write_csv  # noqa: E402

DATA = ["--generator=blobs", "--objects=200000", "--coords=16", "--clusters=64", "--seed=3"]
INITS = ["first", "random", "kmeans++"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kmeans", default=os.path.join(HERE, "..", "build", "kmeans"))
    ap.add_argument("--impls", default="", help="comma-separated (default: every runnable one but seq)")
    ap.add_argument("--loops", type=int, default=40)
    ap.add_argument("--csv", default="convergence.csv")
    a = ap.parse_args()
    st = stamp()
    names = a.impls.split(",") if a.impls else [e["name"] for e in registry(a.kmeans) if e["name"] != "seq"]
    rows = []
    for impl in names:
        for init in INITS:
            r, error = run_json([a.kmeans, f"--impl={impl}", *DATA, f"--init={init}", f"--loops={a.loops}",
                                 "--report=json", "--quiet"])
            if error:
                print(f"{impl} {init}: {error}", flush=True)
                continue
            for i, it in enumerate(r["per_iteration"], 1):
                rows.append(dict(impl=impl, init=init, iteration=i, inertia=it["inertia"], changed=it["changed"],
                                 shift=it["shift"], final_inertia=r["inertia"], device=r["device"], **st))
            print(f"{impl:<14} {init:<9} {r['iterations']:3d} iterations, final inertia {r['inertia']:.6e}", flush=True)
    write_csv(a.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
