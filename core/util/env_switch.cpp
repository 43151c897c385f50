#include "core/util/env_switch.h"

#include <strings.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace kf {

namespace {

bool one_of(const char* v, std::initializer_list<const char*> words) {
  for (const char* w : words)
    if (strcasecmp(v, w) == 0) return true;
  return false;
}

}  // namespace

bool env_switch(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  if (one_of(v, {"0", "false", "off", "no"})) return false;
  if (one_of(v, {"1", "true", "on", "yes"})) return true;
  warn_ignored_env(name, v, "0, false, off or no, or 1, true, on or yes", fallback ? "on" : "off");
  return fallback;
}

std::optional<uint64_t> env_bytes(const char* name, uint64_t least, const std::string& kept) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  // from_chars: digits only (strtoull would read "-1" as 2^64 - 1 and skip spaces).
  const char* end = v + std::strlen(v);
  uint64_t n = 0;
  const auto [stop, error] = std::from_chars(v, end, n);
  if (error == std::errc() && stop == end && n >= least) return n;
  warn_ignored_env(name, v, "a number of bytes, " + std::to_string(least) + " or more", kept);
  return std::nullopt;
}

void warn_ignored_env(const char* name, const char* value, const std::string& accepted, const std::string& kept) {
  // Never destroyed: a thread may still read a setting while the process exits.
  static std::mutex* const mutex = new std::mutex;
  static std::set<std::string>* const warned = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    if (!warned->insert(name).second) return;
  }
  std::string shown(value);
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  const std::string line = std::string("kfuse: ignoring ") + name + "=" + shown + ": expected " + accepted +
                           "; keeping the default (" + kept + ")\n";
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines of two threads do not interleave
}

}  // namespace kf
