#!/usr/bin/env python3
"""GEMM sweep: every kernel of the gemm program through sizes, ops, precisions, tiles and
CPU thread counts, in one run, each validated, with the reference (cuBLAS / OpenBLAS)
timed in the same process. Writes CSV (one row per run) with TFLOP/s and the ratio to the
reference, stamped with GPU, driver, date and commit.

  sweep=size     square sizes 512..8192 and the non-multiples 1000, 3000, every GPU
                 kernel (tensor in float = TF32, labelled), ops nn/tn/nt, both precisions;
                 hybrid at 1024 and above
  sweep=tile     naive, coalesced, shared, shared-static with W = 4, 8, 16, 32 at 2048
  sweep=threads  cpu-omp, cpu-blocked, cpu-blas on 1, 2, 4, ... P threads

A run whose predicted time (from the same kernel's rate at the previous size) exceeds
--budget seconds is skipped and recorded as such, so the slow rungs of the ladder do not
eat the machine. --quick keeps the sizes but the ops tn/nt only at 4096, and the
non-multiples only for nn (the analysis suite's setting).

OpenBLAS may misread a virtual machine's CPU and pick old kernels; when OPENBLAS_CORETYPE
is unset this script sets it from the CPU's flags (SkylakeX for AVX-512, Haswell for AVX2).
Usage: bench_gemm.py [--gemm build/gemm] [--csv out.csv] [--quick] [--budget S]"""
import argparse
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import registry, set_openblas_core, stamp  # noqa: E402


class Sweep:
    def __init__(self, gemm, budget, stamp_fields):
        self.gemm, self.budget, self.stamp = gemm, budget, stamp_fields
        self.rows, self.rates = [], {}

    def run(self, sweep, kernel, op, precision, size, tile=16, threads=0, reps=3, extra=()):
        flops = 2.0 * size ** 3 + (size * size if op == "nt" else 0)
        key = (kernel, op, precision, tile, threads)
        runs = reps + 2 + (1 if precision == "double" else 0) + (reps + 1 if kernel.startswith("cpu") else 0)
        base = dict(sweep=sweep, kernel=kernel, op=op, precision=precision, m=size, n=size, k=size, tile=tile,
                    threads=threads, **self.stamp)
        if key in self.rates and flops / self.rates[key] * runs > self.budget:
            predicted = flops / self.rates[key] * runs
            print(f"  skip {kernel} {op} {precision} {size}: predicted {predicted:.0f} s > budget", flush=True)
            self.rows.append(dict(base, status=f"skipped: predicted {predicted:.0f} s"))
            return
        cmd = [self.gemm, f"--kernel={kernel}", f"--op={op}", f"--precision={precision}", f"--size={size}",
               f"--tile={tile}", f"--reps={reps}", "--report=json", *extra]
        if threads:
            cmd.append(f"--threads={threads}")
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode not in (0, 3):
            print(f"  {kernel} {op} {precision} {size}: {p.stderr.strip()}", flush=True)
            self.rows.append(dict(base, status="error: " + p.stderr.strip()))
            return
        r = json.loads(p.stdout)
        rate = r["gflops"] * 1e9
        self.rates[key] = rate
        const = r["constant_check"]
        row = dict(base, tile=r["tile"], threads=r["threads"], device=r["device"], math=r["math"], h2d_s=r["seconds"]["h2d"],
                   kernel_s=r["seconds"]["kernel"], d2h_s=r["seconds"]["d2h"], cpu_s=r["seconds"]["cpu"],
                   total_s=r["seconds"]["total"], tflops=r["gflops"] / 1e3,
                   tflops_with_transfers=r["gflops_with_transfers"] / 1e3, reference=r["reference"],
                   reference_tflops=(r["reference_gflops"] or 0) / 1e3,
                   pct_of_reference=100 * (r["vs_reference"] or 0), max_rel_error=r["max_rel_error"],
                   tolerance=r["tolerance"], constant_error=const["max_rel_error"] if const else "",
                   passed=r["passed"], cpu_fraction=r["cpu_fraction"] if r["cpu_fraction"] is not None else "",
                   status="ok" if r["passed"] else "FAILED validation")
        self.rows.append(row)
        print(f"  {sweep:<7} {kernel:<13} {op} {precision:<6} {size:>5} W{tile:<2} T{r['threads']:<3} "
              f"{row['tflops']:8.3f} TFLOP/s  {row['pct_of_reference']:6.1f}% of {r['reference']:<22} "
              f"err {r['max_rel_error']:.2g} {'ok' if r['passed'] else 'FAILED'}", flush=True)


FIELDS = ["sweep", "kernel", "op", "precision", "m", "n", "k", "tile", "threads", "device", "math", "h2d_s",
          "kernel_s", "d2h_s", "cpu_s", "total_s", "tflops", "tflops_with_transfers", "reference",
          "reference_tflops", "pct_of_reference", "max_rel_error", "tolerance", "constant_error", "passed",
          "cpu_fraction", "status", "gpu", "driver", "date", "commit"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemm", default=os.path.join(HERE, "..", "build", "gemm"))
    ap.add_argument("--csv", default="bench_gemm.csv")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget", type=float, default=20.0, help="skip a run predicted to take longer (seconds)")
    ap.add_argument("--no-gpu", action="store_true", help="CPU kernels only")
    ap.add_argument("--precisions", default="float,double", help="comma-separated subset of float,double")
    a = ap.parse_args()
    set_openblas_core()
    st = stamp()
    kernels = registry(a.gemm)
    gpu_kernels = [k["name"] for k in kernels if k["where"] == "gpu"]
    cpu_kernels = [k["name"] for k in kernels if k["where"] == "cpu"]
    tiled = [k["name"] for k in kernels if k.get("uses_tile")]
    print(f"# gemm sweep on {st['gpu']} (driver {st['driver']}), commit {st['commit']}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}", flush=True)
    s = Sweep(a.gemm, a.budget, st)
    cores = os.cpu_count() or 1
    precisions = [p for p in ("float", "double") if p in a.precisions.split(",")]
    if not a.no_gpu:
        sizes = [512, 1000, 1024, 2048, 3000, 4096, 8192]
        for precision in precisions:
            for size in sizes:
                for op in ("nn", "tn", "nt"):
                    if a.quick and op != "nn" and size != 4096:
                        continue
                    for kernel in gpu_kernels:
                        extra = ("--allow-tf32",) if kernel == "tensor" and precision == "float" else ()
                        s.run("size", kernel, op, precision, size, reps=5 if size <= 2048 else 3, extra=extra)
                    if size >= 1024 and op == "nn" and size in (1024, 4096, 8192):
                        s.run("size", "hybrid", op, precision, size, reps=3)
        for precision in precisions:
            for kernel in tiled:
                for tile in (4, 8, 16, 32):
                    s.run("tile", kernel, "nn", precision, 2048, tile=tile, reps=3)
    threads = sorted({t for t in (1, 2, 4, 8, 16, 32, 64) if t <= cores} | {cores})
    for precision in precisions:
        for op in (("nn",) if a.quick else ("nn", "tn", "nt")):
            for kernel in cpu_kernels:
                for t in threads:
                    s.run("threads", kernel, op, precision, 1024, threads=t, reps=3)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, restval="")
        w.writeheader()
        w.writerows(s.rows)
    failed = [r for r in s.rows if r.get("status", "").startswith(("FAILED", "error"))]
    print(f"# {len(s.rows)} runs, {len(failed)} failed or errors -> {a.csv}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
