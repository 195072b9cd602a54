#!/usr/bin/env python3
"""Where an iteration of fused's delta kernel goes, from an instrumented build's %globaltimer stamps.

Build with the stamps (every block's thread 0 writes them; a few percent slower, never for timing):
    cmake -S . -B build-stamps -DCMAKE_CUDA_FLAGS=-DKMEANS_STAMPS && ninja -C build-stamps kmeans
Run with KMEANS_STAMPS_FILE=F (the engine writes the last 8 launches there before the final E-step):
    KMEANS_STAMPS_FILE=st.txt build-stamps/kmeans --impl=fused --size=256 --coords=2 --clusters=16 --loops=12
Then: stamps_phases.py st.txt [more files]

Per launch (each after the first stamped), in microseconds from the launch before's release (its last block's
stamp once the centroids and tallies are written): the blocks' entry (min, median), when they may read the
centroids (acquire: min, max), the prologue's end (median, max), the main loop's end (min, median, max), the
rings drained (max), the block's sums flushed (max), this launch's release (the last block's update done) and
end; with the cell table's kernel, its first entry, its last acquire and its end; where the file has the last
block's steps (L lines), that block's own flush, the moment it knew it was last, its held sums in shared memory,
the centroids written and the shifts' total (last_flush ... last_total). Then the medians over launches.
"""
import statistics
import sys

COLUMNS = ["entry_min", "entry_med", "acq_min", "acq_max", "pro_med", "pro_max", "loop_min", "loop_med",
           "loop_max", "drain_max", "flush_max", "last_flush", "last_done", "last_sums", "last_cents", "last_total",
           "release", "end", "cells_entry", "cells_acq", "cells_end"]


def load(path):
    blocks, cells, last, head = {}, {}, {}, ""
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "B":
                blocks.setdefault(int(w[1]), []).append([int(v) for v in w[3:]])
            elif w[0] == "C":
                cells.setdefault(int(w[1]), []).append([int(v) for v in w[3:]])
            elif w[0] == "L":
                last[int(w[1])] = [int(v) for v in w[2:]]
            elif w[0] == "F":
                continue  # (the flush in steps: scripts/stamps_flush.py)
            else:
                head = line.strip()
    return head, blocks, cells, last


def phases(blocks, cells, last=None):
    release = {slot: max(b[6] for b in v) for slot, v in blocks.items()}
    order = sorted(release, key=release.get)
    rows = []
    for before, slot in zip(order, order[1:]):
        t0, v = release[before], blocks[slot]

        def col(q):
            return [(b[q] - t0) / 1000 for b in v]
        r = {"entry_min": min(col(0)), "entry_med": statistics.median(col(0)), "acq_min": min(col(1)),
             "acq_max": max(col(1)), "pro_med": statistics.median(col(2)), "pro_max": max(col(2)),
             "loop_min": min(col(3)), "loop_med": statistics.median(col(3)), "loop_max": max(col(3)),
             "drain_max": max(col(4)), "flush_max": max(col(5)), "release": (release[slot] - t0) / 1000,
             "end": (max(b[7] for b in v) - t0) / 1000}
        if last and slot in last:
            # The last block's update in steps (L lines, session 28): its own flush (the block that
            # released), once it knew it was last, its held sums in, the centroids, the total.
            releaser = max(v, key=lambda b: b[6])
            r["last_flush"] = (releaser[5] - t0) / 1000
            for name, t in zip(("last_done", "last_sums", "last_cents", "last_total"), last[slot]):
                r[name] = (t - t0) / 1000
        if slot in cells:
            c = cells[slot]
            r["cells_entry"] = min((x[0] - t0) / 1000 for x in c)
            r["cells_acq"] = max((x[1] - t0) / 1000 for x in c)
            r["cells_end"] = max((x[2] - t0) / 1000 for x in c)
        rows.append(r)
    return rows


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    for path in sys.argv[1:]:
        head, blocks, cells, last = load(path)
        rows = phases(blocks, cells, last)
        if not rows:
            print(f"{path}: fewer than two stamped launches")
            continue
        cols = [c for c in COLUMNS if any(c in r for r in rows)]
        print(f"== {path}: {head}")
        print(" ".join(f"{c:>11}" for c in cols))
        for r in rows:
            print(" ".join(f"{r.get(c, float('nan')):11.1f}" for c in cols))
        print(" ".join(f"{statistics.median(r[c] for r in rows if c in r):11.1f}" for c in cols), " (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
