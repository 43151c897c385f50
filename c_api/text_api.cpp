// Text form of the C API (docs/text-format.md): thin wrappers over the
// printer and parser of core/ir.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "c_api/api_guard.h"
#include "core/text/text_parser.h"
#include "core/text/text_printer.h"

using kf::capi::guard;
using kf::capi::require;

extern "C" {

KF_API kf_status kf_fusion_to_text(kf_fusion f, char** out) {
  return guard([&] {
    const char* fn = "kf_fusion_to_text";
    auto* fusion = static_cast<kf::Fusion*>(require(f, fn, "fusion"));
    require(out, fn, "out");
    const std::string text = kf::print_fusion(*fusion);
    // malloc, not new[]: the caller frees it with kf_string_free from any language.
    auto* copy = static_cast<char*>(std::malloc(text.size() + 1));
    if (copy == nullptr) throw std::bad_alloc();
    std::memcpy(copy, text.c_str(), text.size() + 1);
    *out = copy;
  });
}

KF_API kf_status kf_fusion_from_text(const char* text, kf_fusion* out) {
  return guard([&] {
    const char* fn = "kf_fusion_from_text";
    require(text, fn, "text");
    require(out, fn, "out");
    std::shared_ptr<kf::Fusion> fusion = kf::parse_fusion(text);
    fusion->retain_external();
    *out = fusion.get();
  });
}

KF_API kf_status kf_fusion_from_text_n(const char* text, size_t length, kf_fusion* out) {
  return guard([&] {
    const char* fn = "kf_fusion_from_text_n";
    require(text, fn, "text");
    require(out, fn, "out");
    std::shared_ptr<kf::Fusion> fusion = kf::parse_fusion(std::string_view(text, length));
    fusion->retain_external();
    *out = fusion.get();
  });
}

KF_API void kf_string_free(char* s) { std::free(s); }

}  // extern "C"
