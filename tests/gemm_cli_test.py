#!/usr/bin/env python3
"""gemm end to end: its reports and its errors (one line, the right exit code, nothing on stdout)."""
import json
import subprocess
import sys

GEMM = sys.argv[1]
failures = []


def run(*args):
    return subprocess.run([GEMM, *args], capture_output=True, text=True)


def expect_error(code, words, *args):
    p = run(*args)
    lines = p.stderr.strip().splitlines()
    ok = p.returncode == code and len(lines) == 1 and lines[0].startswith("gemm: error:") and not p.stdout
    ok = ok and all(w in lines[0] for w in words)
    if not ok:
        failures.append(f"{args}: exit {p.returncode}, stderr {p.stderr!r}, stdout {p.stdout[:80]!r}")


# A validated CPU run in every report format.
p = run("--kernel=cpu-blocked", "--op=nt", "--m=37", "--n=29", "--k=41", "--report=json", "--reps=2")
if p.returncode != 0:
    failures.append(f"cpu-blocked json: {p.returncode} {p.stderr}")
else:
    r = json.loads(p.stdout)
    for key in ("kernel", "op", "m", "n", "k", "precision", "tile", "device", "seconds", "gflops", "max_rel_error",
                "reference"):
        if key not in r:
            failures.append(f"json lacks {key}")
    for key in ("h2d", "kernel", "d2h", "total"):
        if key not in r.get("seconds", {}):
            failures.append(f"json seconds lacks {key}")
    if not (r.get("passed") and r.get("checked") and r["constant_check"]["passed"] and r["m"] == 37):
        failures.append(f"json run not validated: {p.stdout}")
p = run("--kernel=cpu-omp", "--size=20", "--precision=float", "--report=csv")
if p.returncode != 0 or len(p.stdout.strip().splitlines()) != 2 or not p.stdout.startswith("kernel,op,"):
    failures.append(f"csv report: {p.returncode} {p.stdout!r} {p.stderr!r}")
p = run("--kernel=cpu-blas", "--size=16", "--no-check")
if p.returncode != 0 or "not checked" not in p.stdout:
    failures.append(f"--no-check must say so: {p.stdout!r}")

# --version: one line, exit 0.
p = run("--version")
if p.returncode != 0 or not p.stdout.startswith("gemm (kmeans-gpu ") or p.stdout.count("\n") != 1:
    failures.append(f"--version: {p.returncode} {p.stdout!r}")

# --list: the registry as JSON, in ladder order, the same names --help shows.
p = run("--list")
kernels = json.loads(p.stdout) if p.returncode == 0 else []
names = [k["name"] for k in kernels]
helptext = run("--help").stdout
if not kernels or names[0] != "cublas" or [k["order"] for k in kernels] != list(range(len(kernels))):
    failures.append(f"--list: {p.stdout!r}")
for k in kernels:
    if k["where"] not in ("gpu", "cpu", "hybrid") or f"  {k['name']} " not in helptext or "uses_tile" not in k:
        failures.append(f"--list entry {k}")
if {"cpu-omp", "cpu-blocked", "cpu-blas", "tensor", "regblock"} - set(names):
    failures.append(f"--list misses kernels: {names}")

# A report standard output cannot take (a full disk): one line and exit 1, not a silent success.
with open("/dev/full", "w") as full:
    p = subprocess.run([GEMM, "--kernel=cpu-blas", "--size=16"], stdout=full, stderr=subprocess.PIPE, text=True)
if p.returncode != 1 or "could not be written to standard output" not in p.stderr:
    failures.append(f"report to /dev/full: exit {p.returncode}, stderr {p.stderr!r}")

# Bad options: exit 2, one line.
expect_error(2, ["--cpu-fraction=nan must be in [0, 1]"], "--kernel=hybrid", "--cpu-fraction=nan")
expect_error(2, ["--mma=4294968980: use 884, 1684 or 1688"], "--kernel=tensor", "--mma=4294968980")
expect_error(2, ["--kernel=warp"], "--kernel=warp")
expect_error(2, ["--op=tt"], "--op=tt")
expect_error(2, ["--tile"], "--kernel=shared", "--tile=12")
expect_error(2, ["--m"], "--kernel=cpu-omp", "--m=0")
expect_error(2, ["--m"], "--kernel=cpu-omp", "--m=99999999999")
expect_error(2, ["--reps"], "--kernel=cpu-omp", "--reps=0")
expect_error(2, ["--precision"], "--precision=half")
expect_error(2, ["--allow-tf32"], "--kernel=tensor", "--precision=float", "--size=64")
expect_error(2, ["--cpu-fraction"], "--kernel=cpu-omp", "--cpu-fraction=0.5")
expect_error(2, [], "--size=64", "--m=32")
expect_error(2, [], "--frobnicate")
# More than the machine has (KMEANS_HOST_MEMORY stands in for a small machine), and sizes whose
# product overflows: one line, exit 1, before anything is allocated.
import os  # noqa: E402
for args in (["--kernel=cpu-blas", "--size=40000"], ["--kernel=cpu-omp", "--m=2147483647", "--n=2147483647", "--k=1"]):
    p = subprocess.run([GEMM, *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, KMEANS_HOST_MEMORY="1000000000"))
    if p.returncode != 1 or "of host memory but" not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
        failures.append(f"{args} on a 1 GB machine: {p.returncode} {p.stderr!r}")
expect_error(2, ["--size"], "--size=010x")
p = run("--kernel=cpu-omp", "--size=010", "--report=json")
if p.returncode != 0 or json.loads(p.stdout)["m"] != 10:
    failures.append(f"--size=010 is ten: {p.stdout!r}")

# --seed takes 0..2^64-1 as given (2^63 is not 2^63-1); beyond, one line.
seeded = {}
for seed in ("9223372036854775807", "9223372036854775808", "18446744073709551615"):
    p = run("--kernel=cpu-blocked", "--size=33", "--precision=float", f"--seed={seed}", "--report=json")
    seeded[seed] = json.loads(p.stdout)["max_rel_error"] if p.returncode == 0 else None
    if p.returncode != 0:
        failures.append(f"--seed={seed}: {p.returncode} {p.stderr!r}")
if seeded["9223372036854775807"] == seeded["9223372036854775808"]:
    failures.append(f"--seed=2^63 must differ from 2^63-1: {seeded}")
expect_error(2, ["--seed"], "--seed=-1")
expect_error(2, ["out of range"], "--seed=18446744073709551616")
# An option with nothing after '=' names itself instead of taking the next argument.
expect_error(2, ["--size: empty value"], "--size=", "--kernel=cpu-omp")

# A GPU kernel where there is no GPU: exit 1, naming the reason.
probe = run("--kernel=cublas", "--size=8")
if probe.returncode != 0:
    expect_error(1, ["needs a CUDA GPU"], "--kernel=regblock", "--size=8")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("gemm CLI: all checks passed")
