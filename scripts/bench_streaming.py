#!/usr/bin/env python3
"""Out-of-core k-means: time per iteration against the data's size, across the device-memory
boundary (set with --device-memory, so that one GPU shows both sides), in one run.

For each size it runs `kmeans --impl=fused` (and offload-block) on generated float data and
writes one CSV row: the median time per iteration (iterations 2..), whether it streamed (the
report's path), the h2d phase (the copy stream's span), and the link floor: the data's bytes
over the pinned host-to-device bandwidth that kmeans-probe measures in the same run. The
target is iteration / floor <= 1.25 for streamed runs.
Usage: bench_streaming.py [--bin build] [--cap 16G] [--sizes-gb 4,8,16,32,60] [--csv streaming.csv]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, run_json, stamp, write_csv  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--cap", default="16G", help="--device-memory for every run")
    ap.add_argument("--sizes-gb", default="4,8,16,32,60")
    ap.add_argument("--coords", type=int, default=16)
    ap.add_argument("--clusters", type=int, default=16)
    ap.add_argument("--impls", default="fused,offload-block")
    ap.add_argument("--loops", type=int, default=4)
    ap.add_argument("--csv", default="streaming.csv")
    a = ap.parse_args()
    probe = json.loads(subprocess.run([os.path.join(a.bin, "kmeans-probe")], capture_output=True, text=True,
                                      check=True).stdout)
    link = probe["h2d_pinned_gbs"] * 1e9
    print(f"# {probe['device']}: pinned host->device {probe['h2d_pinned_gbs']:.1f} GB/s, "
          f"device read {probe['read_bandwidth_gbs']:.0f} GB/s; --device-memory={a.cap}", flush=True)
    run = stamp()
    rows = []
    for impl in a.impls.split(","):
        for gb in [float(x) for x in a.sizes_gb.split(",")]:
            objects = int(gb * 1e9 / (a.coords * 4))
            cmd = [os.path.join(a.bin, "kmeans"), f"--impl={impl}", f"--objects={objects}", f"--coords={a.coords}",
                   f"--clusters={a.clusters}", "--precision=float", f"--loops={a.loops}", f"--device-memory={a.cap}",
                   "--report=json", "--quiet"]
            r, error = run_json(cmd)
            row = dict(run, impl=impl, data_gb=gb, objects=objects, coords=a.coords, clusters=a.clusters,
                       cap=a.cap, h2d_gbs=probe["h2d_pinned_gbs"])
            if error:
                print(f"{impl} {gb} GB: {error}", flush=True)
                rows.append(dict(row, error=error))
                continue
            its = r["per_iteration"][1:] or r["per_iteration"]
            med = {k: statistics.median(it[k] for it in its) for k in ("total", "h2d", "kernel")}
            floor = objects * a.coords * 4 / link
            streamed = "streamed" in (r["path"] or "")
            row.update(path=r["path"], streamed=int(streamed), iteration_s=med["total"], h2d_s=med["h2d"],
                       kernel_s=med["kernel"], link_floor_s=floor, floor_ratio=med["total"] / floor,
                       setup_s=r["seconds"]["setup"], iterations=r["iterations"], inertia=r["inertia"])
            rows.append(row)
            print(f"{impl} {gb:g} GB ({r['path']}): {med['total'] * 1e3:.1f} ms/iter, link floor "
                  f"{floor * 1e3:.1f} ms -> {med['total'] / floor:.2f}x; setup {r['seconds']['setup']:.1f} s",
                  flush=True)
    write_csv(a.csv, rows)


if __name__ == "__main__":
    main()
