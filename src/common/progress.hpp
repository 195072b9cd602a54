// Progress for a person waiting at a terminal: loading a file, k-means++ and k-means||, the
// iterations (and the passes of a streamed iteration), writing the output. One line on stderr,
// rewritten in place; nothing when stderr is not a terminal, and nothing unless enabled (the
// CLIs enable it without --quiet, the Python module with verbose > 0). A stage shows only once
// it has lasted a second (KMEANS_PROGRESS_AFTER=seconds changes that). The state is the calling
// thread's: the thread that enabled progress shows it, calls from other threads show nothing.
#pragma once

#include <cstdio>
#include <string>

namespace km::progress {

// Shows progress from this thread when stderr is a terminal; `program` prefixes the lines
// ("kmeans"). disable() ends the current stage and shows nothing more.
void enable(const char* program);
void disable();
// Whether this thread shows progress (one test, for loops that must stay cheap without it).
bool shown();

// done of total (in `unit`s, e.g. "MB", "centres", "iterations") in `stage`, with an optional
// detail after the rate and time left. A new stage name ends the previous stage.
void update(const char* stage, double done, double total, const char* unit, const std::string& detail = {});

// Progress within one step of the current stage, e.g. the chunks of a streamed iteration: shown
// after the stage's line until the stage's next update() or its end. With no current stage it
// begins `stage`. Unlike update() it never polls for an interruption (its caller may hold device work
// in flight).
void part(const char* stage, double done, double total, const char* unit);

// Ends the current stage: a line on the terminal is completed with its latest numbers and a newline.
void end_stage();

// The iterations' line for an iteration observer: `it` (1-based) starts again with each of
// `fits` fits (--n-init); shows the iteration of `loops`, the fit when more than one, the objects
// that changed and the inertia. Polls as update() does.
class Iterations {
 public:
  Iterations(int loops, int fits) : loops_(loops), fits_(fits) {}
  void operator()(int it, long long changed, double inertia);

 private:
  int loops_, fits_, fit_ = 1, last_ = 0;
};

// Interruption (the Python module's Ctrl-C): `check` is called by poll() and by every
// update(), enabled or not; when it returns true they throw Interrupted. nullptr: none.
struct Interrupted {};
void set_poll(bool (*check)());
void poll();

// The asynchronous request: request_interrupt() sets a flag (async-signal-safe: the module's
// SIGINT handler calls it) that long loops over objects test once per chunk with
// interrupt_requested(), one relaxed atomic load: a loop inside an OpenMP region skips its
// remaining chunks, and check_interrupt() after it (or a sequential loop itself) throws
// Interrupted; poll() throws too. clear_interrupt() before a run.
void request_interrupt() noexcept;
void clear_interrupt() noexcept;
bool interrupt_requested() noexcept;
void check_interrupt();

namespace detail {
// For the tests: progress shown on `out` as on a terminal, whatever it is, a stage once it has
// lasted `after` seconds, the line drawn again at most every `redraw` seconds (0.25 on a terminal).
void enable_on(std::FILE* out, const char* program, double after, double redraw);
// A number as the lines show it: at most four significant digits, whole numbers from 1000 up.
std::string number(double v);
}  // namespace detail

}  // namespace km::progress
