#!/usr/bin/env bash
# Experiment builds of kmeans with parts of the tensor-core delta kernel switched off at compile
# time (6_fused_delta.cuh: KMEANS_ABLATE), to time what each part costs. Their labels are WRONG:
# timing only, never for use. Needs a configured, built tree (default build/); writes
# OUT/kmeans_ablN for each N given (bitmasks; see the kernel's comment), two compiles at a time.
# Usage: scripts/ablate.sh OUT N [N...]   (BUILD=dir for another tree)
set -euo pipefail
out=$1; shift
build=$(realpath "${BUILD:-build}")
mkdir -p "$out"; out=$(realpath "$out")
compile=$(cd "$build" && ninja -t commands kmeans | grep -F "gpu/fused.cu -o " | tail -1)
link=$(cd "$build" && ninja -t commands kmeans | tail -1)
build_one() {
  local n=$1 dir=$out/abl$1
  mkdir -p "$dir"
  (cd "$build" && eval "${compile/ -o CMakeFiles\/kmeans_core.dir\/src\/kmeans\/gpu\/fused.cu.o/ -DKMEANS_ABLATE=$n -o $dir/fused.cu.o}")
  cp "$build/libkmeans_core.a" "$dir/libkmeans_core.a"
  (cd "$dir" && ar rc libkmeans_core.a fused.cu.o)  # (the member's name in the archive is fused.cu.o)
  local l=${link/ libkmeans_core.a / $dir\/libkmeans_core.a }
  l=${l/ -o kmeans / -o $out\/kmeans_abl$n }
  (cd "$build" && eval "$l")
  echo "built $out/kmeans_abl$n"
}
pids=()
for n in "$@"; do
  build_one "$n" &
  pids+=($!)
  if (( ${#pids[@]} >= 2 )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait
