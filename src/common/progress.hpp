// Progress for a person waiting: loading a file, k-means++, the iterations, writing the
// output. On a terminal one line is rewritten in place; otherwise a plain line at most every
// few seconds; nothing unless enabled (the CLI enables it without --quiet). A stage shows only
// once it has lasted a second (KMEANS_PROGRESS_AFTER=seconds changes that). Main thread only.
#pragma once

#include <string>

namespace km::progress {

// `program` prefixes the lines ("kmeans").
void enable(const char* program);
void disable();

// done of total (in `unit`s, e.g. "MB", "centres", "iterations") in `stage`, with an optional
// detail after the rate and time left.
void update(const char* stage, double done, double total, const char* unit, const std::string& detail = {});

// Ends the current stage (the in-place line gets its newline).
void end_stage();

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

}  // namespace km::progress
