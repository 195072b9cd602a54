#!/usr/bin/env bash
# On a GPU machine, with a build in build/ (or KM_BIN=folder with the binaries): the GPU
# tests, the sanitizers on the quick test shapes, and the benchmark. Results go to $OUT
# (default ./gpu-results).
#   scripts/gpu_check.sh [tests] [bench] [sanitize]     (default: all three)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
BIN=${KM_BIN:-build/tests}
mkdir -p "$OUT"
steps=${*:-tests bench sanitize}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
for step in $steps; do
  case $step in
    tests)
      for t in test_gpu test_cpu; do
        [[ -x $BIN/$t ]] || continue
        $BIN/$t --gtest_brief=1 2>&1 | tee -a "$OUT/tests.log" | grep -E "FAILED|PASSED|SKIPPED|Failure" | tail -20
      done ;;
    bench)
      python3 scripts/bench_gpu.py --kmeans ${KM_BIN:-build}/kmeans --probe ${KM_BIN:-build}/kmeans-probe --csv "$OUT/bench_gpu.csv" \
        2>&1 | tee "$OUT/bench.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        echo "== compute-sanitizer --tool $tool" | tee -a "$OUT/sanitizer.log"
        KMEANS_TEST_QUICK=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 \
          $BIN/test_gpu --gtest_brief=1 --gtest_filter='*GpuMatchesSeq.Double*:*GpuEmptyCluster.Double*:*GpuExactLabels.*/fused:GpuTensorRecheck.*:GpuKmeansPlusPlus.*' 2>&1 | tail -8 | tee -a "$OUT/sanitizer.log"
        echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/sanitizer.log"
        echo "== compute-sanitizer --tool $tool (gemm)" | tee -a "$OUT/sanitizer.log"
        KMEANS_TEST_QUICK=1 timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 \
          $BIN/test_gpu --gtest_brief=1 --gtest_filter='Kernels/GpuGemm.*' 2>&1 | tail -8 | tee -a "$OUT/sanitizer.log"
        echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/sanitizer.log"
      done ;;
  esac
done
