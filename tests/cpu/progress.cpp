// The progress line (common/progress.hpp): what a terminal is sent for each stage, a streamed
// pass's part of it, the fits of --n-init, and nothing without a terminal or once disabled.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/progress.hpp"
#include "test_util.hpp"

namespace {

namespace progress = km::progress;

// A file that stands in for the terminal: what was written to it so far.
class Capture {
 public:
  Capture() : f_(std::tmpfile()) {}
  ~Capture() {
    progress::disable();
    std::fclose(f_);
  }
  std::FILE* file() const { return f_; }
  std::string text() const {
    std::fflush(f_);
    std::string out;
    std::rewind(f_);
    char buf[4096];
    for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f_)) > 0;) out.append(buf, got);
    std::fseek(f_, 0, SEEK_END);
    return out;
  }

 private:
  std::FILE* f_;
};

TEST(Progress, Numbers) {
  EXPECT_EQ(progress::detail::number(0.2621), "0.2621");
  EXPECT_EQ(progress::detail::number(38.4), "38.4");
  EXPECT_EQ(progress::detail::number(999.94), "999.9");
  EXPECT_EQ(progress::detail::number(12345.6), "12346");
  EXPECT_EQ(progress::detail::number(4e9), "4000000000");
}

TEST(Progress, OneLineRewrittenThenEnded) {
  Capture c;
  progress::detail::enable_on(c.file(), "t", 0, 0);
  EXPECT_TRUE(progress::shown());
  progress::update("reading", 1, 4, "MB");
  EXPECT_EQ(c.text(), "\rt: reading 25%  1 of 4 MB\033[K");
  progress::update("reading", 3, 4, "MB");
  const std::string two = c.text();
  EXPECT_NE(two.find("\rt: reading 75%  3 of 4 MB  "), std::string::npos) << two;
  EXPECT_NE(two.find(" MB/s, "), std::string::npos) << "the rate, from the stage's first numbers: " << two;
  EXPECT_NE(two.find(" s left\033[K"), std::string::npos) << two;
  progress::end_stage();
  EXPECT_EQ(c.text(), two + "\n");
  progress::end_stage();  // no stage: nothing
  EXPECT_EQ(c.text(), two + "\n");
}

TEST(Progress, ThrottledLineEndsWithItsLatestNumbers) {
  Capture c;
  progress::detail::enable_on(c.file(), "t", 0, 3600);  // drawn once, then not again within the hour
  progress::update("k-means++", 1, 8, "centres");
  progress::update("k-means++", 5, 8, "centres");
  EXPECT_EQ(c.text(), "\rt: k-means++ 12%  1 of 8 centres\033[K");
  progress::end_stage();  // the line is completed with 5 of 8
  const std::string text = c.text();
  EXPECT_NE(text.find("\rt: k-means++ 62%  5 of 8 centres  "), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\033[K\n") << text;
}

TEST(Progress, ShortStagesShowNothing) {
  Capture c;
  progress::detail::enable_on(c.file(), "t", 3600, 0);
  progress::update("reading", 1, 2, "MB");
  progress::part("iterations", 1, 2, "MB");
  progress::end_stage();
  progress::update("iterations", 1, 2, "iterations");
  progress::disable();
  EXPECT_EQ(c.text(), "");
}

TEST(Progress, DisabledShowsNothing) {
  Capture c;
  progress::detail::enable_on(c.file(), "t", 0, 0);
  progress::disable();
  EXPECT_FALSE(progress::shown());
  progress::update("reading", 1, 2, "MB");
  progress::part("iterations", 1, 2, "MB");
  progress::end_stage();
  EXPECT_EQ(c.text(), "");
}

// A streamed iteration's pass: after the stage's numbers, until its next update(); with no
// stage it begins the one it names; a new stage ends the line.
TEST(Progress, PartOfAPass) {
  Capture c;
  progress::detail::enable_on(c.file(), "t", 0, 0);
  progress::part("iterations", 100, 400, "MB");
  std::string want = "\rt: iterations  [this pass 25%: 100 of 400 MB]\033[K";
  EXPECT_EQ(c.text(), want);
  progress::update("iterations", 1, 10, "iterations", "5 changed");
  want += "\rt: iterations 10%  1 of 10 iterations  5 changed\033[K";
  EXPECT_EQ(c.text(), want);
  progress::part("labelling", 3000, 4000, "MB");  // the stage's, whatever name it gives
  want += "\rt: iterations 10%  1 of 10 iterations  5 changed  [this pass 75%: 3000 of 4000 MB]\033[K";
  EXPECT_EQ(c.text(), want);
  progress::update("writing", 1, 2, "labels");  // a stage's end: its numbers without the pass
  want += "\rt: iterations 10%  1 of 10 iterations  5 changed\033[K\n\rt: writing 50%  1 of 2 labels\033[K";
  EXPECT_EQ(c.text(), want);
  progress::end_stage();
  progress::part("labelling", 1, 4, "MB");  // a stage of passes alone keeps its last one
  progress::end_stage();
  EXPECT_EQ(c.text(), want + "\n\rt: labelling  [this pass 25%: 1 of 4 MB]\033[K\n");
}

// part() never polls for an interruption (device work may be in flight); update() does.
TEST(Progress, OnlyUpdatePolls) {
  Capture c;
  progress::detail::enable_on(c.file(), "t", 0, 0);
  progress::set_poll([] { return true; });
  EXPECT_NO_THROW(progress::part("iterations", 1, 2, "MB"));
  EXPECT_THROW(progress::update("iterations", 1, 2, "iterations"), progress::Interrupted);
  progress::set_poll(nullptr);
}

TEST(Progress, FitsOfNInit) {
  Capture c;
  progress::detail::enable_on(c.file(), "t", 0, 0);
  progress::Iterations shown(3, 2);
  shown(1, 100, 2.5);
  EXPECT_EQ(c.text(), "\rt: iterations 33%  1 of 3 iterations  100 changed, inertia 2.500000e+00  (fit 1 of 2)\033[K");
  shown(2, 10, 2.0);
  progress::update("k-means++", 1, 3, "centres");  // the second fit's initialisation
  shown(1, 90, 2.25);
  const std::string text = c.text();
  EXPECT_NE(text.find("\rt: iterations 33%  1 of 3 iterations  90 changed, inertia 2.250000e+00  (fit 2 of 2)"),
            std::string::npos)
      << text;
  progress::Iterations one(5, 1);
  one(1, 7, 1.0);
  EXPECT_EQ(c.text().find("fit", text.size()), std::string::npos) << "one fit: no fit count";
}

// enable(): progress only where descriptor 2 is a terminal, and then on that terminal even
// while descriptor 2 points elsewhere (HDF5's crash guard sends it to /dev/null while it reads).
class Stderr {
 public:
  explicit Stderr(int fd) : saved_(::dup(2)) { ::dup2(fd, 2); }
  ~Stderr() {
    progress::disable();
    ::dup2(saved_, 2);
    ::close(saved_);
  }

 private:
  int saved_;
};

TEST(Progress, OnlyOnATerminal) {
  kmtest::TempDir dir;
  const int file = ::open(dir.file("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(file, 0);
  {
    Stderr redirected(file);
    progress::enable("t");
    EXPECT_FALSE(progress::shown()) << "stderr is a file";
    progress::update("reading", 1, 2, "MB");
  }
  ::close(file);
  EXPECT_EQ(std::filesystem::file_size(dir.file("stderr")), 0u);

  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) GTEST_SKIP() << "no pseudo-terminal here";
  const int terminal = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(terminal, 0);
  ::setenv("KMEANS_PROGRESS_AFTER", "0", 1);
  {
    Stderr redirected(terminal);
    progress::enable("t");
    ::unsetenv("KMEANS_PROGRESS_AFTER");
    EXPECT_TRUE(progress::shown()) << "stderr is a terminal";
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::close(null);
    progress::update("reading", 1, 2, "MB");
  }
  std::string got;
  char buf[256];
  pollfd p{master, POLLIN, 0};
  while (got.find("\033[K") == std::string::npos && ::poll(&p, 1, 2000) > 0) {
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  EXPECT_NE(got.find("t: reading 50%  1 of 2 MB"), std::string::npos) << got;
  ::close(terminal);
  ::close(master);
}

}  // namespace
