#!/usr/bin/env python3
"""End-to-end tests of float16 and bfloat16 input through the kmeans binary: .npy ('<f2', and
bfloat16 as np.save writes ml_dtypes' type, '<V2') and HDF5 (h5py's float16, a bfloat16 float
type) give the labels, centroids and inertia of the same data saved as float32; the report says
what was read; bad 16-bit files end in one line and a non-zero exit.
Needs numpy and h5py (skips with 77 without them). Usage: half_input_test.py path/to/kmeans"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

KMEANS = sys.argv[1]
failures = []


def run(*args, ok=True):
    p = subprocess.run([KMEANS, *args], capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        raise AssertionError(f"kmeans {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def fit(tmp, data, *args, tag="run"):
    """Runs kmeans on `data` and returns (report, centroids, labels)."""
    out = os.path.join(tmp, f"result-{tag}.npy")
    p = run(f"--input={data}", f"--output={out}", "--report=json", "--quiet", *args)
    return json.loads(p.stdout), np.load(out), np.load(os.path.join(tmp, f"result-{tag}.labels.npy"))


def same_result(a, b, what):
    (ra, ca, la), (rb, cb, lb) = a, b
    expect(ca.dtype == cb.dtype and np.array_equal(ca.view(np.uint8), cb.view(np.uint8)),
           f"{what}: the same centroid bits")
    expect(np.array_equal(la, lb), f"{what}: the same labels")
    expect(ra["inertia"] == rb["inertia"] and ra["iterations"] == rb["iterations"],
           f"{what}: the same inertia and iterations ({ra['inertia']} vs {rb['inertia']})")


def bfloat16_bits(x):
    """float32 values rounded to bfloat16 (to nearest even), as their 16 bits."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bfloat16_as_float32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def save_npy_raw(path, descr, shape, raw):
    """An .npy file with this descr (as np.save writes ml_dtypes' bfloat16: '<V2') and raw bytes."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": shape})
        f.write(raw.tobytes())


def write_h5_bfloat16(path, bits):
    """A dataset of a 16-bit float type with bfloat16's fields (1, 8, 7 bits; bias 127)."""
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_precision(16)
    t.set_size(2)
    t.set_ebias(127)
    with h5py.File(path, "w") as f:
        ds = h5py.h5d.create(f.id, b"x", t, h5py.h5s.create_simple(bits.shape))
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)


def blobs(n=3000, d=5, seed=1):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-20, 20, (6, d))
    return (centres[rng.integers(0, 6, n)] + rng.normal(0, 2, (n, d))).astype(np.float32)


def test_float16_equals_float32(tmp):
    x16 = blobs().astype(np.float16)
    f16, f32 = os.path.join(tmp, "x16.npy"), os.path.join(tmp, "x32.npy")
    np.save(f16, x16)
    np.save(f32, x16.astype(np.float32))  # numpy's float16 -> float32 is exact
    with h5py.File(os.path.join(tmp, "x16.h5"), "w") as f:
        f["data"] = x16  # h5py's 16-bit IEEE float type
    with h5py.File(os.path.join(tmp, "x16be.h5"), "w") as f:
        f["data"] = x16.astype(">f2")
    for impl in ("seq", "omp"):
        common = (f"--impl={impl}", "--clusters=6", "--init=kmeans++", "--seed=3", "--loops=30")
        want = fit(tmp, f32, *common, "--precision=float", tag="f32")
        expect(want[0]["input_dtype"] == "float32", f"{impl}: a float32 file's input_dtype")
        for name in ("x16.npy", "x16.h5", "x16be.h5"):
            got = fit(tmp, os.path.join(tmp, name), *common, tag="f16")
            expect(got[0]["precision"] == "float", f"{impl} {name}: 16-bit data runs in float by default")
            expect(got[0]["input_dtype"] == "float16", f"{impl} {name}: the report says float16")
            same_result(got, want, f"{impl} {name} vs float32")
        want = fit(tmp, f32, *common, "--precision=double", tag="f32d")
        got = fit(tmp, f16, *common, "--precision=double", tag="f16d")
        expect(got[0]["precision"] == "double", f"{impl}: --precision=double on float16 input")
        same_result(got, want, f"{impl} float16 in double vs float32 in double")
    table = run(f"--input={f16}", "--clusters=6", "--loops=2", "--impl=seq").stdout
    expect("x16.npy (float16): 3000 objects" in table, f"the table names the input's type: {table[:300]!r}")
    # Given centroids in a 16-bit file are the same centroids.
    c16, c32 = os.path.join(tmp, "c16.npy"), os.path.join(tmp, "c32.npy")
    np.save(c16, x16[:6])
    np.save(c32, x16[:6].astype(np.float32))
    same_result(fit(tmp, f16, "--impl=seq", f"--init={c16}", tag="i16"),
                fit(tmp, f16, "--impl=seq", f"--init={c32}", tag="i32"), "--init from a float16 file")


def test_bfloat16_equals_float32(tmp):
    bits = bfloat16_bits(blobs(seed=2))
    f32 = os.path.join(tmp, "b32.npy")
    np.save(f32, bfloat16_as_float32(bits))
    files = {"<V2": os.path.join(tmp, "bv.npy"), "|V2": os.path.join(tmp, "bp.npy"),
             "h5": os.path.join(tmp, "b.h5")}
    save_npy_raw(files["<V2"], "<V2", bits.shape, bits)  # ml_dtypes' bfloat16 through np.save
    np.save(files["|V2"], bits.view("V2"))  # such a file loaded by NumPy and saved again
    write_h5_bfloat16(files["h5"], bits)
    common = ("--impl=omp", "--clusters=6", "--init=random", "--seed=5", "--loops=30")
    want = fit(tmp, f32, *common, "--precision=float", tag="b32")
    for kind, path in files.items():
        got = fit(tmp, path, *common, tag="b16")
        expect(got[0]["input_dtype"] == "bfloat16" and got[0]["precision"] == "float",
               f"bfloat16 {kind}: input_dtype and precision {got[0]['input_dtype']}, {got[0]['precision']}")
        same_result(got, want, f"bfloat16 {kind} vs float32")


def test_every_finite_pattern(tmp):
    """One object of every finite 16-bit value, one cluster, seq (double sums): the centroid is
    the object itself, so the output shows each value as the binary converted it, compared
    with numpy's float16 -> float32 and with bfloat16's definition (its bits are float32's top)."""
    p = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    half = p.view(np.float16)
    half = half[np.isfinite(half)].reshape(1, -1)
    path = os.path.join(tmp, "all16.npy")
    np.save(path, half)
    r, c, _ = fit(tmp, path, "--impl=seq", "--clusters=1", "--loops=1", tag="all16")
    expect(r["precision"] == "float" and c.dtype == np.float32 and c.shape == half.shape,
           f"every float16: a float run, {c.dtype} {c.shape}")
    expect(np.array_equal(c, half.astype(np.float32)), "every finite float16 value converted as numpy converts it")
    wrong = np.flatnonzero(c != half.astype(np.float32))
    expect(wrong.size == 0, f"float16 patterns converted wrongly: {half.view(np.uint16)[0, wrong[:5]]}")

    bf = p[((p >> 7) & 0xFF) != 0xFF].reshape(1, -1)  # every finite bfloat16
    path = os.path.join(tmp, "allbf.npy")
    save_npy_raw(path, "<V2", bf.shape, bf)
    # Its largest values' squares overflow float: the range check refuses them, naming the fix.
    p_float = run(f"--input={path}", "--impl=seq", "--clusters=1", "--loops=1", ok=False)
    expect(p_float.returncode == 1 and "--precision=double" in p_float.stderr
           and p_float.stderr.count("\n") == 1, f"bfloat16 extremes in float: one line, {p_float.stderr!r}")
    r, c, _ = fit(tmp, path, "--impl=seq", "--clusters=1", "--loops=1", "--precision=double", tag="allbf")
    want = bfloat16_as_float32(bf).astype(np.float64)
    expect(c.dtype == np.float64 and np.array_equal(c, want), "every finite bfloat16 value converted exactly")


def test_bad_16bit_files(tmp):
    x = blobs(n=100, d=4).astype(np.float16)
    cases = {}
    path = os.path.join(tmp, "trunc.npy")
    np.save(path, x)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    cases["truncated"] = (path, "truncated: shape 100 x 4 of float16")
    path = os.path.join(tmp, "be.npy")
    np.save(path, x.astype(">f2"))
    cases["big-endian"] = (path, "dtype '>f2' is not little-endian")
    path = os.path.join(tmp, "v3.npy")
    save_npy_raw(path, "|V3", (100, 1), np.zeros(300, np.uint8))
    cases["3-byte void"] = (path, "dtype '|V3' is not float16, bfloat16, float32 or float64")
    path = os.path.join(tmp, "inf.npy")
    y = x.copy()
    y[7, 2] = np.inf
    np.save(path, y)
    cases["infinity"] = (path, "value Inf at object 7, coordinate 2")
    path = os.path.join(tmp, "nan.npy")
    bits = bfloat16_bits(x.astype(np.float32))
    bits[3, 1] = 0x7FC0
    save_npy_raw(path, "<V2", bits.shape, bits)
    cases["bfloat16 NaN"] = (path, "value NaN at object 3, coordinate 1")
    path = os.path.join(tmp, "opaque.h5")
    with h5py.File(path, "w") as f:
        f["x"] = bits.view("V2")  # h5py stores a two-byte void (and ml_dtypes' bfloat16) as opaque
    cases["opaque"] = (path, "opaque 2-byte type")
    for what, (path, message) in cases.items():
        out = os.path.join(tmp, "bad_out.npy")
        p = run(f"--input={path}", "--clusters=3", f"--output={out}", ok=False)
        lines = p.stderr.strip().splitlines()
        expect(p.returncode == 1 and len(lines) == 1 and lines[0].startswith("kmeans: error:") and message in lines[0],
               f"{what}: one line naming it, exit 1: {p.returncode} {p.stderr!r}")
        expect(not os.path.exists(out), f"{what}: no output written")


def peak_rss(args):
    """Peak resident bytes of one kmeans run, from the child's own rusage."""
    p = subprocess.Popen([KMEANS, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    expect(os.waitstatus_to_exitcode(status) == 0, f"kmeans {' '.join(args)}: {p.stderr.read()!r}")
    return usage.ru_maxrss * 1024


def test_conversion_holds_no_second_copy(tmp):
    """The 16-bit values are converted strip by strip as they are read: a run on them peaks where
    the run on the same data saved as float32 does (a whole 16-bit copy would add 48 MB)."""
    paths = {name: os.path.join(tmp, name) for name in ("m16.npy", "m16.h5", "m32.npy")}
    # Made in another process: a child's peak counts this one's size at the fork.
    subprocess.run([sys.executable, "-c", f"""if True:
        import h5py, numpy as np
        x16 = np.random.default_rng(0).random((3_000_000, 8), dtype=np.float32).astype(np.float16)
        np.save({paths["m16.npy"]!r}, x16)
        with h5py.File({paths["m16.h5"]!r}, "w") as f:
            f["x"] = x16
        np.save({paths["m32.npy"]!r}, x16.astype(np.float32))"""], check=True, timeout=120)
    args = ("--impl=seq", "--clusters=2", "--loops=1", "--precision=float", "--quiet")
    base = peak_rss([f"--input={paths['m32.npy']}", *args])
    for name in ("m16.npy", "m16.h5"):
        peak = peak_rss([f"--input={paths[name]}", *args])
        print(f"  {name}: peak {peak / 2**20:.0f} MiB, float32 file {base / 2**20:.0f} MiB")
        expect(peak <= base + 12 * 2**20, f"{name}: peak {peak / 2**20:.0f} MiB, float32's {base / 2**20:.0f} MiB")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for test in (test_float16_equals_float32, test_bfloat16_equals_float32, test_every_finite_pattern,
                     test_bad_16bit_files, test_conversion_holds_no_second_copy):
            try:
                test(tmp)
            except Exception as e:  # an unexpected failure is one more failure, not a crash
                expect(False, f"{test.__name__}: {e!r}")
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
