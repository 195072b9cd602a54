// Outputs of issue 70: what a run writes is durable, is never a mix of two runs, and never
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

namespace {

using kmtest::expect_error;
using kmtest::TempDir;

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
