#include "common/progress.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/errors.hpp"
#include "timing/timer.hpp"

namespace km::progress {

namespace {

struct State {
  bool on = false, tty = false, printed = false;
  double after = 1.0;  // seconds a stage runs before its first line (KMEANS_PROGRESS_AFTER)
  std::string program, stage;
  Stopwatch stage_watch, last_print;
};

State& state() {
  static State s;
  return s;
}

}  // namespace

void enable(const char* program) {
  State& s = state();
  s.on = true;
  s.tty = ::isatty(2) != 0;
  s.program = program;
  if (const char* v = std::getenv("KMEANS_PROGRESS_AFTER")) s.after = std::atof(v);
}

void disable() { state().on = false; }

namespace {
bool (*poll_check)() = nullptr;
}

void set_poll(bool (*check)()) { poll_check = check; }

namespace {
std::atomic<bool> interrupt_flag{false};
static_assert(std::atomic<bool>::is_always_lock_free, "request_interrupt() must be async-signal-safe");
}  // namespace

void request_interrupt() noexcept { interrupt_flag.store(true, std::memory_order_relaxed); }
void clear_interrupt() noexcept { interrupt_flag.store(false, std::memory_order_relaxed); }
bool interrupt_requested() noexcept { return interrupt_flag.load(std::memory_order_relaxed); }

void check_interrupt() {
  if (interrupt_requested()) throw Interrupted{};
}

void poll() {
  check_interrupt();
  if (poll_check && poll_check()) throw Interrupted{};
}

void update(const char* stage, double done, double total, const char* unit, const std::string& detail) {
  poll();
  State& s = state();
  if (!s.on) return;
  if (s.stage != stage) {
    end_stage();
    s.stage = stage;
    s.stage_watch.restart();
    s.last_print.restart();
  }
  const double elapsed = s.stage_watch.seconds();
  if (elapsed < s.after || (s.printed && s.last_print.seconds() < (s.tty ? 0.25 : 5.0))) return;
  s.last_print.restart();
  const double rate = done / elapsed;
  std::string text = strprintf("%s: %s %.0f%%  %.4g of %.4g %s  %.4g %s/s", s.program.c_str(), stage,
                               total > 0 ? 100 * done / total : 0.0, done, total, unit, rate, unit);
  if (rate > 0 && total > done) text += strprintf(", %.0f s left", (total - done) / rate);
  if (!detail.empty()) text += "  " + detail;
  std::fprintf(stderr, s.tty ? "\r%s\033[K" : "%s\n", text.c_str());
  s.printed = true;
}

void end_stage() {
  State& s = state();
  if (s.on && s.printed && s.tty) std::fputc('\n', stderr);
  s.printed = false;
  s.stage.clear();
}

}  // namespace km::progress
