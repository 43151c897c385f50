// libFuzzer target: the text parser. Any bytes must give KF_OK or a parse
// error with a position, never a crash; whatever parses must print and
// parse back to the same fusion handle.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kfuse/kfuse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Every byte counts: NUL bytes inside the input are parse errors too.
  kf_fusion f = nullptr;
  kf_status st = kf_fusion_from_text_n(reinterpret_cast<const char*>(data), size, &f);
  if (st == KF_ERR_PARSE && std::strncmp(kf_last_error(), "line ", 5) != 0) std::abort();
  if (st != KF_OK) return 0;
  char* printed = nullptr;
  if (kf_fusion_to_text(f, &printed) != KF_OK) std::abort();
  kf_fusion again = nullptr;
  if (kf_fusion_from_text(printed, &again) != KF_OK || again != f) std::abort();
  kf_string_free(printed);
  kf_fusion_release(again);
  kf_fusion_release(f);
  return 0;
}
