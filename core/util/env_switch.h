// Settings read from the environment, spelled the same way everywhere.
//
// On/off switches (KFUSE_SIMPLIFY, KFUSE_APPROX_MATH, KFUSE_CPU_DRY_RUN,
// KFUSE_EPILOGUE_FALLBACK, ...): unset or empty keeps the default; "0",
// "false", "off" or "no" turns the switch off; "1", "true", "on" or "yes"
// turns it on (any case). Any other value keeps the default and warns once:
// reading "false" as on once made `KFUSE_CPU_DRY_RUN=false kfuse run` skip
// the computation and still say PASS.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kf {

// The switch `name`'s value now. Callers that read it once per process
// keep the answer in a function-local static.
bool env_switch(const char* name, bool fallback);

// A byte count from the environment (KFUSE_CPU_MEMORY_LIMIT...): decimal
// digits only, at least `least`. Unset or empty: nullopt; anything else
// unreadable ("-1", "4G", " 5") warns once (warn_ignored_env, saying the
// default `kept` stays) and is nullopt too.
std::optional<uint64_t> env_bytes(const char* name, uint64_t least, const std::string& kept);

// Writes one line on stderr, "kfuse: ignoring NAME=VALUE: expected
// ACCEPTED; keeping the default (KEPT)", the first time it is called for
// `name` in the process (thread-safe): a setting kfuse cannot read must not
// pass silently, nor repeat in a log at every read. Nonprintable bytes of
// the value are written as '?', so that it stays one line.
void warn_ignored_env(const char* name, const char* value, const std::string& accepted, const std::string& kept);

}  // namespace kf
