#include "core/util/debug_log.h"

#include <sys/resource.h>

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

// The calling thread's user and system CPU time (ms) and page faults.
struct ThreadUsage {
  double user = 0, sys = 0;
  long minor_faults = 0, major_faults = 0;
};

ThreadUsage thread_usage() {
  rusage r{};
  getrusage(RUSAGE_THREAD, &r);
  const auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) * 1e-3; };
  return {ms(r.ru_utime), ms(r.ru_stime), r.ru_minflt, r.ru_majflt};
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
  const ThreadUsage u = thread_usage();
  user0_ = u.user;
  sys0_ = u.sys;
  faults0_ = u.minor_faults + u.major_faults;
}

void DebugStep::done(const std::string& what) const {
  if (!on_) return;
  const double wall = wall_ms() - wall0_;
  const ThreadUsage u = thread_usage();
  // A short id per thread, enough to tell the compile pool's threads apart.
  const unsigned tid = static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 10000);
  char head[48], tail[128];
  std::snprintf(head, sizeof head, "+%.1f ms t%04u ", wall0_, tid);
  std::snprintf(tail, sizeof tail, ": %.2f ms wall, %.2f ms user, %.2f ms sys, %ld page faults\n", wall,
                u.user - user0_, u.sys - sys0_, u.minor_faults + u.major_faults - faults0_);
  debug_write(topic_, head + what + tail);
}

}  // namespace kf
