#!/usr/bin/env python3
"""scripts/stamps_phases.py on a small stamps file: three launches of two blocks (and a cell-table
kernel before the third, and the last block's steps in the third), the phases measured from the launch
before's release, their medians, and
the launches taken in release order whatever their slots; a file with one launch says so."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "stamps_phases.py")
failures = []


def block(slot, b, t):  # entry, acquire, prologue, loop, drain, flush, release, end (ns)
    return "B %d %d %s\n" % (slot, b, " ".join(str(v) for v in t))


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "st.txt")
    with open(path, "w") as f:
        f.write("launches 3 grid 2 tile_grid 1 tile_used 0\n")
        # Slot 5 first (release at 100 us), then slot 0 (release 300 us), then slot 3 (release 500 us).
        f.write(block(5, 0, [1000, 2000, 3000, 90000, 91000, 92000, 0, 0]))
        f.write(block(5, 1, [1000, 2000, 3000, 95000, 96000, 97000, 100000, 101000]))
        f.write("F 5 1 96500 96700\n")  # (the flush in steps: scripts/stamps_flush.py's, ignored here)
        f.write(block(0, 0, [96000, 102000, 104000, 280000, 281000, 283000, 0, 0]))
        f.write(block(0, 1, [97000, 103000, 106000, 290000, 291000, 293000, 300000, 301000]))
        f.write(block(3, 0, [296000, 305000, 308000, 480000, 481000, 482000, 0, 0]))
        f.write(block(3, 1, [297000, 306000, 309000, 490000, 492000, 494000, 500000, 501000]))
        f.write("C 3 0 290000 302000 304000\n")
        # The third launch's last block (block 1, the one that released) in steps: knew it was last at
        # 495 us, its sums in at 496.5, the centroids at 497, the total at 498.
        f.write("L 3 495000 496500 497000 498000\n")
    out = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
    lines = out.stdout.splitlines()
    def numbers(l):
        try:
            return [float(v) for v in l.split()]
        except ValueError:
            return None
    rows = [numbers(l) for l in lines if l.strip() and "(medians)" not in l and numbers(l)]
    if out.returncode != 0 or len(rows) != 2:
        failures.append(f"expected two launches' rows: rc {out.returncode}\n{out.stdout}{out.stderr}")
    else:
        header = lines[1].split()
        first = dict(zip(header, rows[0]))
        second = dict(zip(header, rows[1]))
        # The second launch (slot 0) from 100 us: entry -4/-3.5, acquire 2/3, loop 180/185/190, release 200.
        want = {"entry_min": -4.0, "entry_med": -3.5, "acq_min": 2.0, "acq_max": 3.0, "pro_med": 5.0,
                "loop_min": 180.0, "loop_med": 185.0, "loop_max": 190.0, "drain_max": 191.0, "flush_max": 193.0,
                "release": 200.0, "end": 201.0}
        for k, v in want.items():
            if abs(first.get(k, float("nan")) - v) > 1e-9:
                failures.append(f"{k}: {first.get(k)} != {v}")
        # The third (slot 3, from 300 us) has the table's kernel: entry -10, acquire 2, end 4.
        for k, v in {"cells_entry": -10.0, "cells_acq": 2.0, "cells_end": 4.0, "release": 200.0,
                     "last_flush": 194.0, "last_done": 195.0, "last_sums": 196.5, "last_cents": 197.0,
                     "last_total": 198.0}.items():
            if abs(second.get(k, float("nan")) - v) > 1e-9:
                failures.append(f"{k}: {second.get(k)} != {v}")
        if first.get("last_done") == first.get("last_done"):  # (nan where a launch has no L line)
            failures.append(f"last_done without an L line: {first.get('last_done')}")
        if "launches 3" not in lines[0]:
            failures.append(f"the file's header: {lines[0]}")
        medians = [l for l in lines if "(medians)" in l]
        if len(medians) != 1:
            failures.append("no medians line")
    one = os.path.join(tmp, "one.txt")
    with open(one, "w") as f:
        f.write(block(0, 0, [1, 2, 3, 4, 5, 6, 7, 8]))
    out = subprocess.run([sys.executable, SCRIPT, one], capture_output=True, text=True)
    if "fewer than two" not in out.stdout:
        failures.append(f"one launch: {out.stdout}")

for f in failures:
    print("FAIL:", f)
print("ok" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
