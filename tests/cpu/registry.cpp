// The registry: names, descriptions and the GPU rule; --list as the ladder in order and its
// answer for a shape (the plan's path); each implementation's limits with a reason.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <string>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

// An engine that does nothing, for registry entries made up by the tests.
template <class T>
struct FakeEngine final : km::Engine<T> {
  explicit FakeEngine(const km::Params&) {}
  void setup(const km::Dataset<T>&, const std::vector<T>&) override {}
  void iterate(km::IterationStats&) override {}
  void read_centroids(std::vector<T>&) override {}
  void final_labels(std::vector<std::int32_t>&) override {}
};

TEST(Registry, NamesDescriptionsAndGpuRule) {
  ASSERT_GE(km::implementations().size(), 2u);
  for (const km::Implementation* impl : km::implementations()) {
    EXPECT_GT(std::strlen(impl->description), 10u) << impl->name;
    EXPECT_NE(impl->make_float, nullptr);
    EXPECT_NE(impl->make_double, nullptr);
  }
  EXPECT_STREQ(km::find_implementation("seq").name, "seq");
  try {
    km::find_implementation("warp-drive");
    ADD_FAILURE();
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("available: seq, omp"), std::string::npos) << e.what();
  }
  EXPECT_EQ(km::default_implementation(false), "omp");
  EXPECT_EQ(km::default_implementation(true), "fused");
  EXPECT_NO_THROW(km::find_implementation(km::default_implementation(true)));
  const km::Implementation gpu_only = km::describe<FakeEngine>("fake-gpu", "test", km::Where::gpu);
  km::GpuInfo none;
  none.why_absent = "no CUDA-capable device is detected";
  try {
    km::require_runnable(gpu_only, none);
    ADD_FAILURE();
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a CUDA GPU"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no CUDA-capable device"), std::string::npos);
  }
  km::GpuInfo one;
  one.present = true;
  EXPECT_NO_THROW(km::require_runnable(gpu_only, one));
  EXPECT_NO_THROW(km::require_runnable(km::find_implementation("omp"), none));
}

TEST(Registry, ListIsTheLadderInOrder) {
  const auto list = nlohmann::json::parse(km::registry_json());
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), km::implementations().size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const km::Implementation* impl = km::implementations()[i];
    EXPECT_EQ(list[i]["name"], impl->name);
    EXPECT_EQ(list[i]["description"], impl->description);
    EXPECT_EQ(list[i]["where"], impl->needs_gpu() ? "gpu" : "cpu");
    EXPECT_EQ(list[i]["order"], i);
  }
}

TEST(Registry, ListAnswersForAShape) {
  const auto small = nlohmann::json::parse(km::registry_json(16, 16, 8));
  const auto large = nlohmann::json::parse(km::registry_json(1024, 128, 8));
  for (std::size_t i = 0; i < small.size(); ++i) {
    const km::Implementation* impl = km::implementations()[i];
    const km::Support s = km::supports(*impl, 1024, 128, 8);
    EXPECT_EQ(large[i]["runs"], s.ok) << impl->name;
    if (!s.ok) {
      EXPECT_EQ(large[i]["reason"], s.reason) << impl->name;
    }
    EXPECT_EQ(large[i].contains("path"), impl->path != nullptr) << impl->name;
  }
  const auto fused = [](const nlohmann::json& list) {
    for (const auto& e : list)
      if (e["name"] == "fused") return e["path"].get<std::string>();
    return std::string("missing");
  };
  // (16 x 16 in double: d fixed, and the staged loads from the float copy, which the engine takes
  // where n % 4 == 0 and the device has room for the copy)
  EXPECT_EQ(fused(small), "one-pass, d fixed, staged, float copy");
  // (the tensor path with its scores, for this GPU's facts or, without one, an H100's)
  EXPECT_EQ(fused(large).rfind("tensor, ", 0), 0u) << fused(large);
  EXPECT_EQ(fused(large), km::find_implementation("fused").path(1024, 128, 8, {}));
  EXPECT_FALSE(nlohmann::json::parse(km::registry_json())[0].contains("runs")) << "no shape, no answer";
}

TEST(Registry, SupportsAnswersWithAReason) {
  // The CPU implementations take every shape; without a GPU every GPU one refuses and says why.
  for (const char* cpu : {"seq", "omp"}) EXPECT_TRUE(km::supports(km::find_implementation(cpu), 65536, 1024, 8).ok);
  km::GpuInfo big;
  big.present = true;
  big.shared_optin = 227 * 1024;
  const km::Implementation& shared = km::find_implementation("shared");
  ASSERT_NE(shared.supports, nullptr);
  EXPECT_TRUE(shared.supports(16, 16, 8, big).ok);
  const km::Support no = shared.supports(2000, 64, 8, big);  // 1 MB of centroids
  EXPECT_FALSE(no.ok);
  EXPECT_NE(no.reason.find("shared memory"), std::string::npos) << no.reason;
  EXPECT_NE(no.reason.find("--impl=fused"), std::string::npos) << no.reason;
  // The limit is the device's, not a constant: a smaller device refuses sooner.
  km::GpuInfo small = big;
  small.shared_optin = 48 * 1024;
  EXPECT_TRUE(shared.supports(49, 128, 8, big).ok);
  EXPECT_FALSE(shared.supports(49, 128, 8, small).ok);
  EXPECT_TRUE(shared.supports(48, 128, 8, small).ok) << "exactly the limit fits";
  EXPECT_FALSE(km::find_implementation("fused").supports(65536, 65536, 8, big).ok) << "K*d past int";
  EXPECT_TRUE(km::find_implementation("fused").supports(65536, 1024, 8, big).ok);
  if (!km::gpu_info().present)
    for (const km::Implementation* impl : km::implementations())
      if (impl->needs_gpu()) {
        const km::Support s = km::supports(*impl, 16, 16, 8);
        EXPECT_FALSE(s.ok) << impl->name;
        EXPECT_NE(s.reason.find("needs a CUDA GPU"), std::string::npos) << s.reason;
      }
}

}  // namespace
