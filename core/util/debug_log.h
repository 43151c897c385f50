// KFUSE_DEBUG: a comma-separated list of topics ("pipeline", "simplify",
// "compile", or "all") whose log lines go to stderr. Read once per process.
#pragma once

#include <string>

namespace kf {

// Whether KFUSE_DEBUG names `topic` (or "all").
bool debug_topic(const char* topic);

// Writes "kfuse[topic] text" (text should end in a newline) to stderr in
// one write, so that lines from the compile pool's threads do not mix.
void debug_write(const char* topic, const std::string& text);

// One step of a timeline ("compile"): started at construction when the
// topic is on; done() logs
//   kfuse[topic] +T ms t<thread> <what>: <wall> ms wall, <u> ms user,
//   <s> ms sys, <n> page faults
// where T is the start in ms since the process's first step, and user,
// sys and the faults are the calling thread's over the step (getrusage:
// wall far above user + sys means the thread waited; sys is the kernel's
// work for it, such as page faults).
class DebugStep {
 public:
  explicit DebugStep(const char* topic);
  explicit operator bool() const { return on_; }
  void done(const std::string& what) const;

 private:
  const char* topic_;
  bool on_;
  double wall0_ = 0, user0_ = 0, sys0_ = 0;
  long faults0_ = 0;
};

}  // namespace kf
