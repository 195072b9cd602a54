#include "io/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <type_traits>

#include "common/errors.hpp"
#include "common/host_memory.hpp"

namespace km {

namespace {
constexpr std::size_t kPage = 4096;
}

template <class T>
HostBuffer<T>::HostBuffer(std::size_t count) : size_(count) {
  if (count == 0) return;
  if (count > std::numeric_limits<std::size_t>::max() / sizeof(T) - kPage)
    throw InputError(strprintf("cannot allocate %zu values: size overflows", count));
  std::size_t bytes = (count * sizeof(T) + kPage - 1) / kPage * kPage;
  check_host_memory(static_cast<double>(bytes), strprintf("a buffer of %zu values", count));
  void* p = std::aligned_alloc(kPage, bytes);
  if (!p)
    throw InputError(strprintf("out of host memory allocating %.1f MiB", bytes / 1048576.0));
  ptr_.reset(static_cast<T*>(p));
}

template <class T>
void HostBuffer<T>::Free::operator()(T* p) const {
  if (owned) std::free(p);
}

template <class T>
void check_finite(const Dataset<T>& data, const std::string& what, std::size_t first_object,
                  std::size_t problem_rows) {
  const std::size_t total = data.n * data.d;
  const T* v = data.values.data();
  // Parallel scan for the first bad value; cheap next to reading the file.
  std::size_t first_bad = total;
#pragma omp parallel for reduction(min : first_bad) schedule(static)
  for (std::size_t i = 0; i < total; ++i)
    if (!std::isfinite(v[i]) && i < first_bad) first_bad = i;
  if (first_bad < total) {
    const std::size_t obj = first_object + first_bad / data.d, coord = first_bad % data.d;
    const std::string where = problem_rows ? strprintf("problem %zu, object %zu", obj / problem_rows, obj % problem_rows)
                                           : strprintf("object %zu", obj);
    // A double or a text value beyond float's range reads as Inf in float: say so.
    const bool narrowed = std::is_same_v<T, float> && (data.element == "float64" || data.element == "text") &&
                          !std::isnan(v[first_bad]);
    throw InputError(strprintf("%s: value %s at %s, coordinate %zu (NaN/Inf are not allowed%s)", what.c_str(),
                               std::isnan(v[first_bad]) ? "NaN" : narrowed ? "Inf or beyond float's range" : "Inf",
                               where.c_str(), coord, narrowed ? "; for larger values use --precision=double" : ""));
  }
}

template <class T>
WeightRange check_weights(const Dataset<T>& data, std::size_t first_object) {
  if (!data.weighted()) return {};
  if (data.weights.size() != data.n)
    throw InputError(strprintf("sample weights: %zu values for %zu objects (one weight per object)",
                               data.weights.size(), data.n));
  const T* w = data.weights.data();
  const std::size_t n = data.n;
  std::size_t first_bad = n;
  double largest = 0, smallest = std::numeric_limits<double>::infinity();
#pragma omp parallel for reduction(min : first_bad, smallest) reduction(max : largest) schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(w[i]);
    if (!(v >= 0 && v <= kLargestWeight)) {
      if (i < first_bad) first_bad = i;
    } else if (v > 0) {
      largest = std::max(largest, v);
      smallest = std::min(smallest, v);
    }
  }
  if (first_bad < n)
    throw InputError(strprintf("sample weight %zu is %g: weights must be finite, at least 0 and at most 2^64",
                               first_object + first_bad, static_cast<double>(w[first_bad])));
  return {largest, largest > 0 ? smallest : 0.0};
}

std::size_t data_elements(std::size_t n, std::size_t d, std::size_t element_size) {
  check_host_memory(static_cast<double>(n) * static_cast<double>(d) * static_cast<double>(element_size),
                    strprintf("the data (%zu objects x %zu coordinates of %s)", n, d,
                              element_size == 4 ? "float" : "double"));
  return n * d;
}

void check_shape(std::int64_t n, std::int64_t d, std::size_t element_size, const std::string& what) {
  if (n <= 0 || d <= 0)
    throw InputError(strprintf("%s: invalid shape %lld x %lld (both must be positive)", what.c_str(),
                               static_cast<long long>(n), static_cast<long long>(d)));
  // Objects are indexed with 64-bit integers everywhere, so the limit is what one
  // allocation can address; d is also kept below 2^31 so a row fits an int loop.
  const auto un = static_cast<unsigned long long>(n), ud = static_cast<unsigned long long>(d);
  if (ud > (1ull << 31) || un > (std::numeric_limits<std::size_t>::max() / element_size) / ud)
    throw InputError(strprintf("%s: absurd shape %lld x %lld (too large to address)", what.c_str(),
                               static_cast<long long>(n), static_cast<long long>(d)));
}

template class HostBuffer<float>;
template class HostBuffer<double>;
template class HostBuffer<std::int32_t>;
template class HostBuffer<std::int64_t>;
template void check_finite(const Dataset<float>&, const std::string&, std::size_t, std::size_t);
template WeightRange check_weights(const Dataset<float>&, std::size_t);
template WeightRange check_weights(const Dataset<double>&, std::size_t);
template void check_finite(const Dataset<double>&, const std::string&, std::size_t, std::size_t);

}  // namespace km
