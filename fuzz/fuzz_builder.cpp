// libFuzzer target: the builder driven by a byte stream of calls (define
// inputs and constants, generic op records with arbitrary ids and
// attributes, outputs). Invalid calls must fail cleanly; a finalized fusion
// must round-trip through its text form to the same handle.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kfuse/kfuse.h"

namespace {

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int64_t small() { return static_cast<int8_t>(byte()); }  // -128..127
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  kf_builder b = nullptr;
  if (kf_builder_create(&b) != KF_OK) std::abort();
  int64_t values = 0;
  bool has_output = false;
  for (int step = 0; step < 64 && in.n > 0; ++step) {
    uint8_t kind = in.byte() % 8;
    int64_t id = -1;
    if (kind == 0) {
      if (kf_define_tensor(b, in.byte() % 5, static_cast<kf_dtype>(in.byte() % 8), &id) == KF_OK) ++values;
    } else if (kind == 1) {
      if (kf_define_scalar(b, static_cast<kf_dtype>(in.byte() % 8), &id) == KF_OK) ++values;
    } else if (kind == 2) {
      if (kf_define_constant_i64(b, in.small(), static_cast<kf_dtype>(in.byte() % 8), &id) == KF_OK) ++values;
    } else if (kind == 3) {
      if (kf_add_output(b, values ? in.byte() % (values + 1) : 0, nullptr, 0, in.small() % 3) == KF_OK)
        has_output = true;
    } else {
      kf_op op = static_cast<kf_op>(in.byte() % (KF_OP_COUNT + 2));
      size_t nargs = in.byte() % 6, nattrs = in.byte() % 6;
      std::vector<int64_t> args(nargs), attrs(nattrs);
      for (auto& a : args) a = values ? static_cast<int64_t>(in.byte()) % (values + 1) : in.small();
      for (auto& a : attrs) a = in.small();
      int64_t outs[2];
      if (kf_builder_op(b, op, args.data(), nargs, attrs.data(), nattrs, outs, 2) == KF_OK)
        values += kf_op_num_outputs(op);
    }
  }
  kf_fusion f = nullptr;
  if (kf_builder_finalize(b, &f) == KF_OK) {
    if (!has_output) std::abort();
    char* text = nullptr;
    if (kf_fusion_to_text(f, &text) != KF_OK) std::abort();
    kf_fusion again = nullptr;
    if (kf_fusion_from_text(text, &again) != KF_OK || again != f) std::abort();
    kf_string_free(text);
    kf_fusion_release(again);
    kf_fusion_release(f);
  }
  kf_builder_destroy(b);
  return 0;
}
