#!/usr/bin/env python3
"""k-means|| init against its 10 iterations (the real-data-shapes issue's init target), A/B of
environment settings in one call: each (data, precision, variant) run ROUNDS times, interleaved so
drift hits every variant alike, a fresh process each; prints and writes (--csv) every run's init,
setup and loop seconds from the JSON report, then per (data, precision, variant) the medians of
init and of init / loop, and the ratio of the init median to the first variant's.

Usage: init_ab.py KMEANS_BIN 'before=KMEANS_SHARE_COPY:0,now=' [--shape=1000000x128x1024] [--rounds=3]
       [--loops=10] [--csv=FILE]
(a variant is name=VAR:VALUE;VAR:VALUE...; BIN:PATH runs another binary for that variant, e.g.
'base=BIN:/tmp/base/kmeans,now=')"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("variants")
    ap.add_argument("--shape", default="1000000x128x1024")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loops", type=int, default=10)
    ap.add_argument("--data", default="blobs,uniform")
    ap.add_argument("--precisions", default="double,float")
    ap.add_argument("--csv")
    a = ap.parse_args()
    variants = {}
    for v in a.variants.split(","):
        name, _, items = v.partition("=")
        variants[name] = dict(e.split(":", 1) for e in items.split(";") if e)
    n, d, k = map(int, a.shape.split("x"))
    rows = []
    for r in range(a.rounds):
        for gen in a.data.split(","):
            for prec in a.precisions.split(","):
                for name, env in variants.items():
                    env = dict(env)
                    binary = env.pop("BIN", a.binary)
                    cmd = [binary, "--impl=fused", f"--objects={n}", f"--coords={d}", f"--clusters={k}",
                           f"--generator={gen}", "--init=kmeans||", f"--loops={a.loops}", f"--precision={prec}",
                           "--report=json", "--quiet"]
                    out = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
                    if out.returncode != 0:
                        sys.exit(f"{name} {gen} {prec}: exit {out.returncode}: {out.stderr.strip()}")
                    rep = json.loads(out.stdout)
                    s = rep["seconds"]
                    row = dict(variant=name, data=gen, precision=prec, round=r, init=s["init"], setup=s["setup"],
                               loop=s["loop"], ratio=s["init"] / s["loop"], inertia=rep["inertia"])
                    rows.append(row)
                    print(f"{name:10s} {gen:8s} {prec:6s} init {s['init']:.4f} setup {s['setup']:.4f} "
                          f"loop {s['loop']:.4f} ratio {row['ratio']:.3f} inertia {rep['inertia']!r}", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(f"# medians over {a.rounds} rounds: init (s), init / loop, init / the first variant's init")
    first = next(iter(variants))
    for gen in a.data.split(","):
        for prec in a.precisions.split(","):
            base = statistics.median(x["init"] for x in rows if (x["variant"], x["data"], x["precision"]) ==
                                     (first, gen, prec))
            for name in variants:
                sel = [x for x in rows if (x["variant"], x["data"], x["precision"]) == (name, gen, prec)]
                init = statistics.median(x["init"] for x in sel)
                ratio = statistics.median(x["ratio"] for x in sel)
                inertias = sorted({x["inertia"] for x in sel})
                print(f"{gen:8s} {prec:6s} {name:10s} init {init:.4f} init/loop {ratio:.3f} "
                      f"vs {first} {init / base:.3f} inertias {inertias}")


if __name__ == "__main__":
    main()
