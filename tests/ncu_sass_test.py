#!/usr/bin/env python3
"""scripts/ncu_sass.py on a small CSV in ncu's source-page layout: the totals, the opcodes' shares
(predicates and modifiers stripped), the straight-line runs (a loop body executed 8 times as often
as its neighbours), and one clear line with exit 1 for a file without the table."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "ncu_sass.py")
failures = []

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"# Samples","Instructions Executed","Thread Instructions Executed"')
ROWS = [  # source, stall samples, executed
    ("S2R R5, SR_TID.X", 10, 100),
    ("LDG.E.CONSTANT R61, desc[UR12][R2.64]", 30, 100),
    ("FFMA R69, R117, R64, R70", 20, 800),
    ("@!P0 FMNMX R65, R64, R121, !PT", 5, 800),
    ("LDS.128 R64, [R124+0x10]", 5, 800),
    ("@P1 BRA 0x7f10877b3330", 10, 800),
    ("STG.E desc[UR12][R12.64], R9", 20, 100),
]

with tempfile.TemporaryDirectory() as tmp:
    good = os.path.join(tmp, "sass.csv")
    with open(good, "w") as f:
        f.write("==PROF== Connected to process 1\n")
        f.write('"Kernel Name","void fused_delta<float, 16>(...)",\n')
        f.write(HEADER + "\n")
        for i, (src, sm, ex) in enumerate(ROWS):
            f.write(f'"0x{i * 16:x}","      {src}","{sm}","{sm}","{sm}","{ex:,}","{ex * 32}"\n')
    p = subprocess.run([sys.executable, SCRIPT, good, "--top=3"], capture_output=True, text=True)
    out = p.stdout
    if p.returncode != 0:
        failures.append(f"exit {p.returncode}: {p.stderr}")
    flat = " ".join(out.split())  # spacing aside
    for want in ("3,500 warp instructions, 100 stall samples",
                 "FFMA 800 22.9% of instructions 20.0% of samples",
                 "FMNMX 800 22.9% of instructions 5.0% of samples",
                 "800 x 4 = 3,200 (91.4%) 40.0% FFMA R69",
                 "100 x 2 = 200 ( 5.7%) 40.0% S2R R5",
                 "100 x 1 = 100 ( 2.9%) 20.0% STG.E"):
        if want not in flat:
            failures.append(f"missing {want!r} in:\n{out}")
    head, _, tail = out.partition("runs:")
    run_lines = [line for line in tail.splitlines()[1:] if " x " in line]
    if head.count("% of instructions") != 3 or len(run_lines) != 3 or "LDG" in head:
        failures.append(f"--top=3 not applied (three opcodes, three runs):\n{out}")

    bad = os.path.join(tmp, "bad.csv")
    with open(bad, "w") as f:
        f.write("no table here\n")
    p = subprocess.run([sys.executable, SCRIPT, bad], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 1 or len(lines) != 1 or "no source-counter table" not in lines[0] or p.stdout:
        failures.append(f"bad file: exit {p.returncode}, stderr {p.stderr!r}, stdout {p.stdout!r}")

for f in failures:
    print("FAIL:", f)
print(f"ncu_sass: {'FAILED' if failures else 'passed'}")
sys.exit(1 if failures else 0)
