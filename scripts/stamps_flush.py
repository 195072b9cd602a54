#!/usr/bin/env python3
"""The flush of the delta kernel's block that flushes last, in steps, from an instrumented build's stamps
(scripts/stamps_phases.py says how to make them; the F lines follow each block's B line).

    stamps_flush.py st.txt [more files]

Per file, the medians over its launches of that block's steps, in microseconds: from the rings drained (the
barrier after the main loop) to its k d sums' atomics issued, then its k counts', then the tallies (the flush's
stamp). The build's extra barriers between the steps make the whole a little longer than uninstrumented.
"""
import statistics
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        blocks, flush = {}, {}
        with open(path) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "B":
                    blocks[(int(w[1]), int(w[2]))] = [int(v) for v in w[3:]]
                elif w and w[0] == "F":
                    flush[(int(w[1]), int(w[2]))] = [int(v) for v in w[3:]]
        steps = []
        for slot in sorted({s for s, _ in blocks}):
            b, v = max(((b, v) for (s, b), v in blocks.items() if s == slot), key=lambda t: t[1][5])
            sums, counts = flush.get((slot, b), (0, 0))
            if not sums:
                continue
            steps.append(((sums - v[4]) / 1e3, (counts - sums) / 1e3, (v[5] - counts) / 1e3, (v[5] - v[4]) / 1e3))
        if not steps:
            print(f"{path}: no F lines (a build without the flush's stamps?)")
            continue
        med = [statistics.median(c) for c in zip(*steps)]
        print(f"{path}: the block that flushed last: sums' atomics {med[0]:.2f} us, counts {med[1]:.2f}, "
              f"tallies {med[2]:.2f}, whole flush {med[3]:.2f} (medians of {len(steps)} launches)")


if __name__ == "__main__":
    main()
