#!/usr/bin/env python3
"""Draws every analysis PNG from the CSV files that scripts/analyze.sh writes into a directory
(default plots/): it reads CSV only, never program output. Each figure carries the GPU, driver,
date and commit of the run it shows (from the CSV's stamp columns).

  kmeans_blocks.csv  -> block_sweep_<config>.png, bottleneck.png, roofline.png
  ceilings.csv       -> (the roofline's ceilings)
  peers.csv          -> peers.png
  real_shapes.csv    -> real_shapes.png (its shapes rows), fused_crossover.png (its crossover rows)
  convergence.csv    -> convergence.png
  mlp.csv, mlp_torch.csv -> mlp_epoch.png, mlp_accuracy.png
  scaling.csv        -> scaling.png
  streaming.csv      -> streaming.png
  batch_grid.csv     -> batch_grid.png (Flash-KMeans's batched grid, bench_batch.py)
  bench_gemm.csv     -> gemm_tflops.png, gemm_pct_cublas.png, gemm_tiles.png,
                        gemm_transfers.png, gemm_cpu_threads.png
A missing CSV, or one without the rows a figure needs, draws no figure.
Usage: plot_all.py [DIR]"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import order_of  # noqa: E402

# The implementations and kernels, and their order, come from the CSV (written in registry order).
LADDER, COLORS, GEMM_ORDER = [], {}, []


def learn_order(kmeans_rows, gemm_rows):
    LADDER[:] = order_of(kmeans_rows, "impl")
    COLORS.clear()
    COLORS.update({name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(LADDER)})
    GEMM_ORDER[:] = [k for k in order_of(gemm_rows, "kernel") if not k.startswith("cpu-")]
PHASES = [("h2d_s", "host→device", "#4c72b0"), ("kernel_s", "kernel", "#55a868"), ("cpu_s", "CPU", "#c44e52"),
          ("d2h_s", "device→host", "#8172b2")]


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def stamp_text(rows):
    r = next((r for r in rows if r.get("gpu")), {})
    return f"{r.get('gpu', '?')} · driver {r.get('driver', '?')} · {r.get('date', '?')} · commit {r.get('commit', '?')}"


def finish(fig, rows, path):
    fig.text(0.99, 0.005, stamp_text(rows), ha="right", va="bottom", fontsize=7, color="0.4")
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print("wrote", path)


def block_sweeps(rows, out):
    ok = [r for r in rows if r.get("status") == "ok"]
    for config in dict.fromkeys(r["config"] for r in ok):
        sel = [r for r in ok if r["config"] == config]
        seq = next((r for r in sel if r["impl"] == "seq"), None)
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
        for impl in LADDER:
            pts = sorted((int(r["block"]), num(r["iter_s"]), num(r["speedup_vs_seq"]))
                         for r in sel if r["impl"] == impl and r["block"])
            if not pts:
                continue
            b = [p[0] for p in pts]
            ax1.plot(b, [p[1] * 1e3 for p in pts], "o-", color=COLORS[impl], label=impl)
            ax2.plot(b, [p[2] for p in pts], "o-", color=COLORS[impl], label=impl)
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xticks([32, 64, 128, 256, 512, 1024], ["32", "64", "128", "256", "512", "1024"])
            ax.set_xlabel("threads per block")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
        if seq:
            ax1.axhline(num(seq["iter_s"]) * 1e3, color=COLORS["seq"], ls="--", label="seq (1 core)")
        omp = next((r for r in sel if r["impl"] == "omp"), None)
        if omp:
            ax1.axhline(num(omp["iter_s"]) * 1e3, color=COLORS["omp"], ls=":", label=f"omp ({omp['threads']} threads)")
            if num(omp["speedup_vs_seq"]):
                ax2.axhline(num(omp["speedup_vs_seq"]), color=COLORS["omp"], ls=":", label="omp")
        ax2.axhline(1, color=COLORS["seq"], ls="--", label="seq = 1")
        ax1.set_ylabel("time per iteration (ms, log)")
        ax2.set_ylabel("speedup over seq (log)")
        ax1.set_title("time per iteration")
        ax2.set_title("speedup over seq")
        ax1.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
        r0 = sel[0]
        fig.suptitle(f"k-means block-size sweep: {r0['objects']} objects × {r0['coords']} coords, "
                     f"K={r0['clusters']}, double (256 MB)")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, rows, os.path.join(out, f"block_sweep_{config}.png"))


def at_block(rows, block="128"):
    return [r for r in rows if r.get("status") == "ok" and (r["block"] in ("", block))]


def bottleneck(rows, out):
    sel = at_block(rows)
    configs = list(dict.fromkeys(r["config"] for r in sel))
    if not configs:
        return
    fig, axes = plt.subplots(2, len(configs), figsize=(6.5 * len(configs), 8), squeeze=False)
    for col, config in enumerate(configs):
        data = {r["impl"]: r for r in sel if r["config"] == config and r["impl"] != "seq"}
        names = [n for n in LADDER if n in data]
        for row, relative in enumerate((False, True)):
            ax = axes[row][col]
            bottom = [0.0] * len(names)
            for key, label, color in PHASES:
                vals = []
                for n in names:
                    v = num(data[n][key]) or 0.0
                    if relative:
                        tot = sum(num(data[n][k]) or 0.0 for k, _, _ in PHASES) or 1.0
                        v = 100 * v / tot
                    else:
                        v *= 1e3
                    vals.append(v)
                ax.bar(names, vals, bottom=bottom, color=color, label=label)
                bottom = [b + v for b, v in zip(bottom, vals)]
            if not relative:
                for i, n in enumerate(names):
                    ax.text(i, bottom[i], f"{num(data[n]['iter_s']) * 1e3:.2f}", ha="center", va="bottom", fontsize=7)
                ax.set_ylabel("ms per iteration (block 128; omp: CPU threads)")
                ax.set_title(f"{config}: where an iteration's time goes")
            else:
                ax.set_ylabel("share of the iteration (%)")
                ax.set_title(f"{config}: shares")
                ax.set_ylim(0, 100)
            ax.tick_params(axis="x", rotation=30)
            ax.grid(True, axis="y", alpha=0.3)
        axes[0][col].legend(fontsize=8)
    fig.suptitle("Bottleneck analysis: host→device, kernel, CPU and device→host time per iteration (double)")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "bottleneck.png"))


def roofline(rows, ceilings, out):
    sel = [r for r in at_block(rows) if r["impl"] not in ("seq", "omp")]
    if not sel or not ceilings:
        return
    c = ceilings[0]
    bw = num(c["read_bandwidth_gbs"])
    peak = num(c["fp64_gemm_tflops"]) * 1e3
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    xs = [num(r["intensity"]) for r in sel]
    lo, hi = min(xs) / 4, max(max(xs) * 8, peak / bw * 4)
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(bw * x, peak) for x in grid], "k-", lw=1.5,
            label=f"roof: read {bw:.0f} GB/s, cuBLAS DGEMM {peak / 1e3:.1f} TFLOP/s (measured)")
    markers = {"256MB-d2-k16": "o", "256MB-d16-k16": "s", "256MB-d32-k64": "D"}
    for r in sel:
        ax.scatter(num(r["intensity"]), num(r["gflops"]), color=COLORS.get(r["impl"], "k"),
                   marker=markers.get(r["config"], "^"), s=55, zorder=3)
    for impl in order_of(sel, "impl"):
        ax.scatter([], [], color=COLORS[impl], label=impl)
    for cfg, mk in markers.items():
        ax.scatter([], [], color="0.5", marker=mk, label=cfg)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop per byte of the memory floor: objects read once + labels)")
    ax.set_ylabel("achieved GFLOP/s (whole iteration, double)")
    ax.set_title("Roofline view of the k-means ladder (block 128)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "roofline.png"))


def peers(rows, out):
    if not rows:
        return
    configs = list(dict.fromkeys(r["config"] for r in rows))
    fig, axes = plt.subplots(1, len(configs), figsize=(6.5 * len(configs), 4.8), squeeze=False)
    for ax, config in zip(axes[0], configs):
        sel = [r for r in rows if r["config"] == config]
        names = [r["peer"] for r in sel]
        vals = [num(r["iter_s"]) * 1e3 for r in sel]
        colors = ["#55a868" if "kmeans" in n else "#8c8c8c" for n in names]
        ax.barh(names, vals, color=colors)
        for i, (v, r) in enumerate(zip(vals, sel)):
            ax.text(v, i, f" {v:.3g} ms ({num(r['vs_fused']):.3g}×)", va="center", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("time per iteration (ms, log)")
        ax.invert_yaxis()
        ax.set_title(f"{config}: same data, init, iterations")
        ax.set_xlim(min(vals) / 2, max(vals) * 20)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.suptitle("Peers: this program vs its peers on the GPU and the CPU — inertia agreement in the CSV")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "peers.png"))


# Flash-KMeans per iteration (ms) on an H200, measured outside this suite: reference marks for a
# real_shapes.csv that holds no Flash-KMeans rows of its own (bench_real_shapes.py --flash adds them).
FLASH_REFERENCE = {(262144, 128, 1024): {"tf32": 0.717, "fp64": 27.0}, (4194304, 128, 1024): {"tf32": 6.24, "fp64": 424},
                   (1000000, 16, 65536): {"tf32": 34.1, "fp64": 85.4}, (1000000, 128, 128): {"tf32": 0.686, "fp64": 1.88},
                   (60000, 784, 256): {"tf32": 1.90, "fp64": 3.02}}


def real_shapes(rows, out):
    """Per-iteration time on the real-data shapes (bench_real_shapes.py), and fused's two paths
    across the crossover."""
    shapes = [r for r in rows if r.get("section") == "shapes"]
    if shapes:
        keys = list(dict.fromkeys((int(r["objects"]), int(r["coords"]), int(r["clusters"])) for r in shapes))
        series = [("fused", "double", "#55a868"), ("fused (DMMA keys)", "double", "#8fd19e"),
                  ("floor (cuBLAS DGEMM)", "double", "#c0c0c0"), ("fused", "float", "#4c72b0"),
                  ("PyTorch", "float32", "#dd8452"), ("PyTorch", "float64", "#937860")]
        series = [s for s in series if any(r["who"] == s[0] and r["precision"] == s[1] for r in shapes)]
        fig, ax = plt.subplots(figsize=(11, 5))
        width = 0.8 / len(series)
        for si, (who, prec, color) in enumerate(series):
            for ki, key in enumerate(keys):
                r = next((r for r in shapes if (int(r["objects"]), int(r["coords"]), int(r["clusters"])) == key
                          and r["who"] == who and r["precision"] == prec), None)
                if r:
                    ax.bar(ki + (si - (len(series) - 1) / 2) * width, num(r["ms_per_iter"]), width, color=color,
                           label=f"{who} {prec}" if ki == 0 else None)
        measured = any(r["who"] == "Flash-KMeans" for r in shapes)
        labelled = set()
        for ki, key in enumerate(keys):
            for mode, marker in (("tf32", "v"), ("fp64", "^")):
                if measured:
                    r = next((r for r in shapes if (int(r["objects"]), int(r["coords"]), int(r["clusters"])) == key
                              and r["who"] == "Flash-KMeans" and r["precision"] == mode), None)
                    value, label = (num(r["ms_per_iter"]) if r else None), f"Flash-KMeans {mode} (same run)"
                else:
                    value, label = FLASH_REFERENCE.get(key, {}).get(mode), f"Flash-KMeans {mode} (reference H200 run)"
                if value is not None:
                    ax.plot(ki, value, marker, color="k", label=None if label in labelled else label)
                    labelled.add(label)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"N={n:,}\nd={d}, K={k}" for n, d, k in keys], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms per iteration (log)")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        ax.set_title("Real-data shapes: fused's tensor path (labels identical to seq's) against its floor and peers")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, shapes, os.path.join(out, "real_shapes.png"))
    cross = [r for r in rows if r.get("section") == "crossover"]
    if cross:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, prec in zip(axes, ("double", "float")):
            for path, style in (("fused one-pass", "-o"), ("fused tensor", "--s")):
                for d, color in zip((2, 8, 16, 32), ("#4c72b0", "#55a868", "#c44e52", "#8172b2")):
                    sel = sorted((int(r["clusters"]), num(r["ms_per_iter"])) for r in cross
                                 if r["who"] == path and r["precision"] == prec and int(r["coords"]) == d)
                    if sel:
                        ax.plot([k for k, _ in sel], [v for _, v in sel], style, color=color, ms=4,
                                label=f"{path.split()[1]}, d={d}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("K")
            ax.set_ylabel("ms per iteration (N = 2^20)")
            ax.set_title(f"fused's paths, {prec}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, ncol=2)
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, cross, os.path.join(out, "fused_crossover.png"))


def gemm_plots(rows, out):
    ok = [r for r in rows if r.get("status") == "ok"]
    size = [r for r in ok if r["sweep"] == "size" and r["op"] == "nn"]
    if size:
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        for ax, prec in zip(axes, ("float", "double")):
            for kern in GEMM_ORDER:
                pts = sorted((int(r["m"]), num(r["tflops"]), r["math"]) for r in size
                             if r["kernel"] == kern and r["precision"] == prec)
                if pts:
                    lab = kern + (" (TF32)" if "tf32" in pts[0][2] else "")
                    pow2 = [p for p in pts if p[0] & (p[0] - 1) == 0]
                    odd = [p for p in pts if p[0] & (p[0] - 1) != 0]
                    line, = ax.plot([p[0] for p in pow2], [p[1] for p in pow2], "o-", label=lab,
                                    lw=2.5 if kern == "cublas" else 1.5)
                    ax.plot([p[0] for p in odd], [p[1] for p in odd], "D", mfc="none", color=line.get_color())
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("m = n = k (hollow diamonds: 1000 and 3000, not multiples of the tiles)")
            ax.set_ylabel("TFLOP/s (kernel only, log)")
            ax.set_title(f"C = A·B, {prec}")
            ax.grid(True, which="both", alpha=0.3)
        axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.suptitle("GEMM: rate versus size for every kernel (hybrid: whole product with transfers)")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, rows, os.path.join(out, "gemm_tflops.png"))

        fig, ax = plt.subplots(figsize=(11, 5))
        at = [r for r in ok if r["sweep"] == "size" and r["m"] == "4096" and r["kernel"] not in ("cublas", "hybrid")]
        kerns = [k for k in GEMM_ORDER if any(r["kernel"] == k for r in at)]
        width = 0.13
        combos = [(p, o) for p in ("float", "double") for o in ("nn", "tn", "nt")]
        for j, (prec, op) in enumerate(combos):
            vals = []
            for kern in kerns:
                r = next((r for r in at if r["kernel"] == kern and r["precision"] == prec and r["op"] == op), None)
                vals.append(num(r["pct_of_reference"]) if r else 0)
            ax.bar([i + (j - 2.5) * width for i in range(len(kerns))], vals, width, label=f"{prec} {op}")
        ax.axhline(100, color="k", lw=1)
        ax.set_xticks(range(len(kerns)), kerns)
        ax.set_yscale("log")
        ax.set_ylabel("% of cuBLAS in the same run (log)")
        ax.set_title("GEMM at 4096: percent of cuBLAS in the same run (tensor float = TF32 against cuBLAS FP32)")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, rows, os.path.join(out, "gemm_pct_cublas.png"))

        fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
        for ax, prec in zip(axes, ("float", "double")):
            sel = [r for r in ok if r["sweep"] == "size" and r["m"] == "4096" and r["op"] == "nn"
                   and r["precision"] == prec and r["kernel"] != "hybrid"]
            names = [k for k in GEMM_ORDER if any(r["kernel"] == k for r in sel)]
            bottom = [0.0] * len(names)
            for key, label, color in (PHASES[0], PHASES[1], PHASES[3]):
                vals = [num(next(r for r in sel if r["kernel"] == n)[key]) * 1e3 for n in names]
                ax.bar(names, vals, bottom=bottom, color=color, label=label)
                bottom = [b + v for b, v in zip(bottom, vals)]
            ax.set_yscale("log")
            ax.set_ylabel("ms (log; bars stacked)")
            ax.set_title(f"4096³ {prec}: transfers versus compute")
            ax.tick_params(axis="x", rotation=30)
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, rows, os.path.join(out, "gemm_transfers.png"))

    tiles = [r for r in ok if r["sweep"] == "tile"]
    if tiles:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, prec in zip(axes, ("float", "double")):
            for kern in order_of(tiles, "kernel"):
                pts = sorted((int(r["tile"]), num(r["tflops"])) for r in tiles
                             if r["kernel"] == kern and r["precision"] == prec)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=kern)
            ax.set_xscale("log", base=2)
            ax.set_xticks([4, 8, 16, 32], ["4", "8", "16", "32"])
            ax.set_yscale("log")
            ax.set_xlabel("tile W (W×W threads per block)")
            ax.set_ylabel("TFLOP/s (log)")
            ax.set_title(f"2048³ {prec}, C = A·B")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle("GEMM tile-size sweep")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, rows, os.path.join(out, "gemm_tiles.png"))

    thr = [r for r in ok if r["sweep"] == "threads" and r["op"] == "nn"]
    if thr:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, prec in zip(axes, ("float", "double")):
            for kern in ("cpu-omp", "cpu-blocked", "cpu-blas"):
                pts = sorted((int(r["threads"]), num(r["tflops"]) * 1e3) for r in thr
                             if r["kernel"] == kern and r["precision"] == prec)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=kern)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("CPU threads")
            ax.set_ylabel("GFLOP/s (log)")
            ax.set_title(f"1024³ {prec}, C = A·B")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        core = next((r["reference"] for r in thr if r["kernel"] == "cpu-blas"), "openblas")
        fig.suptitle(f"GEMM on the CPU: thread scaling ({core})")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        finish(fig, rows, os.path.join(out, "gemm_cpu_threads.png"))


def convergence(rows, out):
    """Inertia of every iteration (from the assignment pass) by init, one panel per implementation."""
    if not rows:
        return
    impls = order_of(rows, "impl")
    fig, axes = plt.subplots(1, len(impls), figsize=(6.5 * len(impls), 4.5), squeeze=False)
    for ax, impl in zip(axes[0], impls):
        sel = [r for r in rows if r["impl"] == impl]
        for init in order_of(sel, "init"):
            pts = [(int(r["iteration"]), num(r["inertia"])) for r in sel if r["init"] == init]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, label=f"init {init}")
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel("inertia of the iteration's assignment (log)")
        ax.set_title(f"{impl}: {sel[0]['device']}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Convergence: blobs 200,000 x 16, K = 64")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "convergence.png"))


def mlp_plots(rows, torch_rows, out):
    """Time per epoch by kernel, stacked by phase (the last epoch of the phase-timed runs), with
    PyTorch's epoch for the same network; test accuracy against epoch for the 10-epoch runs."""
    if not rows:
        return
    timed = [r for r in rows if r["run"].startswith("2 epochs") and r["device"] != "cpu"]
    ladder = ["cublas", "naive", "coalesced", "shared", "shared-static", "regblock", "tensor"]
    phases = ["h2d", "nn", "tn", "nt", "elementwise", "d2h"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), squeeze=False)
    for ax, prec in zip(axes[0], ("float", "double")):
        sel = [r for r in timed if r["precision"] == prec]
        kernels = sorted(order_of(sel, "kernel"), key=lambda k: ladder.index(k) if k in ladder else len(ladder))
        last = {k: max((r for r in sel if r["kernel"] == k), key=lambda r: int(r["epoch"])) for k in kernels}
        bottom = [0.0] * len(kernels)
        for ph in phases:
            vals = [num(last[k][ph]) * 1e3 for k in kernels]
            ax.bar(kernels, vals, bottom=bottom, label=ph)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.plot(kernels, [num(last[k]["seconds"]) * 1e3 for k in kernels], "k_", ms=18, label="epoch (wall)")
        for feed, style in (("host", "--"), ("resident", ":")):
            t = [num(r["seconds"]) for r in torch_rows if r["precision"] == prec and r["feed"] == feed][1:]
            if t:
                t.sort()
                ax.axhline(t[len(t) // 2] * 1e3, color="crimson", ls=style, label=f"PyTorch ({feed} batches)")
        ax.set_ylabel("ms per epoch")
        ax.set_title(f"{prec}: 784-512-256-10, batch {last[kernels[0]]['batch']}, {last[kernels[0]]['device']}")
        ax.tick_params(axis="x", rotation=30)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("mlp: time per epoch by GEMM kernel, split by phase (GPU kernels; phases from events)")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "mlp_epoch.png"))

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for r0 in [r for r in rows if r["run"].startswith("10 epochs") and r["epoch"] == "1"]:
        sel = [r for r in rows if r["run"] == r0["run"] and r["kernel"] == r0["kernel"] and
               r["precision"] == r0["precision"]]
        ax.plot([int(r["epoch"]) for r in sel], [100 * num(r["test_accuracy"]) for r in sel], "o-", ms=3,
                label=f"{r0['kernel']} {r0['precision']}")
    for prec in ("float", "double"):
        sel = [r for r in torch_rows if r["precision"] == prec and r["feed"] == "resident"]
        ax.plot([int(r["epoch"]) for r in sel], [100 * num(r["test_accuracy"]) for r in sel], "x--", ms=4,
                label=f"PyTorch {prec}")
    ax.axhline(88, color="0.5", ls=":", label="target 88%")
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("mlp on Fashion-MNIST: the same weights, batches and rule in every run")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "mlp_accuracy.png"))


def scaling(rows, out):
    """kmeans --gpus=N: time per iteration (split into kernel, allreduce and the rest) and the
    parallel efficiency against the GPU count, one column per configuration, both precisions."""
    rows = [r for r in rows if not r.get("error")]
    if not rows:
        return
    configs = order_of(rows, "config")
    fig, axes = plt.subplots(2, len(configs), figsize=(6.2 * len(configs), 8), squeeze=False)
    for col, config in enumerate(configs):
        ax_t, ax_e = axes[0][col], axes[1][col]
        for prec, marker in (("double", "o"), ("float", "s")):
            sel = sorted((r for r in rows if r["config"] == config and r["precision"] == prec),
                         key=lambda r: int(r["gpus"]))
            if not sel:
                continue
            g = [int(r["gpus"]) for r in sel]
            ax_t.plot(g, [num(r["iteration_s"]) * 1e3 for r in sel], marker + "-", label=f"{prec}: iteration")
            red = [(x, num(r["allreduce_s"]) * 1e3) for x, r in zip(g, sel) if num(r["allreduce_s"])]
            ax_t.plot([p[0] for p in red], [p[1] for p in red], marker + ":", label=f"{prec}: allreduce")
            ax_e.plot(g, [num(r["efficiency"]) for r in sel], marker + "-", label=prec)
            for x, r in zip(g, sel):
                ax_e.annotate(f"{num(r['speedup']):.2f}x", (x, num(r["efficiency"])), fontsize=7,
                              textcoords="offset points", xytext=(4, 4))
        g_all = sorted({int(r["gpus"]) for r in rows if r["config"] == config})
        ax_t.set_xscale("log", base=2)
        ax_t.set_yscale("log")
        ax_t.set_xticks(g_all, [str(x) for x in g_all])
        ax_t.set_ylabel("ms per iteration (median)")
        ax_t.set_title(f"{config}: fused, {sel[0]['path']} path")
        ax_t.grid(True, which="both", alpha=0.3)
        ax_t.legend(fontsize=7)
        ax_e.axhline(1.0, color="0.5", ls=":")
        ax_e.axhline(0.9, color="crimson", ls="--", lw=0.8, label="target (3.6x on 4)")
        ax_e.set_xticks(g_all, [str(x) for x in g_all])
        ax_e.set_ylim(0.5, 1.1)
        ax_e.set_xlabel("GPUs (rows split, partials all-reduced with NCCL)")
        ax_e.set_ylabel("efficiency = speed-up / GPUs")
        ax_e.grid(True, alpha=0.3)
        ax_e.legend(fontsize=7)
    fig.suptitle("Strong scaling of kmeans --gpus=N (the same data and result on every count)")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "scaling.png"))


def streaming(rows, out):
    """Out of core: time per iteration against the data's size, across the device-memory cap
    (in memory / streamed), with the link floor (bytes / measured pinned h2d bandwidth)."""
    rows = [r for r in rows if not r.get("error")]
    if not rows:
        return
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(13, 4.8))
    for impl, marker in zip(order_of(rows, "impl"), "os^v"):
        sel = sorted((r for r in rows if r["impl"] == impl), key=lambda r: num(r["data_gb"]))
        ax.plot([num(r["data_gb"]) for r in sel], [num(r["iteration_s"]) * 1e3 for r in sel], marker + "-", label=impl)
        for r in sel:
            if r["streamed"] == "1":
                ax.annotate("streamed", (num(r["data_gb"]), num(r["iteration_s"]) * 1e3), fontsize=7,
                            textcoords="offset points", xytext=(4, -10))
        st = [r for r in sel if r["streamed"] == "1"]
        ax_r.plot([num(r["data_gb"]) for r in st], [num(r["floor_ratio"]) for r in st], marker + "-", label=impl)
    sel = sorted(rows, key=lambda r: num(r["data_gb"]))
    ax.plot([num(r["data_gb"]) for r in sel], [num(r["link_floor_s"]) * 1e3 for r in sel], "k--", lw=1,
            label=f"link floor (bytes / {num(sel[0]['h2d_gbs']):.0f} GB/s pinned h2d)")
    cap = sel[0]["cap"]
    ax.axvline(num(cap.rstrip("G")) * 1.073741824 if cap.endswith("G") else 0, color="0.5", ls=":",
               label=f"--device-memory={cap}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("data (GB of float)")
    ax.set_ylabel("ms per iteration (median)")
    ax.set_title(f"d = {sel[0]['coords']}, K = {sel[0]['clusters']}, {sel[0]['gpu']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax_r.axhline(1.25, color="crimson", ls="--", lw=0.8, label="target 1.25x")
    ax_r.axhline(1.0, color="0.5", ls=":")
    ax_r.set_xscale("log", base=2)
    ax_r.set_ylim(0.5, 1.6)
    ax_r.set_xlabel("data (GB of float), streamed runs")
    ax_r.set_ylabel("iteration / link floor")
    ax_r.grid(True, which="both", alpha=0.3)
    ax_r.legend(fontsize=7)
    fig.suptitle("Out of core: rows streamed from pinned host memory when they exceed the device memory")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "streaming.png"))


def batch_grid(rows, out):
    """Flash-KMeans's headline grid: ms per iteration of the whole batch, ours and Flash's, per
    (B, K) against N, Euclidean and cosine; the labels Flash gets wrong in the title rows."""
    if not rows:
        return
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for (b, k), color in zip(sorted({(int(r["B"]), int(r["K"])) for r in rows}),
                                 ["#4c72b0", "#55a868", "#c44e52", "#8172b2"]):
            sel = sorted((r for r in rows if r["metric"] == metric and int(r["B"]) == b and int(r["K"]) == k),
                         key=lambda r: int(r["N"]))
            n = [int(r["N"]) for r in sel]
            ax.plot(n, [num(r["ours_ms_per_iter"]) for r in sel], "-o", color=color, label=f"ours B={b} K={k}")
            if sel and sel[0].get("flash_ms_per_iter"):
                ax.plot(n, [num(r["flash_ms_per_iter"]) for r in sel], "--x", color=color, label=f"Flash B={b} K={k}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N objects per problem (d = 128, fp16 data)")
        ax.set_ylabel("ms per iteration of the batch (log)")
        wrong = sum(int(num(r.get("flash_wrong_labels")) or 0) for r in rows if r["metric"] == metric)
        ax.set_title(f"{metric}: Flash's labels from the first centroids wrong: {wrong} in all")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.suptitle("Batched problems: ours (iterations together, one CUDA graph each; exact labels) vs Flash-KMeans")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    finish(fig, rows, os.path.join(out, "batch_grid.png"))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots")
    blocks = read(os.path.join(d, "kmeans_blocks.csv"))
    gemm = read(os.path.join(d, "bench_gemm.csv"))
    learn_order(blocks, gemm)
    block_sweeps(blocks, d)
    bottleneck(blocks, d)
    roofline(blocks, read(os.path.join(d, "ceilings.csv")), d)
    peers(read(os.path.join(d, "peers.csv")), d)
    gemm_plots(gemm, d)
    convergence(read(os.path.join(d, "convergence.csv")), d)
    real_shapes(read(os.path.join(d, "real_shapes.csv")), d)
    mlp_plots(read(os.path.join(d, "mlp.csv")), read(os.path.join(d, "mlp_torch.csv")), d)
    scaling(read(os.path.join(d, "scaling.csv")), d)
    streaming(read(os.path.join(d, "streaming.csv")), d)
    batch_grid(read(os.path.join(d, "batch_grid.csv")), d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
