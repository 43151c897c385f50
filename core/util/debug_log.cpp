#include "core/util/debug_log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

namespace kf {

bool debug_topic(const char* topic) {
  static const std::string topics = [] {
    const char* v = std::getenv("KFUSE_DEBUG");
    return v ? std::string(",") + v + "," : std::string();
  }();
  if (topics.empty()) return false;
  return topics.find(std::string(",") + topic + ",") != std::string::npos ||
         topics.find(",all,") != std::string::npos;
}

double debug_ms() {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point origin = Clock::now();
  return std::chrono::duration<double, std::milli>(Clock::now() - origin).count();
}

void debug_write(const char* topic, const std::string& text) {
  std::string line = std::string("kfuse[") + topic + "] " + text;
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void debug_step(const char* topic, const std::string& what, double start_ms) {
  const double now = debug_ms();
  // A short id per thread, enough to tell the compile pool's threads apart.
  const unsigned tid = static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 10000);
  char head[64];
  std::snprintf(head, sizeof head, "+%.1f ms t%04u ", start_ms, tid);
  char tail[32];
  std::snprintf(tail, sizeof tail, " %.2f ms\n", now - start_ms);
  debug_write(topic, head + what + tail);
}

}  // namespace kf
