#!/usr/bin/env python3
"""`mpirun -np R kmeans --impl=omp` against one process, bit for bit: the same centroids and
labels (the --output files compare equal byte for byte), inertia, iterations, and per-iteration
change counts, inertia and shift, for every initialisation, both precisions, generated and file
data, R = 2 and 3 (R = 3 splits 100,003 rows into 2, 2 and 3 chunks of 16,384), and one process
of 2 threads against 2 ranks of 1 thread. Then the errors: one line each, no hang.
Skipped (77) when mpirun is missing or cannot start two processes here, or when kmeans was built
without MPI (it then reports ranks = 1). Usage: mpi_test.py path/to/kmeans"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

KMEANS = sys.argv[1]
failures = []
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")


def mpirun(np):
    return ["mpirun", "-np", str(np), "--oversubscribe"] if np > 1 else []


def run(np, *args, timeout=180):
    return subprocess.run([*mpirun(np), KMEANS, *args], capture_output=True, text=True, timeout=timeout, env=ENV)


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def skip_unless_mpi():
    if shutil.which("mpirun") is None:
        print("SKIP: no mpirun (install openmpi-bin)")
        sys.exit(77)
    p = run(2, "--impl=omp", "--objects=1000", "--coords=2", "--clusters=2", "--loops=1", "--report=json", "--quiet",
            timeout=120)
    if p.returncode != 0:
        print(f"SKIP: mpirun cannot start two processes here: {p.stderr.strip()[-300:]}")
        sys.exit(77)
    if json.loads(p.stdout.splitlines()[0])["ranks"] != 2:
        print("SKIP: kmeans was built without MPI (each process ran alone)")
        sys.exit(77)


def same_run(tag, data_args, extra, tmp, ext="csv", impl="omp", runs=((1, 1), (1, 2), (2, 1), (3, 1))):
    results = {}
    for np, threads in runs:
        out = os.path.join(tmp, f"{tag}-{np}-{threads}.{ext}")
        p = run(np, f"--impl={impl}", *data_args, *extra, f"--threads={threads}", "--report=json", "--quiet",
                f"--output={out}")
        if p.returncode != 0:
            expect(False, f"{tag} np={np}: exit {p.returncode}: {p.stderr.strip()}")
            return
        expect(p.stderr == "", f"{tag} np={np}: stderr empty, got {p.stderr!r}")
        lines = p.stdout.splitlines()
        expect(len(lines) == 1, f"{tag} np={np}: one report (rank 0's), got {len(lines)} lines")
        r = json.loads(lines[0])
        expect(r["ranks"] == np, f"{tag} np={np}: the report says {r['ranks']} ranks")
        with open(out, "rb") as f:
            results[(np, threads)] = (r, f.read())
    one, one_file = results[(1, 1)]
    for key, (r, file_bytes) in results.items():
        if key == (1, 1):
            continue
        what = f"{tag} np={key[0]} threads={key[1]}"
        expect(file_bytes == one_file, f"{what}: centroids and labels are one process's, byte for byte")
        expect(r["objects"] == one["objects"], f"{what}: objects {r['objects']} (all ranks')")
        expect(r["inertia"] == one["inertia"], f"{what}: inertia {r['inertia']!r} vs {one['inertia']!r}")
        expect(r["iterations"] == one["iterations"], f"{what}: iterations")
        for i, (a, b) in enumerate(zip(r["per_iteration"], one["per_iteration"])):
            for key2 in ("changed", "inertia", "shift"):
                expect(a[key2] == b[key2], f"{what}: iteration {i + 1} {key2} {a[key2]!r} vs {b[key2]!r}")
        expect(all("allreduce" in it for it in r["per_iteration"]), f"{what}: the allreduce phase is reported")


def test_equal_bits(tmp):
    gen = ["--objects=100003", "--coords=5", "--clusters=20", "--loops=8", "--seed=3"]
    for init in ("first", "random", "kmeans++"):
        for precision in ("double", "float"):
            same_run(f"{init}-{precision}", gen, [f"--init={init}", f"--precision={precision}"], tmp)
    same_run("blobs", ["--generator=blobs", "--objects=50000", "--coords=3", "--clusters=9", "--loops=10"],
             ["--init=kmeans++", "--n-init=2"], tmp)
    same_run("h5", ["--objects=40000", "--coords=4", "--clusters=6", "--loops=5"], ["--init=kmeans++"], tmp, "h5")
    for metric in ("cosine", "dot"):  # each rank normalises its own rows; the objective from chunk sums
        same_run(f"metric-{metric}", ["--objects=60001", "--coords=6", "--clusters=11", "--loops=6", "--seed=8"],
                 [f"--metric={metric}", "--init=kmeans++"], tmp, runs=((1, 1), (2, 1), (3, 2)))
    # A file read by every rank (each keeps its share).
    data = os.path.join(tmp, "data.bin")
    rnd = random.Random(5)
    with open(data, "wb") as f:
        n, d = 70001, 3
        f.write(struct.pack("<ii", n, d))
        f.write(struct.pack(f"<{n * d}f", *[rnd.random() for _ in range(n * d)]))
    same_run("bin-file", [f"--input={data}", "--clusters=12", "--loops=6"], ["--init=kmeans++"], tmp)
    # Each rank reads only its rows: .npy and .bin by byte offset, .h5 by hyperslab; .csv whole.
    try:
        import numpy as np
    except ImportError:
        print("note: no numpy, the .npy/.h5/.csv inputs are not checked")
        return
    x = np.random.default_rng(7).standard_normal((50021, 4))
    np.save(os.path.join(tmp, "data.npy"), x)
    np.savetxt(os.path.join(tmp, "data.csv"), x[:20011], delimiter=",")
    same_run("npy-file", [f"--input={os.path.join(tmp, 'data.npy')}", "--clusters=9", "--loops=6"],
             ["--init=random", "--seed=2"], tmp)
    same_run("csv-file", [f"--input={os.path.join(tmp, 'data.csv')}", "--clusters=5", "--loops=6"], [], tmp)
    # --weights: each rank reads its rows' weights; with 1,000 objects ranks 1 and 2 hold none.
    w = np.random.default_rng(8).random(len(x)) * 2
    w[::10] = 0
    np.save(os.path.join(tmp, "w.npy"), w)
    same_run("weights", [f"--input={os.path.join(tmp, 'data.npy')}", "--clusters=9", "--loops=6"],
             [f"--weights={os.path.join(tmp, 'w.npy')}", "--init=kmeans++"], tmp)
    np.save(os.path.join(tmp, "small.npy"), x[:1000])
    np.save(os.path.join(tmp, "w-small.npy"), w[:1000])
    same_run("weights-rank-without-rows", [f"--input={os.path.join(tmp, 'small.npy')}", "--clusters=4", "--loops=6"],
             [f"--weights={os.path.join(tmp, 'w-small.npy')}"], tmp)
    try:
        import h5py
        with h5py.File(os.path.join(tmp, "data.h5"), "w") as f:
            f["points"] = x.astype(np.float32)
        same_run("h5-file", [f"--input={os.path.join(tmp, 'data.h5')}", "--clusters=9", "--loops=6"],
                 ["--init=kmeans++", "--precision=float"], tmp)
    except ImportError:
        print("note: no h5py, the .h5 input is not checked")
    # A NaN in the last rank's rows: that rank says where (the whole data's object index), every
    # rank ends, no hang.
    bad = x.copy()
    bad[45000, 2] = np.nan
    np.save(os.path.join(tmp, "bad.npy"), bad)
    p = run(2, "--impl=omp", f"--input={os.path.join(tmp, 'bad.npy')}", "--clusters=3", "--quiet", timeout=120)
    expect(p.returncode != 0 and "object 45000, coordinate 2" in p.stderr,
           f"a NaN on rank 1 is named with its object index: {p.stderr.strip()[:300]!r}")


def gpu_usable():
    p = run(1, "--impl=fused", "--objects=1000", "--coords=2", "--clusters=2", "--loops=1", "--quiet")
    return p.returncode == 0


def test_gpu(tmp):
    """On a machine with GPUs: each rank runs a GPU rung on its GPU, the partials all-reduced by
    NCCL (communicator set up through MPI): the one-process run bit for bit."""
    if not gpu_usable():
        print("note: no usable GPU, the GPU rungs under mpirun are not checked")
        return
    gen = ["--objects=100003", "--loops=6", "--seed=4", "--init=kmeans++"]
    for impl, shape in (("fused", ["--coords=2", "--clusters=16"]), ("fused", ["--coords=16", "--clusters=16"]),
                        ("fused", ["--coords=64", "--clusters=100"]), ("offload-block", ["--coords=8", "--clusters=20"])):
        for precision in ("double", "float"):
            same_run(f"gpu-{impl}-{shape[0][9:]}-{precision}", gen + shape, [f"--precision={precision}"], tmp,
                     impl=impl, runs=((1, 1), (2, 1)))
    same_run("gpu-fused-cosine", gen + ["--coords=16", "--clusters=16"], ["--metric=cosine"], tmp, impl="fused",
             runs=((1, 1), (2, 1)))
    p = run(2, "--impl=fused", "--objects=10000", "--coords=2", "--clusters=3", "--quiet")  # one chunk
    expect(p.returncode != 0 and "without rows" in p.stderr, f"a GPU rank without rows is refused: {p.stderr!r}")


def test_errors():
    # Options are checked alike on every rank: rank 0 says it once, every rank exits.
    p = run(2, "--impl=omp", "--clusters=0", "--objects=100", "--quiet")
    expect(p.returncode != 0, "--clusters=0 under mpirun fails")
    expect(p.stderr.count("kmeans: error:") == 1, f"one error line, got {p.stderr!r}")
    # (naive: runs as one process on a GPU machine, "needs a CUDA GPU" elsewhere)
    for impl, words in (("seq", ["runs as one process"]), ("naive", ["runs as one process", "needs a CUDA GPU"])):
        p = run(2, f"--impl={impl}", "--objects=1000", "--coords=2", "--clusters=3", "--quiet")
        expect(p.returncode != 0 and any(w in p.stderr for w in words), f"--impl={impl} under mpirun refused: {p.stderr!r}")
        expect(p.stderr.count("kmeans: error:") == 1, f"--impl={impl}: one error line, got {p.stderr!r}")
    p = run(2, "--impl=omp", "--objects=5", "--coords=2", "--clusters=9", "--quiet")
    expect(p.returncode != 0 and "clusters" in p.stderr, f"K above the objects of all ranks: {p.stderr!r}")
    # Fewer rows than ranks x 16,384: a rank with no rows still takes part.
    p = run(3, "--impl=omp", "--objects=20000", "--coords=2", "--clusters=3", "--report=json", "--quiet")
    expect(p.returncode == 0, f"a rank without rows: {p.stderr!r}")
    one = run(1, "--impl=omp", "--objects=20000", "--coords=2", "--clusters=3", "--report=json", "--quiet")
    if p.returncode == 0 and one.returncode == 0:
        expect(json.loads(p.stdout)["inertia"] == json.loads(one.stdout)["inertia"], "a rank without rows: same inertia")


def test_answers_and_shared_errors(tmp):
    # --version on every rank: printed once, every rank ends with 0.
    p = run(2, "--version")
    expect(p.returncode == 0 and p.stdout.count("kmeans (kmeans-gpu") == 1, f"--version on 2 ranks: {p.stdout!r}")
    # A value too large for the arithmetic in one rank's rows: the ranks find it together (from
    # the largest over the ranks), so one line says it and they end without MPI_Abort.
    path = os.path.join(tmp, "huge.csv")
    with open(path, "w") as f:
        f.write("\n".join("1e300,0" if i == 30000 else f"{i % 5},{i % 3}" for i in range(40000)) + "\n")
    p = run(3, "--impl=omp", f"--input={path}", "--clusters=3", "--quiet")
    expect(p.returncode == 1 and p.stderr.count("kmeans: error:") == 1 and "too large" in p.stderr
           and "MPI_ABORT" not in p.stderr, f"a range error found by every rank: {p.stderr!r}")
    # Weights too spread for the fixed-point sums (n max w / min w above 2^32), likewise.
    data, weights = os.path.join(tmp, "x.csv"), os.path.join(tmp, "w.csv")
    with open(data, "w") as f:
        f.write("\n".join(f"{i % 5},{i % 3}" for i in range(40000)) + "\n")
    with open(weights, "w") as f:
        f.write("\n".join("1e-6" if i == 30000 else "1" for i in range(40000)) + "\n")
    p = run(2, "--impl=omp", f"--input={data}", f"--weights={weights}", "--clusters=3", "--quiet")
    expect(p.returncode == 1 and p.stderr.count("kmeans: error:") == 1 and "2^32" in p.stderr
           and "MPI_ABORT" not in p.stderr, f"weights too spread, found by every rank: {p.stderr!r}")


def mpmd(first, second, dirs=None, timeout=60):
    """Two ranks started with different command lines (mpirun's MPMD form), or in different
    working directories (dirs), as on two nodes."""
    wd = [["-wdir", d] for d in dirs] if dirs else [[], []]
    kmeans = os.path.abspath(KMEANS)
    cmd = ["mpirun", "--oversubscribe", "-np", "1", *wd[0], kmeans, *first, ":", "-np", "1", *wd[1], kmeans, *second]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)


def test_rank_disagreement(tmp):
    # An error on one rank only, or ranks given different options or data: every rank ends, one
    # line says why, nothing hangs (a timeout here is the failure).
    base = ["--impl=omp", "--objects=20000", "--coords=4", "--clusters=4", "--quiet"]
    cases = [
        ("--clusters=0 on rank 1", base, [*base[:3], "--clusters=0", "--quiet"], "need at least 1 cluster"),
        ("an unknown option on rank 1", base, [*base, "--bogus"], "rank 1"),
        ("--loops differs", [*base, "--loops=5"], [*base, "--loops=10"], "other options than rank 0"),
        ("--tol on rank 1 only", base, [*base, "--tol=1e-3"], "other options than rank 0"),
        ("--init differs", [*base, "--init=random"], [*base, "--init=kmeans++"], "other options than rank 0"),
        ("--precision differs", base, [*base, "--precision=float"], "other options than rank 0"),
        ("--help on rank 1 only", base, [*base, "--help"], "other options than rank 0"),
        ("--version on rank 0 only", [*base, "--version"], base, "other options than rank 0"),
    ]
    for what, first, second, words in cases:
        try:
            p = mpmd(first, second)
        except subprocess.TimeoutExpired:
            expect(False, f"{what}: hung")
            continue
        expect(p.returncode != 0, f"{what}: fails")
        expect(p.stderr.count("kmeans: error:") == 1 and words in p.stderr, f"{what}: one line naming it: {p.stderr!r}")
    # The same command line on two "nodes" (working directories) that differ: the input file
    # there has another shape; the output's directory is missing on one.
    nodes = [os.path.join(tmp, "node0"), os.path.join(tmp, "node1")]
    for node, rows in zip(nodes, (100, 90)):
        os.makedirs(os.path.join(node, "out"), exist_ok=True)
        with open(os.path.join(node, "x.csv"), "w") as f:
            f.write("\n".join(f"{i},{i % 7},{i % 3}" for i in range(rows)) + "\n")
    args = ["--impl=omp", "--input=x.csv", "--clusters=3", "--quiet"]
    p = mpmd(args, args, nodes)
    expect(p.returncode != 0, "different input files: fails")
    expect(p.stderr.count("kmeans: error:") == 1 and "read different data" in p.stderr,
           f"different input files refused: {p.stderr!r}")
    os.rmdir(os.path.join(nodes[1], "out"))
    p = mpmd([*base, "--output=out/o.csv"], [*base, "--output=out/o.csv"], nodes)
    expect(p.returncode != 0 and p.stderr.count("kmeans: error:") == 1 and "rank 1" in p.stderr,
           f"an output directory missing on rank 1's node: {p.stderr!r}")


def main():
    skip_unless_mpi()
    with tempfile.TemporaryDirectory() as tmp:
        test_equal_bits(tmp)
        test_gpu(tmp)
        test_rank_disagreement(tmp)
        test_answers_and_shared_errors(tmp)
    test_errors()
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all MPI tests passed")


if __name__ == "__main__":
    main()
