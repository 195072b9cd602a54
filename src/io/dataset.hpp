// Dataset<T>: N objects x d coordinates, row-major and contiguous, in one page-aligned
// host allocation (page alignment lets a GPU implementation pin it in place with
// cudaHostRegister instead of copying it). Every implementation reads this one type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace km {

// Owning, page-aligned, uninitialised array of T. Move-only.
template <class T>
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t count);
  HostBuffer(HostBuffer&&) noexcept = default;
  HostBuffer& operator=(HostBuffer&&) noexcept = default;

  T* data() { return ptr_.get(); }
  const T* data() const { return ptr_.get(); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return ptr_[i]; }
  const T& operator[](std::size_t i) const { return ptr_[i]; }

  // A view of `count` values someone else owns (a NumPy array): never freed here, and
  // possibly not page-aligned (pinning it in place may then fail; uploads fall back to a
  // pageable copy). The owner keeps it alive and unchanged while the view is used.
  static HostBuffer borrow(const T* p, std::size_t count) {
    HostBuffer b;
    b.ptr_ = std::unique_ptr<T[], Free>(const_cast<T*>(p), Free{false});
    b.size_ = count;
    return b;
  }

 private:
  struct Free {
    bool owned = true;
    void operator()(T* p) const;
  };
  std::unique_ptr<T[], Free> ptr_;
  std::size_t size_ = 0;
};

// n*d, after checking that the host has the memory for them (InputError naming the shape).
std::size_t data_elements(std::size_t n, std::size_t d, std::size_t element_size);

template <class T>
struct Dataset {
  std::size_t n = 0;  // objects
  std::size_t d = 0;  // coordinates per object
  HostBuffer<T> values;  // n*d, row-major: object i is values[i*d .. i*d+d)
  std::string source;    // where it came from, for reports ("uniform", a path...)
  std::string element;   // what a file or array held: "float16", "bfloat16", "float32", "float64",
                         // "text" (.csv, .txt); empty for generated data (io/element.hpp)
  HostBuffer<T> weights;  // sample weights (n, finite, >= 0; scikit-learn's sample_weight), or
                          // empty: every object weighs 1 (check_weights says what is accepted)
  // Data already on the GPU (a CuPy array, a PyTorch CUDA tensor): the n x d rows, row-major, in
  // the current device's memory, owned by the caller; `values` is then empty and the host never
  // reads the rows (registry.hpp: check_device_data says which fits take such data).
  const T* device_values = nullptr;

  Dataset() = default;
  Dataset(std::size_t n_, std::size_t d_, std::string source_ = {})
      : n(n_), d(d_), values(data_elements(n_, d_, sizeof(T))), source(std::move(source_)) {}

  const T* row(std::size_t i) const { return values.data() + i * d; }
  T* row(std::size_t i) { return values.data() + i * d; }
  bool weighted() const { return weights.data() != nullptr; }
  bool on_device() const { return device_values != nullptr; }
  T weight(std::size_t i) const { return weighted() ? weights[i] : T(1); }
};

// Row i into out (d values), from host memory or, for data on the device, by a copy from there
// (defined in src/cuda/memory.cpp, beside the CUDA runtime the readers do without).
template <class T>
void copy_row(const Dataset<T>& data, std::size_t i, T* out);

// The largest sample weight and the smallest positive one (0 and 0: unweighted, or all 0).
struct WeightRange {
  double max = 0, min = 0;
};

// Throws InputError unless data.weights is empty or holds n finite values in [0, 2^64] (the
// first bad one named by index, first_object the rank's first row). Returns their range
// (fixed_point.hpp: fixed_scales); that one is positive is the caller's check (over every rank).
constexpr double kLargestWeight = 0x1p64;
template <class T>
WeightRange check_weights(const Dataset<T>& data, std::size_t first_object = 0);

// Throws InputError naming the first object/coordinate that is NaN or infinite.
template <class T>
// first_object: the index of data's first object in the whole data (an MPI rank's share).
// problem_rows > 0: the rows are a batch's problems of that many rows each, named as such.
void check_finite(const Dataset<T>& data, const std::string& what, std::size_t first_object = 0,
                  std::size_t problem_rows = 0);

// Refuses shapes whose element count or byte size does not fit size_t/our int types.
void check_shape(std::int64_t n, std::int64_t d, std::size_t element_size, const std::string& what);

}  // namespace km
