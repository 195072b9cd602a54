#!/usr/bin/env python3
"""End-to-end tests of the kmeans binary: JSON/CSV/table reports, outputs, and every bad
option or input as one line on stderr with a non-zero exit and no output file.
Standard library only. Usage: cli_test.py path/to/kmeans"""
import csv
import io
import json
import math
import os
import resource
import re
import select
import struct
import subprocess
import sys
import tempfile

KMEANS = sys.argv[1]
failures = []


def run(*args, check=True):
    p = subprocess.run([KMEANS, *args], capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"kmeans {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def test_json_contract():
    for impl in ("seq", "omp"):
        for precision in ("double", "float"):
            p = run(f"--impl={impl}", "--objects=20011", "--coords=5", "--clusters=7", "--loops=6",
                    f"--precision={precision}", "--report=json", "--quiet")
            expect(p.stderr == "", f"{impl}: --quiet leaves stderr empty, got {p.stderr!r}")
            r = json.loads(p.stdout)  # exactly one JSON object on stdout
            tag = f"{impl}/{precision}"
            for key in ("impl", "precision", "device", "objects", "coords", "clusters", "block", "threads",
                        "iterations", "converged", "inertia", "seconds", "phases", "per_iteration"):
                expect(key in r, f"{tag}: JSON has '{key}'")
            expect(r["impl"] == impl and r["precision"] == precision, f"{tag}: impl/precision echoed")
            expect(r["device"] == "cpu", f"{tag}: device is cpu")
            expect((r["objects"], r["coords"], r["clusters"], r["block"]) == (20011, 5, 7, 128), f"{tag}: shape")
            expect(r["threads"] >= 1 and (impl != "seq" or r["threads"] == 1), f"{tag}: threads")
            for key in ("load", "setup", "loop", "total"):
                expect(r["seconds"][key] >= 0, f"{tag}: seconds.{key}")
            expect(r["seconds"]["total"] >= r["seconds"]["loop"], f"{tag}: total >= loop")
            its = r["per_iteration"]
            expect(len(its) == r["iterations"] and 1 <= r["iterations"] <= 6, f"{tag}: one entry per iteration")
            expect(its[0]["changed"] == 20011, f"{tag}: first iteration changes every object")
            for phase in ("h2d", "kernel", "cpu", "d2h"):
                total = sum(it[phase] for it in its)
                expect(math.isclose(r["phases"][phase], total, rel_tol=1e-9, abs_tol=1e-12),
                       f"{tag}: phases.{phase} sums per_iteration")
            for i, it in enumerate(its):
                covered = it["h2d"] + it["kernel"] + it["cpu"] + it["d2h"]
                expect(covered >= 0.95 * it["total"], f"{tag}: iteration {i} phases cover 95% of total "
                                                      f"({covered} of {it['total']})")
                expect(it["h2d"] == 0 and it["kernel"] == 0 and it["d2h"] == 0, f"{tag}: no device phases on CPU")
            expect(r["inertia"] > 0, f"{tag}: inertia")


def test_seq_and_omp_agree():
    out = {}
    for impl in ("seq", "omp"):
        out[impl] = json.loads(run(f"--impl={impl}", "--objects=30000", "--generator=blobs", "--seed=4",
                                   "--init=kmeans++", "--loops=8", "--report=json").stdout)
    expect(out["seq"]["iterations"] == out["omp"]["iterations"], "seq and omp: same iterations")
    expect(math.isclose(out["seq"]["inertia"], out["omp"]["inertia"], rel_tol=1e-12), "seq and omp: same inertia")


def test_csv_and_table_reports():
    p = run("--objects=5000", "--loops=4", "--report=csv")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    expect(len(rows) == int(rows[0]["iterations"]), "csv: one row per iteration")
    expect([int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1)), "csv: iterations numbered")
    p = run("--objects=5000", "--loops=4", "--impl=seq")
    for word in ("impl=seq", "5000 objects", "kernel ms", "changed", "inertia", "seconds"):
        expect(word in p.stdout, f"table report mentions '{word}'")


def test_outputs_and_inputs():
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "in.csv")
        with open(data, "w") as f:
            f.write("a,b\n")
            for i in range(300):
                f.write(f"{i % 17},{(i * 7) % 13}.5\n")
        h5 = os.path.join(tmp, "res.h5")
        out = os.path.join(tmp, "res.csv")
        r = json.loads(run(f"--input={data}", "--clusters=4", f"--output={h5}", "--report=json").stdout)
        expect(r["objects"] == 300 and r["coords"] == 2, "csv input read with its header")
        expect(os.path.getsize(h5) > 0, "h5 output written")
        run(f"--input={data}", "--clusters=4", "--coords=2", f"--output={out}", "--quiet")
        with open(out) as f:
            centroids = [line.split(",") for line in f.read().split()]
        expect(len(centroids) == 4 and all(len(c) == 2 for c in centroids), "csv output: K rows of d values")
        with open(os.path.join(tmp, "res.labels.csv")) as f:
            labels = [int(x) for x in f.read().split()]
        expect(len(labels) == 300 and set(labels) <= {0, 1, 2, 3}, "labels written beside the csv")
        expect(not [n for n in os.listdir(tmp) if ".tmp" in n], "no temporary files left")


def test_help_and_list():
    p = run("--help")
    bad = run("--list", "--clusters=-1", "--coords=3", check=False)
    expect(bad.returncode == 2 and "--clusters=-1" in bad.stderr and not bad.stdout, f"--list, bad shape: {bad}")
    bad = run("--threshold=1.0000001", check=False)
    expect(bad.returncode == 2 and "--threshold=1.0000001:" in bad.stderr, f"the value as given: {bad.stderr!r}")
    v = run("--version")
    expect(re.fullmatch(r"kmeans \(kmeans-gpu \d+\.\d+(\.\d+)?\)\n", v.stdout) is not None and "--version" in p.stdout,
           f"--version: {v.stdout!r}")
    registry = json.loads(run("--list").stdout)
    names = [e["name"] for e in registry]
    expect(names[:2] == ["seq", "omp"] and "fused" in names, f"--list is the ladder, got {names}")
    expect([e["order"] for e in registry] == list(range(len(registry))), "--list orders the ladder")
    shaped = {e["name"]: e for e in json.loads(run("--list", "--coords=128", "--clusters=1024").stdout)}
    fused = shaped.get("fused", {})
    expect(shaped["omp"]["runs"] is True and (fused.get("path") or "tensor").startswith("tensor")
           and (fused.get("plan") or {}).get("path") == "tensor" and "scores" in fused.get("plan", {}),
           f"--list for a shape: the path and the whole plan: {fused}")
    for e in registry:
        expect(set(e) >= {"name", "description", "where", "order"} and e["where"] in ("cpu", "gpu"),
               f"--list entry {e}")
        line = next((l for l in p.stdout.splitlines() if l.startswith(f"  {e['name']} ")), "")
        expect(e["description"] in line, f"--help lists {e['name']} with its description")
        expect(line.endswith("[GPU]") == (e["where"] == "gpu"), f"--help marks where {e['name']} runs")


def run_on_terminal(*args, env=None):
    """kmeans with its stderr on a pseudo-terminal: (exit status, stdout, what the terminal got)."""
    master, terminal = os.openpty()
    with tempfile.TemporaryFile() as out:
        try:
            p = subprocess.Popen([KMEANS, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=terminal, env=env)
        finally:
            os.close(terminal)
        got = b""
        while select.select([master], [], [], 120)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the program has closed the terminal
                break
            if not chunk:
                break
            got += chunk
        os.close(master)
        code = p.wait(timeout=120)
        out.seek(0)
        return code, out.read().decode(), got.decode().replace("\r\n", "\n")


def write_npy(path, rows):
    """A float64 (n, d) .npy of these rows (standard library only)."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), len(rows[0]))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(rows) * len(rows[0])}d", *(v for r in rows for v in r)))


def test_progress_on_a_terminal():
    # Every stage a person waits for, on a terminal: loading (text: the scan and the parse; .npy),
    # k-means++ and k-means||, the iterations (each fit of --n-init), each line rewritten in place.
    env = dict(os.environ, KMEANS_PROGRESS_AFTER="0")  # shown at once, however short
    with tempfile.TemporaryDirectory() as tmp:
        csv_path, npy = os.path.join(tmp, "d.csv"), os.path.join(tmp, "d.npy")
        with open(csv_path, "w") as f:
            f.write("".join(f"{i % 97}.25,{i % 13},{i % 7}.5\n" for i in range(80000)))
        code, out, tty = run_on_terminal(f"--input={csv_path}", "--impl=seq", "--clusters=40", "--init=kmeans++",
                                         "--loops=3", "--report=json", env=env)
        expect(code == 0 and json.loads(out)["iterations"] >= 1, f"a run on a terminal: {code} {tty[-300:]!r}")
        for stage in ("scanning", "reading", "k-means++", "iterations"):
            expect(f"\rkmeans: {stage} " in tty, f"progress shows {stage}: {tty[:400]!r}")
        expect("\x1b[K" in tty and tty.endswith("\n"), f"lines rewritten in place, the last one ended: {tty[-200:]!r}")
        expect("centres/s" in tty and "s left" in tty, f"a rate and the time left: {tty[:400]!r}")
        expect(re.search(r"iterations 100%  3 of 3 iterations .*changed, inertia", tty) is not None,
               f"the iterations' line ends with the last one's numbers: {tty[-300:]!r}")
        write_npy(npy, [[i % 89 * 0.5, i % 31, i % 7] for i in range(40000)])
        code, out, tty = run_on_terminal(f"--input={npy}", "--impl=omp", "--clusters=8", "--init=kmeans||",
                                         "--n-init=2", "--loops=2", "--report=json", env=env)
        expect(code == 0, f"a .npy run on a terminal: {code} {tty[-300:]!r}")
        expect("\rkmeans: reading 100%  0.96 of 0.96 MB" in tty, f"progress shows reading the .npy: {tty[:300]!r}")
        expect("\rkmeans: k-means|| " in tty, f"progress shows k-means||: {tty[:600]!r}")
        expect("(fit 1 of 2)" in tty and "(fit 2 of 2)" in tty, f"progress names each fit: {tty[-600:]!r}")


def test_progress_nowhere_else():
    # Nothing on stderr when it is not a terminal, nor with --quiet on one, nor for stages
    # shorter than a second by default.
    args = ["--impl=seq", "--objects=30000", "--coords=4", "--clusters=20", "--init=kmeans++", "--loops=4",
            "--report=json"]
    env = dict(os.environ, KMEANS_PROGRESS_AFTER="0")
    p = subprocess.run([KMEANS, *args], capture_output=True, text=True, env=env, timeout=120)
    expect(p.returncode == 0 and p.stderr == "", f"no progress without a terminal, got {p.stderr[:300]!r}")
    code, _, tty = run_on_terminal(*args, "--quiet", env=env)
    expect(code == 0 and tty == "", f"--quiet: nothing on the terminal, got {tty[:300]!r}")
    env.pop("KMEANS_PROGRESS_AFTER")
    code, _, tty = run_on_terminal("--impl=seq", "--objects=1000", "--coords=2", "--clusters=3", "--loops=2", env=env)
    expect(code == 0 and tty == "", f"stages of milliseconds: nothing on the terminal, got {tty[:300]!r}")


def test_bad_inputs():
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good.csv")
        with open(good, "w") as f:
            f.write("1,2\n3,4\n5,6\n")
        nan = os.path.join(tmp, "nan.csv")
        with open(nan, "w") as f:
            f.write("1,2\nnan,4\n")
        ragged = os.path.join(tmp, "ragged.csv")
        with open(ragged, "w") as f:
            f.write("1,2\n3\n")
        out = os.path.join(tmp, "out.h5")
        cases = [
            (["--size=0"], "--size"), (["--size=-1"], "--size"), (["--objects=0"], "--objects"),
            (["--objects=-5"], "--objects"), (["--loops=0"], "--loops"), (["--loops=-1"], "--loops"),
            (["--block=33"], "--block"), (["--block=16"], "--block"), (["--block=2048"], "--block"),
            (["--clusters=0"], "--clusters"), (["--objects=10", "--clusters=11"], "--clusters"),
            (["--coords=0"], "--coords"), (["--threshold=2"], "--threshold"), (["--tol=-1"], "--tol"),
            (["--precision=half"], "--precision"), (["--report=xml"], "--report"), (["--init=magic"], "--init"),
            (["--impl=bogus"], "unknown implementation"), (["--size=1", "--objects=10"], "excludes"),
            (["--generator=gauss"], "--generator"), (["--threads=-2"], "--threads"),
            (["--input=" + os.path.join(tmp, "missing.csv")], "No such file"),
            (["--seed=-1"], "--seed"), (["--seed=18446744073709551616"], "out of range"),
            (["--clusters=0x10"], "--clusters"), (["--objects=1e3"], "--objects"), (["--loops=+-3"], "--loops"),
            (["--input", ""], "empty"), (["--output", ""], "empty"), (["--size=inf"], "--size"),
            (["--size=1e999"], "--size"), (["--threads=100000"], "--threads"), (["--threads=2147483648"], "--threads"),
            (["--input=" + good, "--clusters=2", "--output=" + good], "would overwrite"),
            (["--input=" + os.path.join(tmp, "data.xyz")], "unknown extension"),
            (["--input=" + good, "--coords=3"], "--coords=3"),
            (["--input=" + good, "--clusters=4"], "--clusters=4"),
            (["--input=" + nan], "NaN"), (["--input=" + ragged], "ragged"),
            (["--input=" + good, "--dataset=x"], "--dataset"),
            (["--output=" + os.path.join(tmp, "nodir", "out.h5")], "does not exist"),
            (["--output=" + os.path.join(tmp, "out.txt")], "--output"),
            (["--no-such-option"], "no-such-option"),
            (["--gpus=0"], "--gpus"), (["--device-memory=abc"], "--device-memory"),
            (["--device-memory=0"], "--device-memory"), (["--impl=omp", "--gpus=2"], "runs on the CPU"),
        ]
        for args, needle in cases:
            full = ["--objects=1000", *args] if not any(a.startswith(("--input", "--size", "--objects")) for a in args) \
                else list(args)
            full += ["--output=" + out] if not any(a.startswith("--output") for a in args) else []
            p = run(*full, check=False)
            lines = p.stderr.strip().split("\n")
            tag = " ".join(args)
            expect(p.returncode != 0, f"{tag}: non-zero exit")
            expect(len(lines) == 1 and lines[0].startswith("kmeans: error:"), f"{tag}: one error line, got {p.stderr!r}")
            expect(needle in p.stderr, f"{tag}: error names '{needle}', got {p.stderr!r}")
            expect(p.stdout == "", f"{tag}: nothing on stdout")
            expect(not os.path.exists(out), f"{tag}: no output file")
            expect(not [n for n in os.listdir(tmp) if ".tmp" in n], f"{tag}: no temporary file")


def test_strict_options():
    # Integers are decimal (010 is ten, not octal eight); OMP_NUM_THREADS far too high is clamped.
    r = json.loads(run("--impl=seq", "--objects=500", "--clusters=010", "--report=json", "--quiet").stdout)
    expect(r["clusters"] == 10, f"--clusters=010 means 10, got {r['clusters']}")
    env = dict(os.environ, OMP_NUM_THREADS="100000")
    p = subprocess.run([KMEANS, "--impl=seq", "--objects=500", "--report=json", "--quiet"], capture_output=True,
                       text=True, env=env, timeout=120)
    expect(p.returncode == 0 and "above the limit" in p.stderr, f"OMP_NUM_THREADS=100000: {p.returncode} {p.stderr}")
    # More than the machine has: one clear line before anything is allocated (KMEANS_HOST_MEMORY
    # stands in for a small machine), never an OOM kill.
    for args in (["--objects=10000000"], ["--objects=2", "--clusters=1", "--coords=2147483648"],
                 ["--objects=100000", "--clusters=60000", "--coords=200"]):
        p = subprocess.run([KMEANS, "--impl=seq", *args], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, KMEANS_HOST_MEMORY="100000000"))
        lines = p.stderr.strip().splitlines()
        expect(p.returncode == 1 and len(lines) == 1 and "of host memory but" in lines[0],
               f"{args} on a 100 MB machine: {p.returncode} {p.stderr!r}")
    p = run("--generator=blobs", "--objects=10", "--clusters=2000000000", check=False)
    expect(p.returncode == 2 and "--clusters" in p.stderr, f"K > N checked before the blobs: {p.stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "x.csv")
        with open(data, "w") as f:
            f.write("1,2\n3,4\n5,6\n")
        p = run(f"--input={data}", "--clusters=2", f"--output={data}", check=False)
        expect(p.returncode == 2 and open(data).read() == "1,2\n3,4\n5,6\n", "--output naming the input: refused")


def test_init_predict_ninit_npy():
    with tempfile.TemporaryDirectory() as tmp:
        fit = os.path.join(tmp, "fit.npy")
        r = json.loads(run("--impl=omp", "--objects=4000", "--clusters=6", f"--output={fit}", "--report=json",
                           "--quiet").stdout)
        import_ok = True
        try:
            import numpy as np
        except ImportError:
            import_ok = False
        if import_ok:
            c, lab = np.load(fit), np.load(os.path.join(tmp, "fit.labels.npy"))
            expect(c.shape == (6, 16) and c.dtype == np.float64 and lab.shape == (4000,) and lab.dtype == np.int32,
                   f".npy outputs: {c.shape} {c.dtype} {lab.shape} {lab.dtype}")
        # --predict with a fit's own centroids reproduces its labels' inertia, without iterating.
        p = json.loads(run("--impl=seq", "--objects=4000", f"--predict={fit}", "--report=json", "--quiet").stdout)
        expect(p["iterations"] == 0 and p["init"] == "predict" and p["clusters"] == 6, f"predict report: {p}")
        expect(abs(p["inertia"] - r["inertia"]) <= 1e-12 * r["inertia"], f"predict inertia {p['inertia']} vs {r['inertia']}")
        # --init=PATH continues from those centroids: K comes from the file, the inertia never rises.
        c = json.loads(run("--impl=omp", "--objects=4000", f"--init={fit}", "--report=json", "--quiet").stdout)
        expect(c["clusters"] == 6 and c["inertia"] <= r["inertia"] * (1 + 1e-12), f"--init=PATH: {c['inertia']}")
        # Per-iteration inertia never rises (Lloyd) and the JSON, CSV and table carry it.
        its = [it["inertia"] for it in c["per_iteration"]]
        expect(all(b <= a * (1 + 1e-12) for a, b in zip(its, its[1:])), f"per-iteration inertia rises: {its}")
        csv_text = run("--impl=omp", "--objects=4000", f"--init={fit}", "--report=csv", "--quiet").stdout
        expect("inertia_iteration" in csv_text.splitlines()[0], "CSV has the per-iteration inertia")
        # --n-init keeps the lowest of the runs' inertias and lists them all.
        n = json.loads(run("--impl=omp", "--objects=4000", "--clusters=6", "--init=kmeans++", "--n-init=3",
                           "--report=json", "--quiet").stdout)
        expect(len(n["n_init_inertia"]) == 3 and n["inertia"] == min(n["n_init_inertia"]), f"--n-init: {n}")
        one = json.loads(run("--impl=omp", "--objects=4000", "--clusters=6", "--init=kmeans++", "--report=json",
                             "--quiet").stdout)
        expect(one["inertia"] == n["n_init_inertia"][0], "the first of --n-init runs is the --n-init=1 run")
        # k-means||: seeded, named in the report, its options checked.
        par = [json.loads(run("--impl=omp", "--objects=4000", "--clusters=20", f"--init={name}", "--report=json",
                              "--quiet").stdout) for name in ("kmeans||", "kmeans-parallel")]
        expect(par[0]["init"] == "kmeans||" and par[0]["inertia"] == par[1]["inertia"],
               f"--init=kmeans||: {par[0].get('init')} {par[0]['inertia']} {par[1]['inertia']}")
        # Bad inputs: one line, exit 2 (options) or 1 (files).
        wrong = os.path.join(tmp, "wrong.csv")
        with open(wrong, "w") as f:
            f.write("1,2,3\n4,5,6\n")
        empty = os.path.join(tmp, "empty.csv")
        open(empty, "w").close()
        for args, code, needle in [(["--n-init=0"], 2, "--n-init"), (["--n-init=2"], 2, "--init=random"),
                                   ([f"--init={wrong}", "--coords=16"], 2, "coordinates"),
                                   ([f"--predict={wrong}", "--coords=16"], 2, "coordinates"),
                                   ([f"--init={fit}", "--clusters=5"], 2, "--clusters=5"),
                                   ([f"--predict={empty}"], 1, "empty"), ([f"--predict={fit}", "--n-init=2"], 2, "--n-init"),
                                   (["--predict="], 2, "--predict"), (["--init=magic"], 2, "--init"),
                                   (["--init=kmeans||", "--oversampling=0"], 2, "--oversampling"),
                                   (["--init=kmeans||", "--init-rounds=0"], 2, "--init-rounds"),
                                   (["--oversampling=2"], 2, "--init=kmeans||")]:
            p = run("--impl=seq", "--objects=1000", *args, check=False)
            lines = p.stderr.strip().splitlines()
            expect(p.returncode == code and len(lines) == 1 and needle in lines[0], f"{args}: {p.returncode} {p.stderr!r}")


def test_hdf5_values_outside_the_file():
    """External raw files (a short one read as zeros, a FIFO blocked the run) and virtual datasets
    keep their values outside the checks on the input file: one line, exit 1."""
    try:
        import h5py
        import numpy as np
    except ImportError:
        print("skip: no h5py")
        return
    with tempfile.TemporaryDirectory() as tmp:
        x = np.random.default_rng(1).random((100, 4))
        with open(os.path.join(tmp, "raw.bin"), "wb") as f:
            f.write(x[:10].tobytes())
        os.mkfifo(os.path.join(tmp, "fifo"))
        for name, raw in (("short", "raw.bin"), ("fifo", "fifo")):
            with h5py.File(os.path.join(tmp, f"{name}.h5"), "w") as f:
                f.create_dataset("data", shape=(100, 4), dtype="<f8",
                                 external=[(os.path.join(tmp, raw), 0, h5py.h5f.UNLIMITED)])
        with h5py.File(os.path.join(tmp, "src.h5"), "w") as f:
            f["data"] = x
        layout = h5py.VirtualLayout(shape=(100, 4), dtype="<f8")
        layout[:] = h5py.VirtualSource(os.path.join(tmp, "src.h5"), "data", shape=(100, 4))
        with h5py.File(os.path.join(tmp, "virtual.h5"), "w") as f:
            f.create_virtual_dataset("data", layout)
        for name, needle in (("short", "external files"), ("fifo", "external files"), ("virtual", "virtual dataset")):
            p = run(f"--input={os.path.join(tmp, name + '.h5')}", "--impl=seq", "--clusters=3", check=False)
            lines = p.stderr.strip().splitlines()
            expect(p.returncode == 1 and len(lines) == 1 and needle in lines[0], f"{name}.h5: {p.returncode} {p.stderr!r}")


def test_damaged_hdf5():
    # Files found by the fuzzer: one on which HDF5 1.10 itself segfaults, one whose metadata
    # makes it allocate without bound (24 GB and an OOM kill before the cap), one on which it
    # corrupts the heap and glibc aborts, one more on which it segfaults in H5F__accum_read (found
    # by the test suite's own smoke fuzzing): one line, exit 1.
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    for name in ("hdf5-library-segv.h5", "hdf5-unbounded-metadata.h5", "hdf5-heap-corruption.h5",
                 "hdf5-accum-read-segv.h5"):
        p = run(f"--input={os.path.join(here, name)}", "--impl=seq", check=False)
        lines = p.stderr.strip().splitlines()
        expect(p.returncode == 1 and len(lines) == 1 and lines[0].startswith("kmeans: error:"),
               f"damaged HDF5 {name}: {p.returncode} {p.stderr!r}")


def test_outputs_refused_and_values_named():
    def one_error(args, code, needles, **kw):
        p = subprocess.run([KMEANS, *args], capture_output=True, text=True, timeout=120, **kw)
        lines = p.stderr.strip().splitlines()
        tag = " ".join(args)
        expect(p.returncode == code, f"{tag}: exit {code}, got {p.returncode} {p.stderr!r}")
        expect(len(lines) == 1 and lines[0].startswith("kmeans: error:") and all(n in lines[0] for n in needles),
               f"{tag}: one line naming {needles}, got {p.stderr!r}")
        expect(p.stdout == "", f"{tag}: nothing on stdout")

    # An option with nothing after '=' names itself; it never takes the next argument.
    one_error(["--input=", "--clusters=1"], 2, ["--input: empty value"])
    one_error(["--objects=100", "--output=", "--quiet"], 2, ["--output: empty value"])
    # Values out of range are named as given, with exit 2.
    one_error(["--size=1e300"], 2, ["--size=1e300", "too large"])
    one_error(["--objects=10", "--coords=2147483649"], 2, ["--coords=2147483649", "too large"])
    one_error(["--objects=100", "--init=kmeans||", "--oversampling=1000001"], 2, ["--oversampling=1000001"])
    with tempfile.TemporaryDirectory() as tmp:
        # Centroids beyond float's range are refused for a float run, as data would be.
        big = os.path.join(tmp, "big.csv")
        with open(big, "w") as f:
            f.write("1e39,0\n0,1\n")
        for option in ("--predict", "--init"):
            one_error([f"{option}={big}", "--objects=50", "--coords=2", "--precision=float"], 1, ["big.csv", "float"])
            p = run(f"{option}={big}", "--objects=50", "--coords=2", "--precision=double", "--quiet", check=False)
            expect(p.returncode == 0, f"{option} 1e39 in double runs: {p.stderr!r}")
        # No output may replace a file the run reads: --predict and --init too, by any name.
        model = os.path.join(tmp, "model.h5")
        run("--objects=200", "--coords=2", "--clusters=3", f"--output={model}", "--quiet")
        before = open(model, "rb").read()
        for option in ("--predict", "--init"):
            for out in (model, os.path.join(tmp, ".", "model.h5")):
                one_error([f"{option}={model}", "--objects=200", "--coords=2", f"--output={out}"], 2,
                          ["would overwrite", option])
        expect(open(model, "rb").read() == before, "the centroids file is left as it was")
        # Either file of a pair existing as a directory: refused before the run, naming it.
        lab = os.path.join(tmp, "lab")
        os.makedirs(os.path.join(lab, "r.labels.csv"))
        one_error(["--objects=100", f"--output={os.path.join(lab, 'r.csv')}"], 2, ["r.labels.csv", "not a regular"])
        expect(os.path.isdir(os.path.join(lab, "r.labels.csv")) and os.listdir(lab) == ["r.labels.csv"],
               "the directory stays, nothing is written beside it")
        # Past the file-size limit: one line, exit 1, no temporaries, no output (not SIGXFSZ).
        for name, words in (("fsize.csv", ["fsize", "too large"]),
                            ("fsize.h5", ["'" + os.path.join(tmp, "fsize.h5") + "': failed to write", "too large"])):
            one_error(["--objects=20000", "--clusters=2", f"--output={os.path.join(tmp, name)}", "--quiet"], 1, words,
                      preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)))
        expect(not [n for n in os.listdir(tmp) if n.startswith(("fsize", ".fsize"))], "nothing left by the fsize run")
def peak_rss(args, env=None):
    """(exit code, peak resident bytes) of one kmeans run, from the child's own rusage."""
    p = subprocess.Popen([KMEANS, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage.ru_maxrss * 1024


def estimate(args):
    """The bytes the run check says a run needs beside the data: refused on a budget of 1 byte
    (data below 64 MiB passes the loader's check unread)."""
    p = subprocess.run([KMEANS, *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, KMEANS_HOST_MEMORY="1"))
    lines = p.stderr.strip().splitlines()
    m = re.search(r"needs ([0-9.]+) (GiB|MiB) of host memory but", lines[0]) if len(lines) == 1 else None
    if p.returncode != 1 or not m:
        raise AssertionError(f"{args} on a 1-byte budget: {p.returncode} {p.stderr!r}")
    return float(m.group(1)) * (1 << (30 if m.group(2) == "GiB" else 20))


def test_host_memory_estimate():
    # The run check counts what each implementation allocates (omp: the centroids' padded
    # [d][K] copy, and per thread its sums; --threads=0: every core's): at least the peak
    # resident memory measured beside a tiny run's, and less than 3 times it plus 64 MiB.
    _, base = peak_rss(["--impl=seq", "--objects=2", "--coords=1", "--clusters=1", "--quiet"])
    shapes = [("seq", "float", 2, 6000000, 2, None), ("seq", "double", 2, 3000000, 2, None),
              ("omp", "float", 2, 6000000, 2, 1), ("omp", "float", 2, 6000000, 2, 0),
              ("omp", "float", 2, 6000000, 2, 4), ("omp", "double", 200, 20000, 200, 2),
              ("seq", "float", 200, 40000, 200, None)]
    for impl, precision, n, d, k, threads in shapes:
        args = [f"--impl={impl}", f"--precision={precision}", f"--objects={n}", f"--coords={d}", f"--clusters={k}",
                "--loops=2", "--quiet"] + ([f"--threads={threads}"] if threads is not None else [])
        data = n * d * (4 if precision == "float" else 8)
        est = data + estimate(args)
        code, peak = peak_rss(args)
        used = peak - base
        tag = f"{impl}/{precision} {n}x{d} K={k} threads={threads}"
        print(f"  {tag}: estimate {est / 2**20:.0f} MiB, measured {used / 2**20:.0f} MiB")
        expect(code == 0, f"{tag}: exit {code}")
        expect(est >= used, f"{tag}: estimate {est / 2**20:.0f} MiB below the measured {used / 2**20:.0f} MiB")
        expect(est < 3 * used + 64 * 2**20, f"{tag}: estimate {est / 2**20:.0f} MiB far above {used / 2**20:.0f} MiB")
    # The shape, scaled down: omp on every core at K = 2 needs about 2.7 GB beside 160 MB
    # of data; on a 1.5 GB budget it is refused in one line, not run.
    p = subprocess.run([KMEANS, "--impl=omp", "--precision=float", "--objects=2", "--coords=20000000",
                        "--clusters=2", "--threads=0"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, KMEANS_HOST_MEMORY="1500000000"))
    lines = p.stderr.strip().splitlines()
    expect(p.returncode == 1 and len(lines) == 1 and "--impl=omp" in lines[0] and "of host memory but" in lines[0],
           f"omp at K=2 x d=2e7 on a 1.5 GB budget: {p.returncode} {p.stderr!r}")


def test_cpu_run_in_small_address_space():
    # cuBLAS is opened at its first call, not by the loader: libcublasLt alone maps about 540 MB,
    # and under an address-space limit below that every run (CPU ones too) failed before main.
    import resource
    limit = 400 * 2**20

    def small():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    p = subprocess.run([KMEANS, "--impl=seq", "--objects=1000", "--report=json", "--quiet"], capture_output=True,
                       text=True, timeout=60, preexec_fn=small, env=dict(os.environ, OMP_NUM_THREADS="2"))
    expect(p.returncode == 0 and json.loads(p.stdout or "{}").get("objects") == 1000,
           f"--impl=seq under a 400 MiB address space: {p.returncode} {p.stderr!r}")


def spherical_reference(x, k, loops, metric):
    """Spherical k-means (cosine) or unit-centroid dot k-means in NumPy, first-K init, the lab's
    stop rule (no object changed): (labels, centroids, objective, iterations)."""
    import numpy as np
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)
    data = unit(x) if metric == "cosine" else x
    c = unit(data[:k].copy())
    labels = np.full(len(x), -1)
    it = 0
    for it in range(1, loops + 1):
        new = np.argmax(data @ c.T, axis=1)
        changed = np.count_nonzero(new != labels)
        labels = new
        for j in range(k):
            members = data[labels == j]
            if len(members):
                c[j] = unit(members.mean(axis=0, keepdims=True))[0]
        if changed == 0:
            break
    labels = np.argmax(data @ c.T, axis=1)
    sims = np.einsum("ij,ij->i", data, c[labels])
    return labels, c, (np.sum(1 - sims) if metric == "cosine" else -np.sum(sims)), it


def test_metrics():
    try:
        import numpy as np
    except ImportError:
        print("skip: no numpy")
        return
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(12)
        x = rng.standard_normal((3000, 8)) + rng.integers(0, 3, (3000, 1)) * 0.7
        path = os.path.join(tmp, "x.npy")
        np.save(path, x)
        for metric in ("cosine", "dot"):
            for impl in ("seq", "omp"):
                out = os.path.join(tmp, f"{metric}-{impl}.npy")
                r = json.loads(run(f"--impl={impl}", f"--input={path}", "--clusters=7", "--loops=40",
                                   f"--metric={metric}", f"--output={out}", "--report=json", "--quiet").stdout)
                labels, c, objective, iterations = spherical_reference(x, 7, 40, metric)
                got_c, got_labels = np.load(out), np.load(out[:-4] + ".labels.npy")
                what = f"--metric={metric} --impl={impl}"
                expect(r["metric"] == metric, f"{what}: the report names the metric: {r.get('metric')}")
                expect(np.array_equal(got_labels, labels), f"{what}: labels are NumPy's "
                       f"({np.count_nonzero(got_labels != labels)} differ)")
                expect(np.allclose(got_c, c, rtol=0, atol=1e-12), f"{what}: centroids {np.abs(got_c - c).max()}")
                expect(abs(r["inertia"] - objective) <= 1e-9 * abs(objective), f"{what}: {r['inertia']} vs {objective}")
                expect(r["iterations"] == iterations, f"{what}: iterations {r['iterations']} vs {iterations}")
                # --predict with the fit's centroids: the fit's labels again.
                again = os.path.join(tmp, f"{metric}-{impl}-again.npy")
                p = json.loads(run(f"--impl={impl}", f"--input={path}", f"--predict={out}", f"--metric={metric}",
                                   f"--output={again}", "--report=json", "--quiet").stdout)
                expect(np.array_equal(np.load(again[:-4] + ".labels.npy"), got_labels) and p["inertia"] == r["inertia"],
                       f"{what}: --predict with the fit's centroids gives its labels and inertia")
        zero = os.path.join(tmp, "zero.npy")
        x[2] = 0
        np.save(zero, x)
        for args, code, needle in [(["--metric=manhattan"], 2, "--metric"),
                                   ([f"--input={zero}", "--metric=dot", "--clusters=4"], 1, "length 0")]:
            p = run("--impl=seq", "--objects=1000", *args, check=False) if "--input" not in args[0] else \
                run("--impl=seq", *args, check=False)
            lines = p.stderr.strip().splitlines()
            expect(p.returncode == code and len(lines) == 1 and needle in lines[0], f"{args}: {p.returncode} {p.stderr!r}")


def test_edges_of_the_arithmetic():
    """Values cosine normalises away are predicted as they are fitted; a double beyond float's range
    read as float is named as such; a bad KMEANS_HOST_MEMORY is refused however small the run."""
    try:
        import numpy as np
    except ImportError:
        print("skip: no numpy")
        return
    with tempfile.TemporaryDirectory() as tmp:
        x = np.random.default_rng(0).standard_normal((200, 3))
        x[:50] *= 1e200
        x[50:100] *= 1e-200
        path, out, again = (os.path.join(tmp, f) for f in ("x.npy", "c.npy", "again.npy"))
        np.save(path, x)
        run("--impl=omp", f"--input={path}", "--clusters=4", "--metric=cosine", f"--output={out}", "--quiet")
        p = run("--impl=omp", f"--input={path}", f"--predict={out}", "--metric=cosine", f"--output={again}",
                "--quiet", check=False)
        same = p.returncode == 0 and np.array_equal(np.load(again[:-4] + ".labels.npy"),
                                                    np.load(out[:-4] + ".labels.npy"))
        expect(same, f"cosine --predict on rows of length 1e200 and 1e-200: the fit's labels: {p.stderr!r}")
        x = np.random.default_rng(0).random((100, 3))
        x[7, 1] = 1e39
        np.save(path, x)
        p = run("--impl=omp", f"--input={path}", "--clusters=3", "--precision=float", check=False)
        lines = p.stderr.strip().splitlines()
        expect(p.returncode == 1 and len(lines) == 1 and "beyond float's range at object 7, coordinate 1" in lines[0]
               and "--precision=double" in lines[0], f"1e39 read as float: {p.stderr!r}")
    p = subprocess.run([KMEANS, "--impl=omp", "--objects=100", "--clusters=3"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, KMEANS_HOST_MEMORY="abc"))
    lines = p.stderr.strip().splitlines()
    expect(p.returncode == 2 and len(lines) == 1 and "KMEANS_HOST_MEMORY=abc" in lines[0],
           f"KMEANS_HOST_MEMORY=abc on a small run: {p.returncode} {p.stderr!r}")


def test_batch_input():
    """A 3-D .npy is B problems: each problem's centroids, labels and inertia are those of its rows
    fitted alone, byte for byte."""
    try:
        import numpy as np
    except ImportError:
        print("skip: no numpy")
        return
    with tempfile.TemporaryDirectory() as tmp:
        x = np.random.default_rng(3).standard_normal((3, 2000, 5)).astype(np.float32)
        batch = os.path.join(tmp, "batch.npy")
        np.save(batch, x)
        common = ["--impl=omp", "--clusters=4", "--init=kmeans++", "--seed=2", "--loops=20", "--report=json",
                  "--quiet", "--metric=cosine"]
        out = os.path.join(tmp, "out.npy")
        j = json.loads(run(f"--input={batch}", f"--output={out}", *common).stdout)
        c, lab = np.load(out), np.load(out[:-4] + ".labels.npy")
        expect(j["batch"] == 3 and len(j["problems"]) == 3 and c.shape == (3, 4, 5) and lab.shape == (3, 2000),
               f"batch report and outputs: {j.get('batch')} {c.shape} {lab.shape}")
        for b in range(3):
            one = os.path.join(tmp, f"one{b}.npy")
            np.save(one, x[b])
            alone = os.path.join(tmp, f"alone{b}.npy")
            r = json.loads(run(f"--input={one}", f"--output={alone}", *common).stdout)
            same = (r["inertia"] == j["problems"][b]["inertia"] and np.array_equal(np.load(alone), c[b])
                    and np.array_equal(np.load(alone[:-4] + ".labels.npy"), lab[b])
                    and r["iterations"] == j["problems"][b]["iterations"])
            expect(same, f"batch problem {b} equals its rows fitted alone")
        for args, needle in [(["--report=csv"], "--report=csv"), ([f"--output={os.path.join(tmp, 'o.csv')}"], ".npy")]:
            p = run("--impl=omp", f"--input={batch}", "--clusters=4", *args, check=False)
            lines = p.stderr.strip().splitlines()
            expect(p.returncode == 2 and len(lines) == 1 and needle in lines[0], f"batch {args}: {p.stderr!r}")
        p = run("--impl=omp", f"--objects=100", f"--init={batch}", "--clusters=4", check=False)
        expect(p.returncode != 0 and "3-D" in p.stderr, f"a 3-D --init file is refused: {p.stderr!r}")
        for name, array, needle in [("four.npy", x.reshape(3, 2, 1000, 5), "or a 3-D (problems, objects, coords)"),
                                    ("objects.npy", np.array([[1, "a"]], dtype=object), "holds Python objects")]:
            np.save(os.path.join(tmp, name), array)
            p = run("--impl=omp", f"--input={os.path.join(tmp, name)}", "--clusters=1", check=False)
            expect(p.returncode != 0 and needle in p.stderr, f"{name}: {p.stderr!r}")
        bad = x.copy()
        bad[1, 3, 2] = np.nan
        np.save(os.path.join(tmp, "nan.npy"), bad)
        p = run("--impl=omp", f"--input={os.path.join(tmp, 'nan.npy')}", "--clusters=4", check=False)
        expect(p.returncode != 0 and "NaN at problem 1, object 3, coordinate 2" in p.stderr,
               f"a NaN is named by its problem: {p.stderr!r}")
        test_batch_hdf5(np, x, j, common, tmp)


def test_batch_hdf5(np, x, want, common, tmp):
    """A 3-D HDF5 dataset is a batch as a 3-D .npy is: the same report, bit for bit (float32; float16
    chunked and compressed against its .npy); the only 3-D dataset taken where no 2-D one is, a
    name asked for where several are, and refused as --predict's data."""
    try:
        import h5py
    except ImportError:
        print("skip: no h5py")
        return
    path = os.path.join(tmp, "batch.h5")
    with h5py.File(path, "w") as f:
        f["X"] = x
    got = json.loads(run(f"--input={path}", *common).stdout)
    print("  3-D HDF5: problems", [p["iterations"] for p in got["problems"]])
    expect(got["batch"] == 3 and [p["inertia"] for p in got["problems"]] == [p["inertia"] for p in want["problems"]]
           and [p["iterations"] for p in got["problems"]] == [p["iterations"] for p in want["problems"]],
           "a 3-D HDF5 dataset fits as the same 3-D .npy")
    half = x.astype(np.float16)
    np.save(os.path.join(tmp, "half.npy"), half)
    with h5py.File(os.path.join(tmp, "half.h5"), "w") as f:
        f.create_dataset("X", data=half, chunks=(1, 300, 5), compression="gzip")
    a = json.loads(run(f"--input={os.path.join(tmp, 'half.h5')}", *common).stdout)
    b = json.loads(run(f"--input={os.path.join(tmp, 'half.npy')}", *common).stdout)
    expect([p["inertia"] for p in a["problems"]] == [p["inertia"] for p in b["problems"]] and a["batch"] == 3,
           "a chunked, compressed float16 3-D HDF5 dataset fits as its .npy")
    with h5py.File(os.path.join(tmp, "two.h5"), "w") as f:
        f["X"], f["Y"] = x, x
    p = run(f"--input={os.path.join(tmp, 'two.h5')}", *common, check=False)
    lines = p.stderr.strip().splitlines()
    expect(p.returncode != 0 and len(lines) == 1 and "name one with --dataset" in lines[0], f"two 3-D: {p.stderr!r}")
    named = json.loads(run(f"--input={os.path.join(tmp, 'two.h5')}", "--dataset=Y", *common).stdout)
    expect([q["inertia"] for q in named["problems"]] == [q["inertia"] for q in want["problems"]], "--dataset=Y")
    p = run("--impl=omp", f"--predict={path}", "--objects=100", "--coords=5", "--clusters=4", check=False)
    expect(p.returncode != 0 and "3-D" in p.stderr, f"3-D HDF5 centroids refused: {p.stderr!r}")


def test_weights():
    """--weights: weighted means (NumPy's weighted Lloyd), the forms of the file, and every bad one."""
    try:
        import numpy as np
    except ImportError:
        print("skip: no numpy")
        return
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(4)
        x = rng.standard_normal((2000, 3)) + rng.integers(0, 4, (2000, 1)) * 3.0
        w = rng.random(2000) * 2
        w[::9] = 0
        path, wpath, out = (os.path.join(tmp, f) for f in ("x.npy", "w.npy", "o.npy"))
        np.save(path, x)
        np.save(wpath, w)
        c = x[:4].copy()  # NumPy's weighted Lloyd from the first 4 objects
        for iterations in range(1, 101):
            labels = np.argmin(((x[:, None, :] - c[None]) ** 2).sum(-1), axis=1)
            new = np.array([np.average(x[labels == j], axis=0, weights=w[labels == j]) for j in range(4)])
            if np.array_equal(new, c):
                break
            c = new
        for impl in ("seq", "omp"):
            r = json.loads(run(f"--impl={impl}", f"--input={path}", f"--weights={wpath}", "--clusters=4", "--loops=100",
                               f"--output={out}", "--report=json", "--quiet").stdout)
            got = np.load(out)
            expect(r["sample_weights"] is True, f"{impl}: the report says the fit was weighted")
            expect(np.allclose(got, c, rtol=0, atol=1e-12), f"{impl}: weighted centroids {np.abs(got - c).max()}")
        # One column of text, and a (N, 1) array, read as the 1-D .npy is.
        text, column = os.path.join(tmp, "w.txt"), os.path.join(tmp, "w2.npy")
        np.savetxt(text, w, fmt="%.17g")
        np.save(column, w[:, None])
        want = json.loads(run("--impl=omp", f"--input={path}", f"--weights={wpath}", "--clusters=4", "--report=json",
                              "--quiet").stdout)["inertia"]
        for other in (text, column):
            got = json.loads(run("--impl=omp", f"--input={path}", f"--weights={other}", "--clusters=4",
                                 "--report=json", "--quiet").stdout)["inertia"]
            expect(got == want, f"--weights={os.path.basename(other)}: {got} vs {want}")
        bad = {"short.npy": w[:-1], "wide.npy": np.ones((2000, 2)), "neg.npy": np.r_[w[:-1], -2.0],
               "zeros.npy": np.zeros(2000)}
        for name, values in bad.items():
            np.save(os.path.join(tmp, name), values)
        cases = [(["--weights=" + os.path.join(tmp, "short.npy")], 1, "holds 1999 weights for 2000 objects"),
                 (["--weights=" + os.path.join(tmp, "wide.npy")], 1, "2 values per row"),
                 (["--weights=" + os.path.join(tmp, "neg.npy")], 1, "sample weight 1999 is -2"),
                 (["--weights=" + os.path.join(tmp, "zeros.npy")], 1, "the sample weights are all 0"),
                 (["--weights=" + os.path.join(tmp, "none.npy")], 1, "none.npy"),
                 ([f"--weights={wpath}", f"--output={wpath}"], 2, "--output")]
        for args, code, needle in cases:
            p = run("--impl=omp", f"--input={path}", "--clusters=4", *args, check=False)
            lines = p.stderr.strip().splitlines()
            expect(p.returncode == code and len(lines) == 1 and needle in lines[0],
                   f"{args}: {p.returncode} {p.stderr!r}")
        expect(np.array_equal(np.load(wpath), w), "the --weights file is left as it was")


def test_gpu_impl_without_gpu():
    gpu_impls = [e["name"] for e in json.loads(run("--list").stdout) if e["where"] == "gpu"]
    has_gpu = subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode == 0
    if not gpu_impls or has_gpu:
        print("skip: no GPU implementation registered, or a GPU is present")
        return
    for impl in gpu_impls:
        p = run(f"--impl={impl}", "--objects=100", check=False)
        expect(p.returncode == 2 and "needs a CUDA GPU" in p.stderr, f"{impl} without a GPU: clear error")
    p = run("--impl=omp", "--objects=100", "--on-device", check=False)
    lines = p.stderr.strip().splitlines()
    expect(p.returncode == 2 and len(lines) == 1 and "--on-device needs a CUDA GPU" in lines[0],
           f"--on-device without a GPU: one line: {p.stderr!r}")


for test in [test_json_contract, test_seq_and_omp_agree, test_csv_and_table_reports, test_outputs_and_inputs,
             test_help_and_list, test_progress_on_a_terminal, test_progress_nowhere_else, test_bad_inputs,
             test_strict_options, test_init_predict_ninit_npy,
             test_damaged_hdf5, test_hdf5_values_outside_the_file, test_outputs_refused_and_values_named,
             test_gpu_impl_without_gpu,
             test_host_memory_estimate, test_cpu_run_in_small_address_space, test_metrics, test_edges_of_the_arithmetic,
             test_batch_input, test_weights]:
    print("run:", test.__name__)
    test()
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
