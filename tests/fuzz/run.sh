#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs them.
#   tests/fuzz/run.sh smoke BUILD_DIR             a few seconds per target (the test suite runs this)
#   tests/fuzz/run.sh long BUILD_DIR [RUNS] [TARGETS]   RUNS executions per target (default 1000000);
#                                                   TARGETS e.g. "csv h5" (default all)
# BUILD_DIR is the CMake build (its libkmeans_core.a links the option target). Exit 77: no
# clang with libFuzzer here (the test suite reports it as skipped).
# The Python module's parameters are fuzzed in Python, not here: test_fuzz_every_parameter in
# tests/python/test_hardening.py (KMEANS_FUZZ_CASES=N for a longer run).
set -euo pipefail
mode=${1:?usage: run.sh smoke|long BUILD_DIR [RUNS]}
build=$(cd "${2:?usage: run.sh smoke|long BUILD_DIR [RUNS]}" && pwd)
runs=${3:-1000000}
targets=${4:-csv txt npy bin h5 options centroids}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CXX=${FUZZ_CXX:-clang++}
command -v "$CXX" >/dev/null || { echo "skip: $CXX not found"; exit 77; }
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$build/fuzz-probe.cpp"
"$CXX" -fsanitize=fuzzer "$build/fuzz-probe.cpp" -o "$build/fuzz-probe" 2>/dev/null ||
  { echo "skip: $CXX cannot link -fsanitize=fuzzer (libFuzzer missing)"; exit 77; }

out="$build/fuzz"
mkdir -p "$out/obj"
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fopenmp=libgomp -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -I"$root/src" -I"$root" -I/usr/include/hdf5/serial
       "-DKMEANS_GPU_VERSION=\"$(sed -n 's/^project(kmeans_gpu VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")\"")
io=(src/common/errors.cpp src/common/host_memory.cpp src/common/progress.cpp src/io/dataset.cpp src/io/text_reader.cpp src/io/load.cpp
    src/io/hdf5_io.cpp src/io/write.cpp src/dist/team.cpp)
# Rebuilt when any source or header of the project is newer than what was built.
newest=$(find "$root/src" "$here" -name '*.[ch]pp' -newer "$out/stamp" 2>/dev/null | head -1 || true)
[[ -e "$out/stamp" && -z "$newest" ]] || { rm -f "$out"/obj/*.o "$out"/fuzz_{csv,txt,npy,bin,h5,options,centroids}; touch "$out/stamp"; }
objs=()
for src in "${io[@]}"; do  # the readers, instrumented
  obj="$out/obj/$(basename "$src" .cpp).o"
  [[ -e "$obj" ]] || "$CXX" "${flags[@]}" -c "$root/$src" -o "$obj"
  objs+=("$obj")
done
hdf5=$(ls /usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so 2>/dev/null || echo -lhdf5_serial)
link=(-fsanitize=fuzzer,address,undefined -fopenmp=libgomp)
declare -A exts=([csv]=.csv [txt]=.txt [npy]=.npy [bin]=.bin [h5]=.h5)
for fmt in "${!exts[@]}"; do
  bin="$out/fuzz_$fmt"
  [[ -e "$bin" ]] ||
    "$CXX" "${flags[@]}" -DKM_FUZZ_EXT="\"${exts[$fmt]}\"" "$here/fuzz_reader.cpp" "${objs[@]}" "${link[@]}" "$hdf5" \
      -o "$bin"
done
# The option parser: its file instrumented, the rest of the library as built.
bin="$out/fuzz_options"
[[ -e "$bin" && "$bin" -nt "$build/libkmeans_core.a" ]] ||
  "$CXX" "${flags[@]}" "$here/fuzz_options.cpp" "$root/src/cli/kmeans_options.cpp" "$build/libkmeans_core.a" \
    "${link[@]}" -fopenmp=libgomp -L/usr/local/cuda/lib64 -lcublas -lcudart "$hdf5" -lopenblas -o "$bin"

# The centroid files of --init/--predict, read by the options code: likewise.
bin="$out/fuzz_centroids"
[[ -e "$bin" && "$bin" -nt "$build/libkmeans_core.a" ]] ||
  "$CXX" "${flags[@]}" "$here/fuzz_centroids.cpp" "$root/src/cli/kmeans_options.cpp" "$build/libkmeans_core.a" \
    "${link[@]}" -fopenmp=libgomp -L/usr/local/cuda/lib64 -lcublas -lcudart "$hdf5" -lopenblas -o "$bin"

status=0
for target in $targets; do
  corpus="$out/corpus-$target"
  mkdir -p "$corpus"
  cp -n "$here/corpus/$target/"* "$corpus/" 2>/dev/null || true
  if [[ $mode == smoke ]]; then
    limit=(-max_total_time=2)
    # HDF5 1.10 itself crashes on some damaged files (the program's guard turns that into an
    # error line; cli_test.py checks the files found so far). Random mutation would make the
    # test suite fail at random on the library's bugs, so the smoke run only replays the h5
    # corpus (files our own checks must refuse); the long run mutates it, ignoring HDF5's crashes.
    [[ $target == h5 ]] && limit=(-runs=0)
  else
    limit=(-runs="$runs")
    # HDF5's own crashes on damaged files (the program turns them into an error; here the
    # guard is off) are collected and the run goes on, in a forked worker.
    [[ $target == h5 ]] && limit=(-runs="$runs" -fork=1 -ignore_crashes=1)
  fi
  log="$out/fuzz_$target.log"
  # Memory actually used is limited (-rss_limit_mb); a request that fails (HDF5 asks for
  # terabytes on some damaged headers and handles the NULL, as it gets in production) is not
  # a finding, so ASan returns NULL instead of stopping there.
  if KMEANS_NO_HDF5_GUARD=1 ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "$out/fuzz_$target" "${limit[@]}" -rss_limit_mb=2048 \
      -malloc_limit_mb=1048576 -max_len=4096 -timeout=10 \
      -artifact_prefix="$out/crash-$target-" "$corpus" > "$log" 2>&1; then
    echo "fuzz_$target: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1), no crash"
  else
    echo "fuzz_$target: FAILED (see $log and $out/crash-$target-*)"; tail -30 "$log"; status=1
  fi
done
exit $status
