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

}  // namespace km::progress
