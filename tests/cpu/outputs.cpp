// Outputs: what a run writes is durable, is never a mix of two runs, and never
// takes the place of something that is not a regular file or of a file the run reads.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "io/write.hpp"
#include "test_util.hpp"

// Every fsync of this test program (the library is linked in statically) passes here first:
// the path the descriptor names at that moment is recorded, then the real call is made.
namespace {
std::mutex g_synced_mutex;
std::vector<std::string> g_synced;
}  // namespace

extern "C" int fsync(int fd) {
  char link[64], target[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  if (n > 0) {
    std::lock_guard<std::mutex> lock(g_synced_mutex);
    g_synced.emplace_back(target, static_cast<std::size_t>(n));
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace {

using kmtest::expect_error;
using kmtest::TempDir;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool synced(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_synced_mutex);
  for (const std::string& s : g_synced)
    if (s == path) return true;
  return false;
}

// The temporaries are synced under their own names (so before the rename), and the
// directory after the renames, for every format.
TEST(Outputs, TemporariesAndDirectoryAreSynced) {
  TempDir dir;
  const std::string where = std::filesystem::canonical(dir.path()).string();
  const double c[2] = {1, 2};
  const std::int32_t l[1] = {0};
  const km::ResultView<double> view{c, 1, 2, l, 1, 0.0, 1};
  const std::string pid = std::to_string(::getpid());
  for (const char* name : {"r.csv", "r.npy", "r.h5"}) {
    {
      std::lock_guard<std::mutex> lock(g_synced_mutex);
      g_synced.clear();
    }
    km::write_result(dir.file(name), view);
    EXPECT_TRUE(synced(where + "/." + name + ".tmp." + pid)) << name << ": the temporary is synced before the rename";
    if (std::string(name) != "r.h5") {
      const std::string labels = std::string(name).replace(1, 0, ".labels");
      EXPECT_TRUE(synced(where + "/." + labels + ".tmp." + pid)) << labels << ": synced before the rename";
    }
    EXPECT_TRUE(synced(where)) << name << ": the directory is synced after the rename";
  }
}

// A signal between the two renames of a pair (the new labels in place, the centroids not yet)
// leaves the old pair or the new one, never the new labels beside the old centroids, and
// never loses the old labels.
TEST(Outputs, SignalBetweenPairRenamesLeavesOnePair) {
  TempDir dir;
  for (const char* name : {"r.csv", "r.npy"}) {
    const std::string out = dir.file(name);
    const std::string labels = km::labels_path_for(out);
    const double old_c[2] = {1, 2}, new_c[2] = {3, 4};
    const std::int32_t old_l[2] = {0, 0}, new_l[2] = {1, 1};
    km::write_result(out, km::ResultView<double>{old_c, 1, 2, old_l, 2, 0.0, 1});
    const std::string old_centroids = read_all(out), old_labels = read_all(labels);
    km::write_result(out, km::ResultView<double>{new_c, 1, 2, new_l, 2, 0.0, 1});
    const std::string new_centroids = read_all(out), new_labels = read_all(labels);
    km::write_result(out, km::ResultView<double>{old_c, 1, 2, old_l, 2, 0.0, 1});
    ASSERT_NE(old_labels, new_labels);

    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      km::g_between_pair_renames_for_tests = [] { std::raise(SIGTERM); };
      km::write_result(out, km::ResultView<double>{new_c, 1, 2, new_l, 2, 0.0, 1});
      std::_Exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << name << ": the signal still ends the run";
    const std::string c = read_all(out), l = read_all(labels);
    const bool old_pair = c == old_centroids && l == old_labels, new_pair = c == new_centroids && l == new_labels;
    const auto which = [](const std::string& s, const std::string& o, const std::string& n) {
      return s == n ? "new" : s == o ? "old" : s.empty() ? "gone" : "other";
    };
    EXPECT_TRUE(old_pair || new_pair) << name << ": a mix of two runs: centroids "
                                      << which(c, old_centroids, new_centroids) << ", labels "
                                      << which(l, old_labels, new_labels);
    for (auto& entry : std::filesystem::directory_iterator(dir.path()))
      EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

// A path that exists as a directory (or anything but a regular file), for either file of a
// pair, is refused before the run, naming it; the directory is left alone.
TEST(Outputs, RefusesAnOutputThatIsNotARegularFile) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("r.labels.csv"));
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("r.csv")); }, "r.labels.csv' exists and is not");
  std::filesystem::create_directories(dir.file("s.npy"));
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("s.npy")); }, "a directory");
  ASSERT_EQ(::mkfifo(dir.file("t.h5").c_str(), 0600), 0);
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("t.h5")); }, "a FIFO");
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("r.labels.csv")));
  // A regular file, or a link to one, may be replaced.
  kmtest::write_text(dir.file("u.csv"), "1,2\n");
  kmtest::write_text(dir.file("u.labels.csv"), "0\n");
  EXPECT_NO_THROW(km::check_output_path(dir.file("u.csv")));
  ASSERT_EQ(::symlink(dir.file("u.csv").c_str(), dir.file("v.csv").c_str()), 0);
  EXPECT_NO_THROW(km::check_output_path(dir.file("v.csv")));
}

// Every file the run reads counts, the centroids of --init and --predict too, by identity.
TEST(Outputs, RefusesToOverwriteAnyFileTheRunReads) {
  TempDir dir;
  const std::string model = dir.file("model.h5"), data = dir.file("x.csv");
  kmtest::write_text(model, "not read here");
  kmtest::write_text(data, "1,2\n");
  const std::vector<km::ReadFile> reads = {{"the input file", data}, {"the --predict file", model}};
  expect_error<km::UsageError>([&] { km::check_output_path(model, reads); }, "the --predict file");
  const std::string other_name = dir.path().string() + "/./model.h5";
  expect_error<km::UsageError>([&] { km::check_output_path(other_name, reads); }, "would overwrite");
  ASSERT_EQ(::link(model.c_str(), dir.file("same.h5").c_str()), 0);
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("same.h5"), reads); }, "the --predict file");
  EXPECT_NO_THROW(km::check_output_path(dir.file("fresh.h5"), reads));
}

}  // namespace
