#include "core/runtime/cpu/tensor_view.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/runtime/cpu/host_memory.h"
#include "core/util/byte_count.h"
#include "core/util/error.h"

namespace kf::cpu {

TensorView allocate(DType dtype, const Sizes& sizes, const std::vector<int>& order) {
  TensorView t;
  t.dtype = dtype;
  t.sizes = sizes;
  t.strides = compact_strides(sizes, order);
  // Element counts were checked against int64 when sizes were bound, but
  // their bytes can still exceed the address space; then the host memory
  // limit is checked (host_memory.h), both before anything is touched.
  const size_t bytes = allocation_bytes(t.numel(), dtype_size(dtype), "cpu backend: a tensor");
  void* p = host_allocate(bytes);
  // 64-byte aligned, zeroed (deterministic contents for size-0 edge cases).
  std::memset(p, 0, (bytes + 63) / 64 * 64);
  t.storage = std::shared_ptr<void>(p, [bytes](void* q) { host_release(q, bytes); });
  t.data = static_cast<std::byte*>(p);
  return t;
}

double load_f64(DType t, const std::byte* p) {
  switch (t) {
    case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::I8: return *reinterpret_cast<const int8_t*>(p);
    case DType::U8: return *reinterpret_cast<const uint8_t*>(p);
    case DType::Bool: return *reinterpret_cast<const uint8_t*>(p) != 0 ? 1.0 : 0.0;
    case DType::F8E4M3: return e4m3fn_to_float(*reinterpret_cast<const uint8_t*>(p));
    case DType::F8E5M2: return e5m2_to_float(*reinterpret_cast<const uint8_t*>(p));
  }
  return 0;
}

int64_t load_i64(DType t, const std::byte* p) {
  switch (t) {
    case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::I8: return *reinterpret_cast<const int8_t*>(p);
    case DType::U8: return *reinterpret_cast<const uint8_t*>(p);
    case DType::Bool: return *reinterpret_cast<const uint8_t*>(p) != 0 ? 1 : 0;
    default: {
      double v = load_f64(t, p);
      if (std::isnan(v)) return 0;
      if (v >= 9.2233720368547758e18) return INT64_MAX;
      if (v <= -9.2233720368547758e18) return INT64_MIN;
      return static_cast<int64_t>(v);
    }
  }
}

void store_f64(DType t, std::byte* p, double v) {
  switch (t) {
    case DType::F64: std::memcpy(p, &v, 8); return;
    case DType::F32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::F16: { uint16_t h = double_to_half(v); std::memcpy(p, &h, 2); return; }
    case DType::BF16: { uint16_t h = double_to_bf16(v); std::memcpy(p, &h, 2); return; }
    case DType::Bool: *reinterpret_cast<uint8_t*>(p) = v != 0 ? 1 : 0; return;
    case DType::F8E4M3: *reinterpret_cast<uint8_t*>(p) = double_to_e4m3fn(v); return;
    case DType::F8E5M2: *reinterpret_cast<uint8_t*>(p) = double_to_e5m2(v); return;
    default: {
      // Float -> int conversion truncates toward zero (as torch's .to(int)).
      int64_t i;
      if (std::isnan(v)) i = 0;
      else if (v >= 9.2233720368547758e18) i = INT64_MIN;  // x86 cvttsd2si overflow result
      else if (v <= -9.2233720368547758e18) i = INT64_MIN;
      else i = static_cast<int64_t>(v);
      store_i64(t, p, i);
      return;
    }
  }
}

void store_i64(DType t, std::byte* p, int64_t v) {
  switch (t) {
    case DType::I64: std::memcpy(p, &v, 8); return;
    case DType::I32: {
      int32_t w = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
      std::memcpy(p, &w, 4);
      return;
    }
    case DType::I8:
    case DType::U8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(static_cast<uint64_t>(v)); return;
    case DType::Bool: *reinterpret_cast<uint8_t*>(p) = v != 0 ? 1 : 0; return;
    default: store_f64(t, p, static_cast<double>(v)); return;
  }
}

TensorView broadcast_to(const TensorView& t, const Sizes& sizes) {
  TensorView v = t;
  const size_t r = sizes.size(), tr = t.sizes.size();
  v.sizes = sizes;
  v.strides.assign(r, 0);
  for (size_t j = 0; j < tr; ++j) {
    size_t d = r - tr + j;
    v.strides[d] = (t.sizes[j] == 1 && sizes[d] != 1) ? 0 : t.strides[j];
  }
  return v;
}

void copy_into(const TensorView& src, const TensorView& dst) {
  const bool as_int = !is_float(src.dtype) && !is_float(dst.dtype);
  ElementBuffer buf;
  for_each_index(dst.sizes, [&](const int64_t* idx) {
    const std::byte* s = src.read(idx, buf);
    if (as_int) store_i64(dst.dtype, dst.at(idx), load_i64(src.dtype, s));
    else if (src.dtype == DType::I64) store_f64(dst.dtype, dst.at(idx), static_cast<double>(load_i64(src.dtype, s)));
    else store_f64(dst.dtype, dst.at(idx), load_f64(src.dtype, s));
  });
}

Sizes distinct_sizes(const Sizes& sizes, const std::vector<int64_t>& strides) {
  Sizes out = sizes;
  for (size_t d = 0; d < out.size(); ++d)
    if (strides[d] == 0 && out[d] > 1) out[d] = 1;
  return out;
}

TensorView materialize(const TensorView& t) { return t.deferred() ? own_copy(t) : t; }

TensorView own_copy(const TensorView& t) {
  TensorView out = allocate(t.dtype, distinct_sizes(t.sizes, t.strides));
  const size_t size = static_cast<size_t>(dtype_size(t.dtype));
  ElementBuffer buf;
  for_each_index(out.sizes, [&](const int64_t* idx) { std::memcpy(out.at(idx), t.read(idx, buf), size); });
  return broadcast_to(out, t.sizes);
}

void unravel(int64_t offset, const Sizes& sizes, int64_t* index) {
  for (size_t d = sizes.size(); d > 1; --d) {
    index[d - 1] = offset % sizes[d - 1];
    offset /= sizes[d - 1];
  }
  if (!sizes.empty()) index[0] = offset;
}

}  // namespace kf::cpu
