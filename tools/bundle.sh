#!/usr/bin/env bash
# A relocatable bundle of the build for a GPU machine that lacks this machine's libraries (and
# may have another Python): kmeans, test_gpu and libkmeans_gpu.so (stripped), the static core
# and pybind11's headers (the Python module is linked there, against that machine's Python:
# tools/bundle_run.sh), CUDA's static runtime, and the Debian libraries the programs load,
# except glibc's, the C++ runtime's and CUDA's own. xz-compressed, about 25 MB.
#   tools/bundle.sh [BUILD_DIR] [OUT.tar.xz]        (defaults: build, bundle.tar.xz)
set -euo pipefail
build=${1:-build}
out=${2:-bundle.tar.xz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{bin,lib,inc}
cp "$build/kmeans" "$build/tests/test_gpu" "$build/libkmeans_core.a" "$tmp/bin/"
cp -a "$build"/libkmeans_gpu.so* "$tmp/lib/"
strip "$tmp/bin/kmeans" "$tmp/bin/test_gpu"
strip --strip-debug "$tmp/bin/libkmeans_core.a"
cuda=${CUDA_HOME:-/usr/local/cuda}
cp "$cuda/lib64/libcudart_static.a" "$cuda/lib64/libcudadevrt.a" "$tmp/lib/"
cp -r /usr/include/pybind11 "$tmp/inc/"
for b in "$tmp/bin/kmeans" "$tmp/bin/test_gpu"; do ldd "$b" | awk '/=>/ {print $3}'; done | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libcuda|libstdc\+\+|libgcc_s|libcudart|libcublas[^/]*|libnccl)\.so' |
  while read -r l; do cp -L "$l" "$tmp/lib/"; done
tar -C "$tmp" -cf - . | xz -9 -T2 > "$out"
echo "$out: $(du -h "$out" | cut -f1)"
