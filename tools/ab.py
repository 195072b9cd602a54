#!/usr/bin/env python3
"""A/B of kmeans builds or settings, in one call: each (shape, variant) runs ROUNDS times,
interleaved so drift hits every variant alike; prints the median over rounds of the per-iteration
kernel medians, the ratio to the first variant, and the first round's per-iteration times, `summed`
(fused's tensor path: objects through the sums), `changed` and inertia.

Usage: ab.py KMEANS_BIN 'mma=--fused-config=mma=0,base=' 1000000x128x128,262144x128x1024 float
       [--impl=fused] [--rounds=3] [--loops=10] [--phase=kernel]
A variant is name=ITEM;ITEM;...; an empty item list runs the defaults. Items:
  --OPTION[=VALUE]   a command-line option passed to kmeans for that variant (the usual form),
                     e.g. 'mma=--fused-config=mma=0' or 'b128=--block=128,b256=--block=256'
  BIN:PATH           runs another binary for that variant, e.g. 'base=BIN:/tmp/base/kmeans,now='
  VAR:VALUE          sets an environment variable for that variant's runs (for builds that still
                     read a setting from the environment), e.g. 'off=KMEANS_TENSOR_MOVERS:0'"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("variants")
    ap.add_argument("shapes", help="NxDxK,...")
    ap.add_argument("precision", choices=["float", "double"])
    ap.add_argument("--impl", default="fused")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loops", type=int, default=10)
    ap.add_argument("--phase", default="kernel", help="the per-iteration time compared (kernel, total, ...)")
    a = ap.parse_args()
    variants, options = {}, {}
    for v in a.variants.split(","):
        name, _, items = v.partition("=")
        items = [e for e in items.split(";") if e]
        variants[name] = dict(e.split(":", 1) for e in items if not e.startswith("--"))
        options[name] = [e for e in items if e.startswith("--")]
    shapes = [tuple(map(int, s.split("x"))) for s in a.shapes.split(",")]
    res = {}
    for _ in range(a.rounds):
        for n, d, k in shapes:
            for name, env in variants.items():
                env = dict(env)
                binary = env.pop("BIN", a.binary)
                p = subprocess.run([binary, f"--impl={a.impl}", f"--precision={a.precision}", f"--objects={n}",
                                    f"--coords={d}", f"--clusters={k}", f"--loops={a.loops}", "--quiet",
                                    "--report=json", *options[name]], capture_output=True, text=True,
                                   env={**os.environ, **env})
                if p.returncode:
                    print(name, n, d, k, p.stderr.strip(), file=sys.stderr)
                    continue
                its = json.loads(p.stdout)["per_iteration"]
                res.setdefault((n, d, k, name), []).append(
                    (1e3 * statistics.median(i[a.phase] for i in its), json.loads(p.stdout)["inertia"], its))
    status = 0
    for n, d, k in shapes:
        base = None
        for name in variants:
            xs = res.get((n, d, k, name))
            if not xs:
                status = 1
                continue
            m = statistics.median(x[0] for x in xs)
            base = base or m
            its = xs[0][2]
            print(f"{n:>8} x {d:<4} K={k:<6} {a.precision} {name:<8} {m:8.4f} ms {(m / base) if base else float('nan'):6.3f}x  rounds "
                  f"{' '.join(f'{x[0]:.3f}' for x in xs)}  final inertia {xs[0][1]!r}")
            print(f"      per-iteration ms {[round(1e3 * i[a.phase], 3) for i in its]}\n"
                  f"      summed {[i.get('summed') for i in its]}\n      changed {[i['changed'] for i in its]}\n"
                  f"      rechecked {[i.get('rechecked') for i in its]} rescored {[i.get('rescored') for i in its]}\n"
                  f"      inertia {[i['inertia'] for i in its]}")
    return status


if __name__ == "__main__":
    sys.exit(main())
