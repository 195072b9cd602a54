#!/usr/bin/env python3
"""Are the delta kernel's blocks fast or slow from one launch to the next? (From an instrumented
build's stamps: scripts/stamps_phases.py says how to make them; a block's line there ends with its SM.)

    stamps_balance.py --n N --pass P st.txt [more files]

N: the objects; P: the objects of a block's pass (threads x U). The schedule is the fixed one: block b
of G takes passes b, b + G, ... A block's rate is its passes over its main loop's time (prologue end to
loop end). Per launch: the loops' spread (min, median, max, us); how well the launch before's block
rates predict this one's (Pearson r) and the share of blocks on the same SM as then; a replay (the
longest loop had each block taken passes in proportion to its rate the launch before) and the ideal
(every block ending together at this launch's rates); then, of the SMs holding two blocks, the median
time a pass of the block that entered first and of the one that entered second, and on how many SMs
the first to enter was one of the grid's first `SMs` blocks (--sms, default G / 2), and on how many it has
more passes than the other; last, the SMs' ends (the later of an SM's blocks' loop ends, from the launch's
first prologue end: min, median, max) and how well the launch before's predict them by SM id (r_sm).
Session 26's experiments (plots/balance_ab_s26_h100.txt): --split P takes the two-wave schedule of
plots/waves_split_s26.patch instead of the fixed one; a tenth value on a block's line (the build of
plots/roles_s26.patch) is that block's passes, and replaces the schedule's count.
"""
import argparse
import statistics


def load(path):
    launches = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "B" and len(w) >= 12:
                slot, block = int(w[1]), int(w[2])
                launches.setdefault(slot, {})[block] = [int(v) for v in w[3:]]
    return launches


def pearson(a, b):
    if len(a) < 2:
        return float("nan")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (va * vb) ** 0.5 if va > 0 and vb > 0 else float("nan")


def shares_from(rates, total):
    run, acc, out = sum(rates), 0.0, [0]
    for r in rates:
        acc += r
        out.append(round(total * acc / run))
    out[-1] = total
    return [out[i + 1] - out[i] for i in range(len(rates))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--pass", dest="per_pass", type=int, required=True)
    ap.add_argument("--sms", type=int, default=0)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    total = (a.n + a.per_pass - 1) // a.per_pass
    for path in a.files:
        launches = load(path)
        order = sorted(launches, key=lambda s: max(v[6] for v in launches[s].values()))
        if not order:
            print(f"{path}: no stamped launches")
            continue
        grid = max(len(launches[s]) for s in order)
        print(f"== {path}: {len(order)} launches, grid {grid}, {total} passes")
        fixed = [len(range(b, total, grid)) for b in range(grid)]
        if a.split:  # (the two-wave experiment: the first S blocks take `split` passes each, a step of S)
            s_ = a.sms or grid // 2
            region = min(total, a.split * s_)
            fixed = [len(range(b, region, s_)) if b < s_ else len(range(region + b - s_, total, grid - s_))
                     for b in range(grid)]
        prev = None
        rows = []
        for s in order:
            v = launches[s]
            if len(v) != grid:
                continue
            if len(v[0]) > 9 and any(v[b][9] for b in range(grid)):  # (the passes by role, stamped)
                fixed = [v[b][9] for b in range(grid)]
            dur = [(v[b][3] - v[b][2]) / 1000 for b in range(grid)]
            rate = [fixed[b] / dur[b] for b in range(grid)]
            sm = [v[b][8] for b in range(grid)]
            r = {"span": max(dur), "med": statistics.median(dur), "min": min(dur)}
            # The SMs' pairs: which block entered first (stamp 0), and its time a pass against the other's.
            by_sm = {}
            for b in range(grid):
                by_sm.setdefault(sm[b], []).append(b)
            first, second, low_first, pairs, heavy_first = [], [], 0, 0, 0
            sms = a.sms or grid // 2
            for bs in by_sm.values():
                if len(bs) != 2:
                    continue
                pairs += 1
                e, f = sorted(bs, key=lambda b: v[b][0])
                first.append(dur[e] / fixed[e])
                second.append(dur[f] / fixed[f])
                low_first += e < sms
                heavy_first += fixed[e] > fixed[f]
            # Each SM's end: the later of its blocks' loop ends, from the launch's first prologue end.
            t0 = min(v[b][2] for b in range(grid))
            sm_end = {}
            for b in range(grid):
                sm_end[sm[b]] = max(sm_end.get(sm[b], 0.0), (v[b][3] - t0) / 1000)
            r["sm_ends"] = sm_end
            if pairs:
                r["pass1"], r["pass2"], r["low1"] = statistics.median(first), statistics.median(second), f"{low_first}/{pairs}"
                r["heavy1"] = f"{heavy_first}/{pairs}"
            if prev:
                r["r_block"] = pearson(prev["rate"], rate)
                r["same_sm"] = sum(x == y for x, y in zip(prev["sm"], sm)) / grid
                share = shares_from(prev["rate"], total)
                r["replay"] = max(share[b] / rate[b] for b in range(grid))
                # The ideal: every block ends together at the launch's own rates.
                r["ideal"] = total / sum(rate)
            if prev:
                common = sorted(set(prev["sm_end"]) & set(sm_end))
                r["r_sm"] = pearson([prev["sm_end"][q] for q in common], [sm_end[q] for q in common])
            rows.append(r)
            prev = {"rate": rate, "sm": sm, "sm_end": sm_end}
        print(f"{'min':>8} {'median':>8} {'max':>8} {'r_prev':>8} {'same_sm':>8} {'replay':>8} {'ideal':>8} "
              f"{'pass_1st':>8} {'pass_2nd':>8} {'1st_low':>8} {'1st_more':>8} {'sm_min':>7} {'sm_med':>7} {'sm_max':>7} {'r_sm':>6}")
        for r in rows:
            print(f"{r['min']:8.1f} {r['med']:8.1f} {r['span']:8.1f} {r.get('r_block', float('nan')):8.2f} "
                  f"{r.get('same_sm', float('nan')):8.2f} {r.get('replay', float('nan')):8.1f} {r.get('ideal', float('nan')):8.1f} "
                  f"{r.get('pass1', float('nan')):8.2f} {r.get('pass2', float('nan')):8.2f} {r.get('low1', '-'):>8} "
                  f"{r.get('heavy1', '-'):>8} {min(r['sm_ends'].values()):7.1f} {statistics.median(r['sm_ends'].values()):7.1f} "
                  f"{max(r['sm_ends'].values()):7.1f} {r.get('r_sm', float('nan')):6.2f}")
        later = rows[1:]
        if later:
            print(f"medians over launches 2..: max {statistics.median(r['span'] for r in later):.1f} us, replayed shares "
                  f"{statistics.median(r['replay'] for r in later):.1f}, ideal {statistics.median(r['ideal'] for r in later):.1f}")


if __name__ == "__main__":
    main()
