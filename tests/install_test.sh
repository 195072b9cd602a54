#!/usr/bin/env bash
# cmake --install into a scratch prefix, then from there: the programs, the Python package, and
# the example program (examples/cpp) configured with find_package(kmeans_gpu) and built against
# the installed library; pip install into a virtual environment; the .deb unpacked.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [PYTHON]
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) python=${3:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
"$prefix/bin/kmeans" --help > /dev/null
"$prefix/bin/kmeans" --impl=omp --objects=2000 --coords=4 --clusters=4 --loops=3 --quiet --report=json > "$tmp/run.json"
grep -q '"inertia"' "$tmp/run.json"
"$prefix/bin/gemm" --help > /dev/null
"$prefix/bin/mlp" --help > /dev/null
test -f "$prefix/include/kmeans_gpu/kmeans.hpp"
# Only the API is exported from the library.
if nm -D --defined-only "$prefix"/lib/libkmeans_gpu.so | grep -E ' [TW] ' | grep -v kmeans_gpu > "$tmp/extra.txt"; then
  echo "symbols beyond the API exported:"; head "$tmp/extra.txt"; exit 1
fi
if [ -d "$build/python/kmeans_gpu" ]; then
  (cd "$tmp" && PYTHONPATH="$prefix/lib/python3/dist-packages" "$python" -c \
    'import kmeans_gpu, numpy as np; m = kmeans_gpu.KMeans(3, impl="omp", n_init=1).fit(np.random.default_rng(0).random((300, 2))); assert m.labels_.shape == (300,); print("python ok", kmeans_gpu.__file__)')
fi
# pip install from the checkout into a virtual environment (offline, Debian's setuptools; the
# extension from this build), then the Python suite against the installed copy.
if [ -d "$build/python/kmeans_gpu" ]; then
  "$python" -m venv --system-site-packages "$tmp/venv"
  KMEANS_BUILD_DIR="$build" "$tmp/venv/bin/pip" install -q --no-build-isolation --no-deps --no-index "$src" \
    > "$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
  (cd "$tmp" && env -u PYTHONPATH KMEANS_BIN="$build/kmeans" "$tmp/venv/bin/python" -c \
    'import kmeans_gpu, kmeans_gpu._ranks, sys; assert kmeans_gpu.__file__.startswith(sys.prefix), kmeans_gpu.__file__')
  (cd "$tmp" && env -u PYTHONPATH KMEANS_BIN="$build/kmeans" "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider \
    --ignore="$src/tests/python/test_mpi.py" "$src/tests/python" | tail -1)
fi
# The .deb (cpack -G DEB), unpacked into a scratch root: its programs and Python package run there.
(cd "$build" && cpack -G DEB -B "$tmp/deb" > "$tmp/cpack.log") || { cat "$tmp/cpack.log"; exit 1; }
dpkg-deb -x "$tmp"/deb/kmeans-gpu_*_amd64.deb "$tmp/root"
dpkg-deb -f "$tmp"/deb/kmeans-gpu_*_amd64.deb Depends | grep -q libhdf5
"$tmp/root/usr/bin/kmeans" --help > /dev/null
"$tmp/root/usr/bin/kmeans" --impl=omp --objects=2000 --coords=4 --clusters=4 --loops=3 --quiet --report=json |
  grep -q '"inertia"'
if [ -d "$build/python/kmeans_gpu" ]; then
  (cd "$tmp" && env PYTHONPATH="$tmp/root/usr/lib/python3/dist-packages" "$python" -c \
    'import kmeans_gpu; assert "/root/usr/" in kmeans_gpu.__file__; print("deb python ok")')
fi
cmake -S "$src/examples/cpp" -B "$tmp/example" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/configure.log"
cmake --build "$tmp/example" > "$tmp/build.log"
"$tmp/example/cluster"
