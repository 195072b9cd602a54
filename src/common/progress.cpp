#include "common/progress.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>

#include "common/errors.hpp"
#include "timing/timer.hpp"

namespace km::progress {

namespace {

struct State {
  bool on = false;
  std::FILE* out = nullptr;
  bool owned = false;    // out is ours to close (a duplicate of the terminal's descriptor)
  bool printed = false;  // the stage's line is on the terminal
  bool pending = false;  // ... but not its latest numbers
  double after = 1.0;    // seconds a stage runs before its first line
  double redraw = 0.25;  // seconds between two drawings of the line
  std::string program, stage;
  std::string text, part;   // the stage's numbers; the current step's
  double first_done = NAN;  // done at the stage's first update(): the rate counts from there
  Stopwatch stage_watch, rate_watch, last_print;
  ~State() {
    if (owned) std::fclose(out);
  }
};

State& state() {
  thread_local State s;
  return s;
}

void start(State& s, std::FILE* out, bool owned, const char* program, double after, double redraw) {
  disable();
  s.on = true;
  s.out = out;
  s.owned = owned;
  s.program = program;
  s.after = after;
  s.redraw = redraw;
}

void begin(State& s, const char* stage) {
  end_stage();
  s.stage = stage;
  s.text = s.program + ": " + stage;
  s.stage_watch.restart();
}

void draw(State& s) {
  std::fprintf(s.out, "\r%s%s\033[K", s.text.c_str(), s.part.c_str());
  std::fflush(s.out);
}

// Draws the line once the stage has lasted `after`, at most every `redraw` seconds.
void show(State& s) {
  if (s.stage_watch.seconds() < s.after || (s.printed && s.last_print.seconds() < s.redraw)) {
    s.pending = true;
    return;
  }
  draw(s);
  s.last_print.restart();
  s.printed = true;
  s.pending = false;
}

}  // namespace

void enable(const char* program) {
  // The terminal as it is now: reading HDF5 points descriptor 2 elsewhere for a while (its crash
  // guard), and the lines must still reach the terminal.
  const int fd = ::isatty(2) ? ::fcntl(2, F_DUPFD_CLOEXEC, 3) : -1;
  std::FILE* out = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (!out) {
    if (fd >= 0) ::close(fd);
    disable();
    return;
  }
  const char* after = std::getenv("KMEANS_PROGRESS_AFTER");
  start(state(), out, true, program, after ? std::atof(after) : 1.0, 0.25);
}

void detail::enable_on(std::FILE* out, const char* program, double after, double redraw) {
  start(state(), out, false, program, after, redraw);
}

void disable() {
  State& s = state();
  end_stage();
  if (s.owned) std::fclose(s.out);
  s.on = s.owned = false;
  s.out = nullptr;
}

bool shown() { return state().on; }

std::string detail::number(double v) { return std::fabs(v) >= 1000 ? strprintf("%.0f", v) : strprintf("%.4g", v); }

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
  if (s.stage != stage) begin(s, stage);
  if (std::isnan(s.first_done)) {
    s.first_done = done;
    s.rate_watch.restart();
  }
  using detail::number;
  std::string text = strprintf("%s: %s %.0f%%  %s of %s %s", s.program.c_str(), stage,
                               total > 0 ? 100 * done / total : 0.0, number(done).c_str(), number(total).c_str(), unit);
  const double seconds = s.rate_watch.seconds();
  if (done > s.first_done && seconds > 0) {
    const double rate = (done - s.first_done) / seconds;
    text += strprintf("  %s %s/s", number(rate).c_str(), unit);
    if (total > done) text += strprintf(", %.0f s left", (total - done) / rate);
  }
  if (!detail.empty()) text += "  " + detail;
  s.text = std::move(text);
  s.part.clear();
  show(s);
}

void part(const char* stage, double done, double total, const char* unit) {
  State& s = state();
  if (!s.on) return;
  if (s.stage.empty()) begin(s, stage);
  using detail::number;
  s.part = strprintf("  [this pass %.0f%%: %s of %s %s]", total > 0 ? 100 * done / total : 0.0, number(done).c_str(),
                     number(total).c_str(), unit);
  show(s);
}

void end_stage() {
  State& s = state();
  if (s.on && s.printed) {
    const bool finished_pass = !s.part.empty() && !std::isnan(s.first_done);
    if (finished_pass) s.part.clear();  // the stage's passes are over: its numbers alone
    if (s.pending || finished_pass) draw(s);
    std::fputc('\n', s.out);
    std::fflush(s.out);
  }
  s.printed = s.pending = false;
  s.stage.clear();
  s.text.clear();
  s.part.clear();
  s.first_done = NAN;
}

void Iterations::operator()(int it, long long changed, double inertia) {
  if (it <= last_) ++fit_;  // the next fit began
  last_ = it;
  std::string detail = strprintf("%lld changed, inertia %.6e", changed, inertia);
  if (fits_ > 1) detail += strprintf("  (fit %d of %d)", fit_, fits_);
  update("iterations", it, loops_, "iterations", detail);
}

}  // namespace km::progress
