#!/usr/bin/env python3
"""scripts/stamps_flush.py on a small stamps file: two launches of two blocks with their F lines; the
block that flushed last is the one taken, its steps' medians over the launches are printed; a file
without F lines says so."""
import os
import re
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "stamps_flush.py")
failures = []


def block(slot, b, drain, flush):  # entry, acquire, prologue, loop, drain, flush, release, end, sm (ns)
    return "B %d %d 1 2 3 4 %d %d 0 0 7\n" % (slot, b, drain, flush)


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "st.txt")
    with open(path, "w") as f:
        f.write("launches 2 grid 2 tile_grid 1 tile_used 0\n")
        # Slot 0: block 1 flushes last (9 us): sums' atomics 4 us, counts 0.5, tallies 2.5.
        f.write(block(0, 0, 1000, 5000) + "F 0 0 3000 3500\n")
        f.write(block(0, 1, 2000, 9000) + "F 0 1 6000 6500\n")
        # Slot 1: block 0 flushes last (20 us): 6, 1 and 3 us.
        f.write(block(1, 0, 10000, 20000) + "F 1 0 16000 17000\n")
        f.write(block(1, 1, 10000, 15000) + "F 1 1 11000 12000\n")
    out = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
    got = re.search(r"sums' atomics ([\d.]+) us, counts ([\d.]+), tallies ([\d.]+), whole flush ([\d.]+) "
                    r"\(medians of (\d+) launches\)", out.stdout)
    if out.returncode != 0 or not got:
        failures.append(f"no steps line: rc {out.returncode}\n{out.stdout}{out.stderr}")
    else:
        want = [5.0, 0.75, 2.75, 8.5, 2.0]
        for name, g, w in zip(["sums", "counts", "tallies", "whole", "launches"], got.groups(), want):
            if abs(float(g) - w) > 1e-9:
                failures.append(f"{name}: {g} != {w}")
    bare = os.path.join(tmp, "bare.txt")
    with open(bare, "w") as f:
        f.write(block(0, 0, 1000, 5000))
    out = subprocess.run([sys.executable, SCRIPT, bare], capture_output=True, text=True)
    if "no F lines" not in out.stdout:
        failures.append(f"a file without F lines: {out.stdout}{out.stderr}")

for f in failures:
    print("FAIL:", f)
print("ok" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
