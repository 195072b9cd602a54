#!/usr/bin/env python3
"""Where a kernel's instructions and stalls go, from ncu's per-instruction source counters.

Input: the CSV that
  ncu --kernel-name regex:NAME --launch-skip S --launch-count 1 --section SourceCounters \\
      --page source --print-source sass --csv  PROGRAM ARGS  > FILE.csv
writes (one row per SASS instruction: its executed count and its warp-stall samples).

Output, per file: the total warp instructions and stall samples; the opcodes by instructions
executed, each with its share of the stall samples; and the straight-line runs (consecutive
instructions executed equally often: a basic block, or a loop body) by instructions, each with
its count per execution, its length, its share of the stall samples and its first instruction.
A loop body shows as a run executed (iterations x passes) times: at d = 16, K = 16 in float the
delta kernel's scores are one run of 97 instructions executed 8 times a pass.

Usage: ncu_sass.py FILE.csv [FILE.csv ...] [--top=N]"""
import argparse
import collections
import csv
import re
import sys


def load(path):
    """[(source, executed, stall samples)] in address order."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"Address"')), None)
    if start is None:
        raise ValueError(f"{path}: no source-counter table (a header row starting with \"Address\")")
    reader = csv.reader(lines[start:])
    header = next(reader)
    try:
        src, ex, sm = (header.index(c) for c in ("Source", "Instructions Executed",
                                                 "Warp Stall Sampling (All Samples)"))
    except ValueError as e:
        raise ValueError(f"{path}: a column is missing ({e})") from None
    rows = []
    for row in reader:
        if len(row) <= max(src, ex, sm):
            continue
        try:
            rows.append((row[src].strip(), int(row[ex].replace(",", "")), int(row[sm].replace(",", ""))))
        except ValueError:
            continue  # a summary line
    return rows


def opcode(source):
    """The opcode without its predicate and modifiers: '@!P0 LDS.128 R4, [R8]' -> 'LDS'."""
    text = re.sub(r"^@!?U?P\w+\s+", "", source)
    return text.split(" ")[0].split(".")[0]


def runs(rows):
    """Straight-line runs: [start index, executions, length, instructions, samples]."""
    out = []
    for i, (_, ex, sm) in enumerate(rows):
        if out and out[-1][1] == ex and out[-1][0] + out[-1][2] == i:
            out[-1][2] += 1
            out[-1][3] += ex
            out[-1][4] += sm
        else:
            out.append([i, ex, 1, ex, sm])
    return out


def report(path, top):
    rows = load(path)
    total = sum(r[1] for r in rows)
    samples = sum(r[2] for r in rows) or 1
    lines = [f"{path}: {total:,} warp instructions, {samples:,} stall samples"]
    ops, op_samples = collections.Counter(), collections.Counter()
    for source, ex, sm in rows:
        ops[opcode(source)] += ex
        op_samples[opcode(source)] += sm
    for op, n in ops.most_common(top):
        lines.append(f"  {op:10} {n:12,} {100 * n / max(total, 1):5.1f}% of instructions"
                     f"  {100 * op_samples[op] / samples:5.1f}% of samples")
    lines.append("  runs: executions x length = instructions (share), samples, first instruction")
    for start, ex, length, n, sm in sorted(runs(rows), key=lambda r: -r[3])[:top]:
        lines.append(f"  {ex:10,} x {length:4} = {n:12,} ({100 * n / max(total, 1):4.1f}%)"
                     f"  {100 * sm / samples:4.1f}%  {rows[start][0][:60]}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    status = 0
    for path in a.files:
        try:
            print(report(path, a.top))
        except (OSError, ValueError) as e:
            print(f"ncu_sass.py: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
