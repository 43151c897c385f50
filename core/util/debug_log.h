// KFUSE_DEBUG: a comma-separated list of topics ("pipeline", "simplify",
// "compile", or "all") whose log lines go to stderr. Read once per process.
#pragma once

#include <string>

namespace kf {

// Whether KFUSE_DEBUG names `topic` (or "all").
bool debug_topic(const char* topic);

// Milliseconds since the process's first call of debug_ms(): the time axis
// of the "compile" timeline.
double debug_ms();

// Writes "kfuse[topic] text" (text should end in a newline) to stderr in
// one write, so that lines from the compile pool's threads do not mix.
void debug_write(const char* topic, const std::string& text);

// One timeline line: "kfuse[topic] +T ms t<thread> <what> <ms> ms\n",
// where T is when the step started.
void debug_step(const char* topic, const std::string& what, double start_ms);

}  // namespace kf
