#!/usr/bin/env python3
"""The lab's rows (fused, 256 MB: d = 2, K = 16; d = 16, K = 16; d = 32, K = 64; both precisions)
against the memory floor (objects read once + labels written, over the read bandwidth kmeans-probe
measures in the same call), for one or more builds, ROUNDS interleaved rounds: the median of the
per-iteration kernel medians, its ratio to the floor and to the first build, and the same of the
iterations' wall time (`total`, which every build times with the host's clock). Then, from the same
probe, the bare assignment passes at the float rows' sizes (kmeans-probe --assign, --assign-mma: loads,
scores, the best two and the labels, nothing else), timed as the engine times its iterations (the
kernels' own span), against the same floor: the ceiling no exact design of those scores passes.

Usage: lab_rows.py name=KMEANS_BIN[,name=KMEANS_BIN...] KMEANS_PROBE_BIN [--rounds=3]"""
import argparse
import json
import statistics
import subprocess
import sys

ROWS = [("d2k16", 2, 16), ("d16k16", 16, 16), ("d32k64", 32, 64)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds")
    ap.add_argument("probe")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    builds = dict(b.split("=", 1) for b in a.builds.split(","))
    probe = json.loads(subprocess.run([a.probe, "--gemm=262144,1024,128", f"--assign={1 << 21}",
                                       f"--assign-mma={1 << 20}"], capture_output=True, text=True, check=True).stdout)
    bw = probe["read_bandwidth_gbs"] * 1e9
    print(f"# {probe['device']}: read bandwidth {probe['read_bandwidth_gbs']:.1f} GB/s")
    res = {}
    for _ in range(a.rounds):
        for name, d, k in ROWS:
            for prec in ("double", "float"):
                for b, path in builds.items():
                    r = json.loads(subprocess.run([path, "--impl=fused", "--size=256", f"--coords={d}",
                                                   f"--clusters={k}", "--loops=10", f"--precision={prec}",
                                                   "--report=json", "--quiet"], capture_output=True, text=True,
                                                  check=True).stdout)
                    med = statistics.median(i["kernel"] for i in r["per_iteration"])
                    wall = statistics.median(i["total"] for i in r["per_iteration"])
                    floor = (r["objects"] * d * (8 if prec == "double" else 4) + r["objects"] * 4) / bw
                    res.setdefault((name, prec, b), []).append((med, floor, r["inertia"], r.get("path"), r["objects"], wall))
    for name, _, _ in ROWS:
        for prec in ("double", "float"):
            base = wall_base = None
            for b in builds:
                xs = res[(name, prec, b)]
                m = statistics.median(x[0] for x in xs)
                fl = xs[0][1]
                base = base or m
                w = statistics.median(x[5] for x in xs)
                wall_base = wall_base or w
                print(f"{name:7} {prec:6} {b:5} {xs[0][3]:9} N={xs[0][4]:<9} median {1e3 * m:.4f} ms  floor "
                      f"{1e3 * fl:.4f}  ratio {m / fl:5.2f}  vs base {m / base:5.3f}  wall {1e3 * w:.4f} ms ratio {w / fl:5.2f} "
                      f"vs base {w / wall_base:5.3f}  distinct inertias "
                      f"{len(set(x[2] for x in xs))}  inertia {xs[0][2]!r}")
    # The bare passes' spans over the probe's floor for those objects (d = 16, K = 16 and d = 32, K = 64).
    for a_ in probe.get("assign", []):
        for v in a_["runs"]:
            what = f"FMA scores, U = {v['u']}" if v["scores"] else "loads and label stores only"
            print(f"bare pass  {a_['objects']} x {a_['coords']}, K = {a_['clusters']}, float, {what}: span "
                  f"{1e3 * v['span_seconds']:.4f} ms = {v['span_seconds'] / a_['floor_seconds']:.2f} x floor "
                  f"(events {v['seconds'] / a_['floor_seconds']:.2f} x)")
    for a_ in probe.get("assign_mma", []):
        print(f"bare pass  {a_['objects']} x {a_['coords']}, K = {a_['clusters']}, float, TF32 mma scores: span "
              f"{1e3 * a_['span_seconds']:.4f} ms = {a_['span_seconds'] / a_['floor_seconds']:.2f} x floor "
              f"(events {a_['seconds'] / a_['floor_seconds']:.2f} x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
