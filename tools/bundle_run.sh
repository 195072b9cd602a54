#!/usr/bin/env bash
# On the GPU machine, in a checkout of the same commit: unpacks tools/bundle.sh's bundle, links
# the Python module against this machine's python3 (pybind11 from PyTorch's headers when
# present, else the bundle's) in the background, then runs the steps given, logging to $OUT:
#   gtest:FILTER    test_gpu --gtest_filter=FILTER              (timeout $GT, default 300 s)
#   memcheck:FILTER compute-sanitizer memcheck, KMEANS_TEST_QUICK=1  (timeout $MT, default 200 s)
#   py:PATH         pytest PATH with the module and KMEANS_BIN      (timeout $PT, default 300 s)
# and last, the shell command in $EXTRA with $D (the bundle's folder) and the library path set.
#   OUT=results tools/bundle_run.sh bundle.tar.xz gtest:'GpuBatch.*' py:tests/python/test_device_gpu.py
set -uo pipefail
bundle=$1
shift
OUT=${OUT:-bundle-results}
mkdir -p "$OUT"
D=$(mktemp -d)
xz -dc "$bundle" | tar -C "$D" -xf -
export D LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KMEANS_BIN=$D/bin/kmeans
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
git log -1 --format='%h %s' 2>/dev/null | tee -a "$OUT/device.txt"
version=$(sed -n 's/^project(kmeans_gpu VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
ext=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
torchinc=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))' 2>/dev/null)
mkdir -p "$D/py/kmeans_gpu"
cp python/kmeans_gpu/*.py "$D/py/kmeans_gpu/"
L=$D/lib
(g++ -O2 -shared -fPIC -std=c++17 -fvisibility=hidden "-DKMEANS_GPU_VERSION=\"$version\"" -I src -I . \
   ${torchinc:+-I "$torchinc"} -I "$D/inc" -I "$pyinc" -I /usr/local/cuda/include \
   src/python/module.cpp src/python/dlpack_out.cpp -o "$D/py/kmeans_gpu/_core$ext" "$D/bin/libkmeans_core.a" \
   "$L/libgomp.so.1" "$L/libhdf5_serial.so.103" "$L/libopenblas.so.0" "$L/libz.so.1" \
   "$L/libcudart_static.a" "$L/libcudadevrt.a" -lrt -lpthread -ldl >"$OUT/pybuild.log" 2>&1
 echo "python module: exit $?" >>"$OUT/pybuild.log") &
pybuild=$!
for step in "$@"; do
  case $step in
    gtest:*)
      echo "== test_gpu ${step#gtest:}"
      timeout "${GT:-300}" "$D/bin/test_gpu" --gtest_filter="${step#gtest:}" 2>&1 | tee -a "$OUT/gtest.log" |
        grep -E "^\[  (FAILED|PASSED) |Failure|SKIPPED \]|tests ran|Expected|Which is|actual" | head -40 ;;
    memcheck:*)
      echo "== memcheck ${step#memcheck:}"
      KMEANS_TEST_QUICK=1 timeout "${MT:-200}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$D/bin/test_gpu" --gtest_filter="${step#memcheck:}" 2>&1 | tee -a "$OUT/memcheck.log" | tail -6
      echo "memcheck: exit ${PIPESTATUS[0]}" ;;
    py:*)
      wait "$pybuild"
      tail -3 "$OUT/pybuild.log"
      echo "== pytest ${step#py:}"
      PYTHONPATH=$D/py PYTHONUNBUFFERED=1 timeout "${PT:-300}" python3 -m pytest -q -p no:cacheprovider "${step#py:}" \
        2>&1 | tee -a "$OUT/py.log" | tail -15 ;;
    *) echo "unknown step '$step'" >&2 ;;
  esac
done
wait "$pybuild"
if [[ -n "${EXTRA:-}" ]]; then
  echo "== $EXTRA"
  PYTHONPATH=$D/py bash -c "$EXTRA"
fi
