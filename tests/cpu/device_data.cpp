// Data on the GPU (Dataset::device_values) refused, before anything reads it, by every fit that
// cannot take it (registry.hpp: check_device_data), each with one line naming what to change; and
// an address handed over as CUDA memory (kmeans/device_view.hpp) checked before anything reads it.
// The rows' address here is never dereferenced: the checks come first (the GPU tests fit real ones).
#include <gtest/gtest.h>

#include <string>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "kmeans/device_view.hpp"
#include "kmeans/registry.hpp"

namespace {

template <class F>
void expect_usage(F&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DeviceData, FitsThatCannotTakeItSayWhy) {
  static const float somewhere[8] = {};
  km::Dataset<float> data;
  data.n = 1000;
  data.d = 4;
  data.device_values = somewhere;  // (never read: each case is refused first)
  km::Params p;
  p.k = 3;
  p.init = km::Init::first;
  for (const char* name : {"seq", "omp", "naive", "transpose", "shared"})
    expect_usage([&] { km::run(km::find_implementation(name), data, p); }, "cannot read data on the GPU");
  const auto& fused = km::find_implementation("fused");
  km::Params q = p;
  for (const km::Metric metric : {km::Metric::cosine, km::Metric::dot}) {  // (cosine: normalised on the device)
    q.metric = metric;
    EXPECT_NO_THROW(km::check_device_data(fused, data, q)) << km::to_string(metric);
  }
  q = p;
  q.init = km::Init::kmeans_parallel;
  expect_usage([&] { km::run(fused, data, q); }, "--init=kmeans|| needs the data on the host");
  q = p;
  q.gpus = 2;
  expect_usage([&] { km::run(fused, data, q); }, "one GPU");
  data.weights = km::HostBuffer<float>(data.n);
  expect_usage([&] { km::run(fused, data, p); }, "sample weights need the data on the host");
}

TEST(DeviceData, AddressesAreCheckedFirst) {
  static const double somewhere[8] = {};
  expect_usage([&] { km::device_view<double>(nullptr, 10, 2, "x"); }, "x in GPU memory: a null pointer");
  const auto* odd = reinterpret_cast<const char*>(somewhere) + 4;  // a float's alignment, not a double's
  expect_usage([&] { km::device_view<double>(odd, 10, 2, "x"); }, "not a multiple of its values' size");
  EXPECT_THROW(km::device_view<float>(somewhere, 0, 2, "x"), km::InputError);  // the host data's shape checks
  if (km::gpu_info().present) {  // host memory handed over as device memory
    expect_usage([&] { km::device_view<double>(somewhere, 4, 2, "x"); }, "not CUDA device memory");
  } else {
    try {
      km::device_view<double>(somewhere, 4, 2, "x");
      ADD_FAILURE() << "no error without a GPU";
    } catch (const km::DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("no usable GPU"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
