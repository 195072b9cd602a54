#!/usr/bin/env bash
# The analysis suite in one command, on a GPU machine (about 10 minutes on an H100/H200):
#   k-means block-size sweep + bottleneck + roofline data, peers (PyTorch, scikit-learn), the
#   real-data shapes and fused's crossover, the GEMM sweep (quick setting), then every PNG.
#     scripts/analyze.sh [OUTDIR]            (default plots/; builds with scripts/setup.sh build
#                                             unless KM_BIN names a folder with the binaries)
#     scripts/analyze.sh --plots-only [DIR]  redraw the PNGs from committed CSV (no GPU needed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${KM_PYTHON:-python3}
if [[ "${1:-}" == "--plots-only" ]]; then
  exec "$PY" scripts/plot_all.py "${2:-plots}"
fi
OUT=${1:-plots}
mkdir -p "$OUT"
if [[ -z "${KM_BIN:-}" ]]; then
  scripts/setup.sh build
  KM_BIN=build
fi
export KM_COMMIT=${KM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$SECONDS
"$PY" scripts/analyze_kmeans.py --bin "$KM_BIN" --csv "$OUT/kmeans_blocks.csv" --ceilings "$OUT/ceilings.csv" \
  | tee "$OUT/analyze_kmeans.log"
echo "# k-means sweep: $((SECONDS - start)) s"
"$PY" scripts/convergence.py --kmeans "$KM_BIN/kmeans" --impls omp,fused --csv "$OUT/convergence.csv" |
  tee "$OUT/convergence.log"
"$PY" scripts/peers.py --bin "$KM_BIN" --csv "$OUT/peers.csv" | tee "$OUT/peers.log"
echo "# peers: $((SECONDS - start)) s"
# The real-data shapes (fused's tensor path against its floor and PyTorch; Flash-KMeans when
# FLASH_KMEANS names its package folder), k-means++, and fused's path crossover.
"$PY" scripts/bench_real_shapes.py --bin "$KM_BIN" --csv "$OUT/real_shapes.csv" --kmeanspp --crossover \
  ${FLASH_KMEANS:+--flash "$FLASH_KMEANS"} | tee "$OUT/real_shapes.log"
echo "# real-data shapes: $((SECONDS - start)) s"
"$PY" scripts/bench_gemm.py --gemm "$KM_BIN/gemm" --quick --csv "$OUT/bench_gemm.csv" | tee "$OUT/bench_gemm.log" ||
  echo "# the GEMM sweep reported failed runs (see bench_gemm.csv, column status)"
echo "# gemm sweep: $((SECONDS - start)) s"
"$PY" scripts/bench_mlp.py --mlp "$KM_BIN/mlp" --csv "$OUT/mlp.csv" | tee "$OUT/bench_mlp.log"
python3 scripts/mlp_torch.py --mlp "$KM_BIN/mlp" --precision float,double --out "$OUT/mlp_torch.csv" | tee "$OUT/mlp_torch.log" ||
  echo "# the PyTorch reference did not run (needs torch and a GPU)"
echo "# mlp: $((SECONDS - start)) s"
# Scale-out: strong scaling over this machine's GPUs (when it has several) and the out-of-core
# sweep (KM_STREAM_SIZES, default 2,4,8,16 GB of float with --device-memory=6G; the committed run
# is 4..60 GB with 16G: scripts/bench_streaming.py --cap 16G --sizes-gb 4,8,16,32,60).
gpus=$(nvidia-smi -L | wc -l)
if (( gpus > 1 )); then
  counts=1; g=2; while (( g <= gpus )); do counts="$counts,$g"; g=$((g * 2)); done
  NCCL_NVLS_ENABLE=0 "$PY" scripts/bench_scaling.py --kmeans "$KM_BIN/kmeans" --gpus "$counts" --csv "$OUT/scaling.csv" |
    tee "$OUT/scaling.log"
fi
"$PY" scripts/bench_streaming.py --bin "$KM_BIN" --cap 6G --sizes-gb "${KM_STREAM_SIZES:-2,4,8,16}" \
  --csv "$OUT/streaming.csv" | tee "$OUT/streaming.log"
echo "# scale-out: $((SECONDS - start)) s"
"$PY" scripts/plot_all.py "$OUT"
echo "# analysis done in $((SECONDS - start)) s -> $OUT"
