#!/usr/bin/env bash
# One-step set-up for a Debian 12 machine with the CUDA toolkit: installs the missing
# Debian packages, configures and builds (incrementally), then either runs kmeans or the
# whole test suite. Idempotent; when nothing changed it only re-checks and exits fast.
#
#   scripts/setup.sh run [kmeans options...]   build, then run kmeans (default: its built-in lab problem)
#   scripts/setup.sh test                      build, then run every test (GPU tests skip without a GPU)
#   scripts/setup.sh build                     build only
#   scripts/setup.sh package                   build, then make build/kmeans-gpu_<version>_amd64.deb
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
[ $# -gt 0 ] && shift

packages=(cmake ninja-build g++ pkg-config libcli11-dev libhdf5-dev libopenblas-dev libgtest-dev
          python3 python3-numpy python3-sklearn python3-h5py nlohmann-json3-dev
          python3-dev pybind11-dev python3-pytest python3-pip python3-venv python3-setuptools python3-wheel
          dataset-fashion-mnist zlib1g-dev libopenmpi-dev openmpi-bin python3-mpi4py)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if ! command -v nvcc >/dev/null; then
  for dir in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$dir/nvcc" ] && export PATH="$dir:$PATH" && break
  done
fi
command -v nvcc >/dev/null || { echo "setup: the CUDA toolkit (nvcc) was not found; install it first" >&2; exit 1; }

# CI builds with warnings as errors; a user's newer compiler should not break their build.
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKMEANS_WERROR=$werror >/dev/null
cmake --build build -j "$(nproc)" >&2

case "$mode" in
  run) exec build/kmeans "$@" ;;
  test) cd build && exec ctest --output-on-failure -j "$(nproc)" ;;
  build) ;;
  package) cd build && exec cpack -G DEB ;;
  *) echo "usage: scripts/setup.sh run [kmeans options] | test | build | package" >&2; exit 2 ;;
esac
