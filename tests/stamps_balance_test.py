#!/usr/bin/env python3
"""scripts/stamps_balance.py on a small stamps file: two launches of four blocks on two SMs (two a SM),
4 passes (one a block), the block that entered each SM first taking 10 us a pass and the other 20: the
loops' spread, the pairs' times a pass (first to enter, second), on how many SMs the first to enter is
one of the grid's first two blocks, and the SMs' ends."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "stamps_balance.py")
failures = []


def block(slot, b, entry, prologue, loop, release, sm):  # ns; drain, flush = loop; end = release
    return "B %d %d %d %d %d %d %d %d %d %d %d\n" % (slot, b, entry, entry, prologue, loop, loop, loop, release,
                                                     release, sm)


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "st.txt")
    with open(path, "w") as f:
        f.write("launches 2 grid 4 tile_grid 1 tile_used 0\n")
        for slot, t0, sm0 in ((1, 0, 7), (2, 100000, 9)):
            # Blocks 0 and 1 enter first on SMs sm0 and sm0 + 1; 2 and 3 join them 1 us later.
            f.write(block(slot, 0, t0, t0 + 5000, t0 + 15000, 0, sm0))
            f.write(block(slot, 1, t0, t0 + 5000, t0 + 15000, 0, sm0 + 1))
            f.write(block(slot, 2, t0 + 1000, t0 + 5000, t0 + 25000, 0, sm0))
            f.write(block(slot, 3, t0 + 1000, t0 + 5000, t0 + 25000, t0 + 30000, sm0 + 1))
    out = subprocess.run([sys.executable, SCRIPT, "--n", "4000", "--pass", "1000", path], capture_output=True, text=True)
    rows = [l.split() for l in out.stdout.splitlines() if l.strip() and l.split()[0][0].isdigit()]
    if out.returncode != 0 or len(rows) != 2:
        failures.append(f"expected two launches' rows: rc {out.returncode}\n{out.stdout}{out.stderr}")
    else:
        first = rows[0]
        # min, median, max loop (us); then r_prev, same_sm, replay, ideal (nan for the first launch)
        if [float(v) for v in first[:3]] != [10.0, 15.0, 20.0]:
            failures.append(f"loops' spread: {first[:3]}")
        # pass_1st, pass_2nd, 1st_low, 1st_more, sm_min, sm_med, sm_max
        if [float(first[7]), float(first[8])] != [10.0, 20.0]:
            failures.append(f"the pairs' times a pass: {first[7:9]}")
        if first[9] != "2/2" or first[10] != "0/2":
            failures.append(f"first to enter is of the first wave on 2/2 SMs, with no more passes: {first[9:11]}")
        if [float(v) for v in first[11:14]] != [20.0, 20.0, 20.0]:
            failures.append(f"the SMs' ends: {first[11:14]}")
        second = rows[1]
        if second[4] != "0.00":  # moved SMs: blocks 0..3 on SMs 9, 10 in the second launch
            failures.append(f"same_sm: {second[4]}")
        # The replay: shares 1, 2, 0, 1 from the rates 0.1, 0.1, 0.05, 0.05 (rounded on the running sum), so
        # block 1 takes 2 passes at 10 us and block 3 one at 20: 20 us; ideal 4 / 0.3 passes an us.
        if float(second[5]) != 20.0 or abs(float(second[6]) - 40 / 3) > 0.05:
            failures.append(f"replay {second[5]}, ideal {second[6]}")
    empty = subprocess.run([sys.executable, SCRIPT, "--n", "4000", "--pass", "1000", os.devnull], capture_output=True,
                           text=True)
    if empty.returncode != 0 or "no stamped launches" not in empty.stdout:
        failures.append(f"an empty file: rc {empty.returncode}\n{empty.stdout}{empty.stderr}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("stamps_balance: ok")
