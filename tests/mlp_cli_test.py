#!/usr/bin/env python3
"""mlp end to end: reports, --dump-init, and one-line errors for bad data and options.
Usage: mlp_cli_test.py path/to/mlp"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

MLP = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    return subprocess.run([MLP, "--quiet", *args], capture_output=True, text=True, timeout=300)


def idx(magic, dims, payload):
    head = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in dims)
    return head + bytes(payload)


def write_set(folder, prefix, n, labels=None, gz=True, magic=0x803):
    rng = np.random.default_rng(len(prefix) + n)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8) if labels is None else np.asarray(labels, dtype=np.uint8)
    for name, data in ((f"{prefix}-images-idx3-ubyte", idx(magic, (n, 28, 28), images.tobytes())),
                       (f"{prefix}-labels-idx1-ubyte", idx(0x801, (len(labels),), labels.tobytes()))):
        for stale in (name, name + ".gz"):
            if os.path.exists(os.path.join(folder, stale)):
                os.remove(os.path.join(folder, stale))
        if gz:
            with gzip.open(os.path.join(folder, name + ".gz"), "wb") as f:
                f.write(data)
        else:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)


def one_line_error(r, code, needle, what):
    lines = r.stderr.strip().splitlines()
    check(r.returncode == code, f"{what}: exit {r.returncode}, want {code} ({r.stderr.strip()})")
    check(len(lines) == 1 and lines[0].startswith("mlp: error: ") and needle in lines[0],
          f"{what}: stderr {r.stderr!r} should be one line with {needle!r}")


v = run("--version")
check(v.returncode == 0 and v.stdout.startswith("mlp (kmeans-gpu ") and v.stdout.count("\n") == 1,
      f"--version: {v.returncode} {v.stdout!r}")

with tempfile.TemporaryDirectory() as d:
    write_set(d, "train", 300)
    write_set(d, "t10k", 100, gz=False)
    common = [f"--data={d}", "--hidden=32,16", "--batch=50", "--epochs=2"]

    r = run(*common, "--kernel=cpu-blas", "--report=json")
    check(r.returncode == 0, f"json run: {r.stderr}")
    if r.returncode == 0:
        j = json.loads(r.stdout)
        check(j["layers"] == [784, 32, 16, 10] and j["kernel"] == "cpu-blas" and j["device"] == "cpu", str(j)[:200])
        check(len(j["epochs"]) == 2 and all(0 <= e["test_accuracy"] <= 1 for e in j["epochs"]), "epochs")
        check(all(e["nn"] > 0 and e["tn"] > 0 and e["nt"] > 0 for e in j["epochs"]), "phases timed")
        r2 = run(*common, "--kernel=cpu-blocked", "--report=json")
        j2 = json.loads(r2.stdout)
        for a, b in zip(j["epochs"], j2["epochs"]):
            check(abs(a["train_loss"] - b["train_loss"]) <= 1e-4 * a["train_loss"], "cpu-blocked's curve is cpu-blas's")

    r = run(*common, "--kernel=cpu-omp", "--report=csv", "--precision=double")
    check(r.returncode == 0 and r.stdout.startswith("kernel,precision,device,batch,epoch,seconds,h2d,nn,tn,nt")
          and len(r.stdout.strip().splitlines()) == 3, f"csv: {r.stdout[:200]} {r.stderr}")

    with tempfile.TemporaryDirectory() as out:
        r = run(*common, f"--dump-init={out}")
        check(r.returncode == 0, f"dump: {r.stderr}")
        w0, order, norm = (np.load(os.path.join(out, n)) for n in ("w0.npy", "order.npy", "norm.npy"))
        check(w0.shape == (784, 32) and order.shape == (2, 300) and norm.shape == (2,), "dump shapes")
        check(sorted(order[1]) == list(range(300)), "order is a permutation")
        # A dump that cannot complete leaves the folder as it was (no file replaced, no staging left).
        os.remove(os.path.join(out, "order.npy"))
        os.mkdir(os.path.join(out, "order.npy"))
        before = {n: open(os.path.join(out, n), "rb").read() for n in ("w0.npy", "w1.npy", "norm.npy")}
        one_line_error(run(*[a for a in common if not a.startswith("--hidden")], "--hidden=64", f"--dump-init={out}"), 1,
                       "order.npy' exists and is not a file",
                       "dump over a folder")
        check(all(open(os.path.join(out, n), "rb").read() == b for n, b in before.items())
              and sorted(os.listdir(out)) == ["norm.npy", "order.npy", "w0.npy", "w1.npy", "w2.npy"],
              f"the earlier dump is left as it was: {sorted(os.listdir(out))}")

    # Options.
    for args, needle in ((["--kernel=nope"], "is not one of"), (["--kernel=hybrid"], "splits each product"),
                         (["--batch=0"], "--batch=0"), (["--hidden=12,x"], "--hidden=12,x"),
                         (["--batch=1000"], "larger than the 300 training items"), (["--lr=0"], "--lr=0"),
                         (["--precision=half"], "--precision"), (["--batch=", "--lr=0.1"], "--batch: empty value"),
                         (["--threads=100000"], "--threads=100000 must be in 0..1024 (0: all cores)"),
                         (["--threads=2147483647"], "--threads=2147483647 must be in 0..1024"),
                         (["--threads=-1"], "--threads=-1 must be in 0..1024"),
                         (["--epochs=2147483647"], "--epochs=2147483647: must be in 1..1000000"),
                         (["--epochs=0"], "--epochs=0: must be in 1..1000000"),
                         (["--batch=2147483648"], "--batch=2147483648: must be in 1..65536"),
                         (["--epochs=9223372036854775807"], "--epochs=9223372036854775807: must be in 1..")):
        given = {a.split("=")[0] for a in args}
        base = [a for a in common + ["--kernel=cpu-blas"] if a.split("=")[0] not in given]
        one_line_error(run(*base, *args), 2, needle, " ".join(args))

    for args, needle in ((["--tile=7"], "--tile=7: use 4, 8, 16 or 32"),
                         (["--mma=5"], "--mma=5: use 884, 1684 or 1688"),
                         (["--mma=4294968980"], "--mma=4294968980: use 884")):  # (not truncated to 1684)
        one_line_error(run(*common, "--kernel=cpu-blas", *args), 2, needle, " ".join(args))
    # A network too big for the host: refused before it is allocated, not killed by the kernel.
    r = subprocess.run([MLP, "--quiet", *common[:1], "--hidden=20000,20000", "--batch=50", "--epochs=1",
                        "--kernel=cpu-blas"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, KMEANS_HOST_MEMORY="1G"))
    one_line_error(r, 1, "the network of --hidden=20000,20000 and --batch=50", "network memory")
    # A report standard output cannot take: an error, not a silent success.
    with open(os.devnull if not os.path.exists("/dev/full") else "/dev/full", "w") as full:
        r = subprocess.run([MLP, "--quiet", *common, "--kernel=cpu-blas"], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    if os.path.exists("/dev/full"):
        one_line_error(r, 1, "could not be written to standard output", "report to /dev/full")

    # Options are refused before the data is read.
    one_line_error(run(f"--data={d}/none", "--epochs=1000001"), 2, "--epochs=1000001", "epochs before the data")
    one_line_error(run(f"--data={d}/none", "--threads=1025"), 2, "--threads=1025", "threads before the data")

    # Data.
    one_line_error(run(f"--data={d}/none", "--kernel=cpu-blas"), 1, "neither it nor", "missing folder")
    write_set(d, "t10k", 100, labels=[3] * 99 + [12])
    one_line_error(run(*common, "--kernel=cpu-blas"), 1, "label 12 of item 99 is out of range", "label range")
    write_set(d, "t10k", 100, magic=0x801)
    one_line_error(run(*common, "--kernel=cpu-blas"), 1, "magic number 0x00000801", "magic")
    write_set(d, "t10k", 100, labels=[1] * 90)
    one_line_error(run(*common, "--kernel=cpu-blas"), 1, "holds 100 images but", "counts")
    write_set(d, "t10k", 100)
    path = os.path.join(d, "t10k-images-idx3-ubyte.gz")
    raw = gzip.decompress(open(path, "rb").read())
    with gzip.open(path, "wb") as f:
        f.write(raw[:-500])
    one_line_error(run(*common, "--kernel=cpu-blas"), 1, "truncated", "truncated")
    # Cut before its trailer (CRC and size) or inside it: all the data is there, yet the file is
    # short (zlib did not look past a read that ended exactly at the data's end).
    for cut in (8, 4, 1):
        write_set(d, "t10k", 100)
        raw = open(path, "rb").read()
        open(path, "wb").write(raw[:-cut])
        one_line_error(run(*common, "--kernel=cpu-blas"), 1, "truncated", f"cut {cut} bytes before the end")
    # Damaged inside (its CRC no longer matches): zlib says so at the stream's end, after the
    # data was read, and that is an error, not the end of the file.
    write_set(d, "t10k", 100)
    raw = bytearray(open(path, "rb").read())
    raw[-8] ^= 0xFF  # the CRC-32 of the uncompressed data
    open(path, "wb").write(bytes(raw))
    one_line_error(run(*common, "--kernel=cpu-blas"), 1, "corrupt data", "CRC mismatch")
    # A header declaring far more images than the file holds: refused from the file's size,
    # before anything is allocated or read (it was zero-filled to the declared size first).
    for gz in (False, True):
        write_set(d, "t10k", 100, gz=gz)
        name = "t10k-images-idx3-ubyte" + (".gz" if gz else "")
        raw = open(os.path.join(d, name), "rb").read()
        raw = gzip.decompress(raw) if gz else raw
        lie = raw[:4] + (3000000).to_bytes(4, "big") + raw[8:]
        with (gzip.open if gz else open)(os.path.join(d, name), "wb") as f:
            f.write(lie)
        one_line_error(run(*common, "--kernel=cpu-blas"), 1, "declares 3000000 images of 28 x 28 pixels",
                       f"header lie ({'gz' if gz else 'plain'})")

print("mlp_cli_test:", "FAILED" if failures else "ok")
sys.exit(1 if failures else 0)
