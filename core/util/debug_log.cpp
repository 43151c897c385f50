#include "core/util/debug_log.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

namespace kf {

namespace {

double wall_ms() {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point origin = Clock::now();
  return std::chrono::duration<double, std::milli>(Clock::now() - origin).count();
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace

bool debug_topic(const char* topic) {
  static const std::string topics = [] {
    const char* v = std::getenv("KFUSE_DEBUG");
    return v ? std::string(",") + v + "," : std::string();
  }();
  if (topics.empty()) return false;
  return topics.find(std::string(",") + topic + ",") != std::string::npos ||
         topics.find(",all,") != std::string::npos;
}

void debug_write(const char* topic, const std::string& text) {
  std::string line = std::string("kfuse[") + topic + "] " + text;
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

DebugStep::DebugStep(const char* topic) : topic_(topic), on_(debug_topic(topic)) {
  if (!on_) return;
  wall0_ = wall_ms();
  cpu0_ = thread_cpu_ms();
}

void DebugStep::done(const std::string& what) const {
  if (!on_) return;
  const double wall = wall_ms() - wall0_, cpu = thread_cpu_ms() - cpu0_;
  // A short id per thread, enough to tell the compile pool's threads apart.
  const unsigned tid = static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 10000);
  char head[48], tail[64];
  std::snprintf(head, sizeof head, "+%.1f ms t%04u ", wall0_, tid);
  std::snprintf(tail, sizeof tail, ": %.2f ms wall, %.2f ms cpu\n", wall, cpu);
  debug_write(topic_, head + what + tail);
}

}  // namespace kf
