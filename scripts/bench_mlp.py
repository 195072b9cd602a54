#!/usr/bin/env python3
"""mlp over the GEMM ladder: every GPU kernel (and cpu-blocked) for 2 epochs with per-operation
phases, the headline kernels for 10 epochs without events, into one CSV (with a `run` column
and the stamp); plot_all.py draws mlp_epoch.png and mlp_accuracy.png from it and from
scripts/mlp_torch.py's CSV.

    python3 scripts/bench_mlp.py --mlp build/mlp --csv plots/mlp.csv
"""
import argparse
import csv
import io
import subprocess
import sys

from common import stamp, write_csv

GPU_KERNELS = ["cublas", "naive", "coalesced", "shared", "shared-static", "regblock", "tensor"]


def run(mlp, data, args):
    r = subprocess.run([mlp, "--quiet", "--report=csv", f"--data={data}", *args], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        print(f"mlp {' '.join(args)}: {r.stderr.strip()}", file=sys.stderr)
        return []
    return list(csv.DictReader(io.StringIO(r.stdout)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mlp", default="build/mlp")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    s = stamp()
    rows = []
    for prec in ("float", "double"):
        for k in GPU_KERNELS + ["cpu-blocked"]:
            extra = ["--allow-tf32"] if k == "tensor" and prec == "float" else []
            for r in run(a.mlp, a.data, [f"--kernel={k}", f"--precision={prec}", "--epochs=2", *extra]):
                rows.append({**r, "run": "2 epochs, phases timed", **s})
    for k, prec in (("cublas", "float"), ("regblock", "float"), ("cublas", "double"), ("tensor", "double")):
        for r in run(a.mlp, a.data, [f"--kernel={k}", f"--precision={prec}", "--epochs=10", "--no-phases"]):
            rows.append({**r, "run": "10 epochs, --no-phases", **s})
        print(f"{k} {prec}: done", flush=True)
    if not rows:
        return 1
    write_csv(a.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
