// libFuzzer target: concretize with arbitrary DLTensor metadata (rank,
// shape, strides, offsets, dtype, lanes, device) against a few fixed
// fusions. Only metadata is read (scalar inputs read 8 bytes of a real
// buffer), so any metadata must give KF_OK or a clean error.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kfuse/kfuse.h"

namespace {

const char* const kFusions[] = {
    "input x: tensor<float32, 2>\ninput b: tensor<float32, 1>\ns = add(x, b)\ny = relu(s)\noutput y\n",
    "input x: tensor<bfloat16, 3>\nm = sum(x) {axes=[0, 2], keepdim=true}\nd = sub(x, m)\noutput d\n",
    "input x: tensor<float64, 2>\ninput n: scalar<int64>\nconst m1: int64 = -1\n"
    "r = reshape(x, [n, m1])\np = permute(r) {perm=[1, 0]}\noutput p\n",
    "input a: tensor<int32, 2>\ninput b: tensor<int32, 2>\nc = cat(a, b) {dim=1}\n"
    "s = slice(c) {dim=0, start=1, stop=end, step=2}\noutput s\n",
    "input x: tensor<float16, 1>\ninput i: tensor<int64, 1>\ng = index_select(x, i) {dim=0}\noutput g\n",
};

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int64_t wide() {  // mostly small, sometimes extreme sizes and strides
    uint8_t k = byte();
    if (k < 200) return k % 9;
    if (k < 240) return -static_cast<int64_t>(k % 4);
    int64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
};

kf_fusion fusion(size_t i) {
  static kf_fusion cache[sizeof kFusions / sizeof kFusions[0]] = {};
  if (!cache[i] && kf_fusion_from_text(kFusions[i], &cache[i]) != KF_OK) std::abort();
  return cache[i];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  kf_fusion f = fusion(in.byte() % (sizeof kFusions / sizeof kFusions[0]));
  alignas(16) static uint8_t buffer[64];
  size_t n_inputs = 0;
  kf_fusion_num_inputs(f, &n_inputs);
  size_t n = (n_inputs + (in.byte() % 3)) - 1;  // sometimes one too few or many
  std::vector<DLTensor> tensors(n + 1);
  std::vector<std::vector<int64_t>> shapes(n + 1), strides(n + 1);
  std::vector<const DLTensor*> ptrs;
  for (size_t i = 0; i < n; ++i) {
    DLTensor& t = tensors[i];
    int rank = in.byte() % 5;
    shapes[i].resize(static_cast<size_t>(rank));
    strides[i].resize(static_cast<size_t>(rank));
    for (auto& s : shapes[i]) s = in.wide();
    for (auto& s : strides[i]) s = in.wide();
    t.data = (in.byte() % 16) ? buffer : nullptr;
    t.device.device_type = static_cast<DLDeviceType>((in.byte() % 8) == 0 ? in.byte() : kDLCPU);
    t.device.device_id = 0;
    t.ndim = rank;
    t.dtype.code = in.byte() % 8;
    t.dtype.bits = static_cast<uint8_t>(8 << (in.byte() % 4));
    t.dtype.lanes = (in.byte() % 16) ? 1 : in.byte();
    t.shape = shapes[i].data();
    t.strides = (in.byte() % 2) ? strides[i].data() : nullptr;
    t.byte_offset = in.byte() % 9;
    ptrs.push_back((in.byte() % 32) ? &t : nullptr);
  }
  kf_concrete c = nullptr;
  if (kf_concretize(f, ptrs.data(), ptrs.size(), &c) == KF_OK) {
    char* text = nullptr;
    if (kf_concrete_describe(c, &text) != KF_OK) std::abort();
    kf_string_free(text);
    kf_segmentation s = nullptr;
    if (kf_segment(c, &s) != KF_OK) std::abort();
    kf_segmentation_release(s);
    kf_concrete_release(c);
  }
  return 0;
}
