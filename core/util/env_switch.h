// On/off switches read from the environment (KFUSE_SIMPLIFY,
// KFUSE_APPROX_MATH, KFUSE_CPU_DRY_RUN, ...), spelled the same way
// everywhere: unset or empty keeps the default, "0" turns it off, any
// other value on.
#pragma once

namespace kf {

// The switch `name`'s value now. Callers that read it once per process
// keep the answer in a function-local static.
bool env_switch(const char* name, bool fallback);

}  // namespace kf
