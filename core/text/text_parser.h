// The fusion text form (docs/text-format.md), parsing side. Every statement
// is one kf::Builder call, so the text of a fusion parses back, through the
// definition cache, to the very same Fusion object.
#pragma once

#include <memory>
#include <string_view>

#include "core/ir/fusion.h"

namespace kf {

// Parses `text` and returns the cached fusion it defines. Throws kf::Error:
// KF_ERR_PARSE for malformed text, or the builder's own status for a
// well-formed but invalid definition (a rank mismatch, say); every message
// starts with "line L, column C: " (1-based, columns count bytes). The
// parser is iterative and bounds-checked: any byte sequence is safe input.
std::shared_ptr<Fusion> parse_fusion(std::string_view text);

}  // namespace kf
