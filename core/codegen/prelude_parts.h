// The part of the device prelude (prelude.h) that one kernel's text uses,
// so NVRTC parses a few kilobytes instead of all of it (its front end
// spends about 6-10 ms per unit on the whole prelude; docs/cuda-runtime.md,
// "Compilation").
//
// The prelude is cut into its top-level declarations (a function, a struct,
// a #define, an #if ... #endif group). A declaration *declares* the kf_ and
// KF_ names in its head (before its body's '{'; for a directive, the macros
// it defines), so every overload of a name, every specialization of a
// template and every operator taking a kf_ type goes with that name. The
// result keeps, in prelude order, the declarations that declare a name the
// text uses, then those their own text uses, and so on, plus every
// declaration that declares no kf_/KF_ name at all.
#pragma once

#include <string>
#include <string_view>

namespace kf {

// The prelude text `body` (a kernel's argument struct and kernels) needs.
std::string prelude_for(std::string_view body);

// The same for any prelude-shaped `prelude` (for tests).
std::string prelude_part(std::string_view prelude, std::string_view body);

}  // namespace kf
