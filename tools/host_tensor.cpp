#include "host_tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <new>

#include "core/ir/fp8.h"

namespace kfcli {

namespace {

// float8 storage, the same code as the generated kernels' (core/ir/fp8.h).
#define KF_PM_ADD(a, b) ((a) + (b))
#define KF_PM_SUB(a, b) ((a) - (b))
#define KF_PM_F2U(f) std::bit_cast<uint32_t>(f)
#define KF_PM_U2F(u) std::bit_cast<float>(static_cast<uint32_t>(u))
KF_FP8_CONVERSIONS(inline)
#undef KF_PM_ADD
#undef KF_PM_SUB
#undef KF_PM_F2U
#undef KF_PM_U2F

// IEEE-style narrow float with `mantissa` stored bits and exponent `bias`
// (half: 10, 15; bfloat16: 7, 127), rounded once, to nearest even.
uint16_t narrow_float(double d, int mantissa, int bias) {
  const int max_exp = 2 * bias + 1;  // all-ones exponent: inf / NaN
  const uint16_t sign = std::signbit(d) ? uint16_t(0x8000) : uint16_t(0);
  const uint16_t inf = static_cast<uint16_t>(max_exp << mantissa);
  if (std::isnan(d)) return static_cast<uint16_t>(sign | inf | (1u << (mantissa - 1)));
  const double a = std::fabs(d);
  const double scale = std::ldexp(1.0, mantissa);
  if (a < std::ldexp(1.0, 1 - bias)) {  // subnormal (may round up to the smallest normal)
    const double q = std::nearbyint(a / std::ldexp(1.0, 1 - bias - mantissa));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
  }
  int e2 = 0;
  std::frexp(a, &e2);
  int e = e2 - 1;
  double q = std::nearbyint((std::ldexp(a, -e) - 1.0) * scale);  // exact before rounding
  if (q == scale) {
    q = 0;
    ++e;
  }
  if (e + bias >= max_exp || std::isinf(a)) return static_cast<uint16_t>(sign | inf);
  return static_cast<uint16_t>(sign | ((e + bias) << mantissa) | static_cast<uint16_t>(q));
}

double widen_float(uint16_t bits, int mantissa, int bias) {
  const int max_exp = 2 * bias + 1;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int e = (bits & 0x7fff) >> mantissa;
  const int m = bits & ((1 << mantissa) - 1);
  if (e == max_exp) return m ? std::nan("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mantissa);
  return sign * std::ldexp(1.0 + std::ldexp(m, -mantissa), e - bias);
}

std::vector<int64_t> compact_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d > 1; --d) s[d - 2] = s[d - 1] * shape[d - 1];
  return s;
}

}  // namespace

bool parse_layout(const std::string& name, Layout* out) {
  if (name == "contiguous") *out = Layout::Contiguous;
  else if (name == "transposed") *out = Layout::Transposed;
  else if (name == "strided") *out = Layout::Strided;
  else if (name == "broadcast") *out = Layout::Broadcast;
  else return false;
  return true;
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Strided: return "strided";
    case Layout::Broadcast: return "broadcast";
  }
  return "?";
}

bool parse_out_layout(const std::string& name, OutLayout* out) {
  if (name == "kfuse") *out = OutLayout::Kfuse;
  else if (name == "row-major") *out = OutLayout::RowMajor;
  else if (name == "transposed") *out = OutLayout::Transposed;
  else return false;
  return true;
}

const char* out_layout_name(OutLayout layout) {
  switch (layout) {
    case OutLayout::Kfuse: return "kfuse";
    case OutLayout::RowMajor: return "row-major";
    case OutLayout::Transposed: return "transposed";
  }
  return "?";
}

int dtype_bytes(kf_dtype dtype) {
  switch (dtype) {
    case KF_FLOAT64:
    case KF_INT64: return 8;
    case KF_FLOAT32:
    case KF_INT32: return 4;
    case KF_FLOAT16:
    case KF_BFLOAT16: return 2;
    default: return 1;
  }
}

bool is_floating(kf_dtype dtype) {
  return dtype == KF_FLOAT64 || dtype == KF_FLOAT32 || dtype == KF_FLOAT16 || dtype == KF_BFLOAT16 ||
         dtype == KF_FLOAT8_E4M3FN || dtype == KF_FLOAT8_E5M2;
}

DLDataType dlpack_type(kf_dtype dtype) {
  DLDataType t{kDLFloat, 32, 1};
  switch (dtype) {
    case KF_FLOAT64: t = {kDLFloat, 64, 1}; break;
    case KF_FLOAT32: t = {kDLFloat, 32, 1}; break;
    case KF_FLOAT16: t = {kDLFloat, 16, 1}; break;
    case KF_BFLOAT16: t = {kDLBfloat, 16, 1}; break;
    case KF_INT64: t = {kDLInt, 64, 1}; break;
    case KF_INT32: t = {kDLInt, 32, 1}; break;
    case KF_INT8: t = {kDLInt, 8, 1}; break;
    case KF_UINT8: t = {kDLUInt, 8, 1}; break;
    case KF_FLOAT8_E4M3FN: t = {KF_DLPACK_FLOAT8_E4M3FN_CODE, 8, 1}; break;
    case KF_FLOAT8_E5M2: t = {KF_DLPACK_FLOAT8_E5M2_CODE, 8, 1}; break;
    default: t = {KF_DLPACK_BOOL_CODE, 8, 1}; break;
  }
  return t;
}

kf_dtype dtype_of(DLDataType type) {
  for (int d = 0; d < KF_DTYPE_COUNT; ++d) {
    DLDataType t = dlpack_type(static_cast<kf_dtype>(d));
    if (t.code == type.code && t.bits == type.bits && type.lanes == 1) return static_cast<kf_dtype>(d);
  }
  return KF_DTYPE_COUNT;
}

double load_element(kf_dtype dtype, const void* p) {
  switch (dtype) {
    case KF_FLOAT64: { double x; std::memcpy(&x, p, 8); return x; }
    case KF_FLOAT32: { float x; std::memcpy(&x, p, 4); return x; }
    case KF_FLOAT16: { uint16_t x; std::memcpy(&x, p, 2); return widen_float(x, 10, 15); }
    case KF_BFLOAT16: { uint16_t x; std::memcpy(&x, p, 2); return widen_float(x, 7, 127); }
    case KF_INT64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    case KF_INT32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case KF_INT8: return *static_cast<const int8_t*>(p);
    case KF_UINT8: return *static_cast<const uint8_t*>(p);
    case KF_FLOAT8_E4M3FN: return kf_e4m3_to_f(*static_cast<const uint8_t*>(p));
    case KF_FLOAT8_E5M2: return kf_e5m2_to_f(*static_cast<const uint8_t*>(p));
    default: return *static_cast<const uint8_t*>(p) != 0 ? 1.0 : 0.0;
  }
}

void store_element(kf_dtype dtype, void* p, double value) {
  switch (dtype) {
    case KF_FLOAT64: std::memcpy(p, &value, 8); break;
    case KF_FLOAT32: { float x = static_cast<float>(value); std::memcpy(p, &x, 4); break; }
    case KF_FLOAT16: { uint16_t x = narrow_float(value, 10, 15); std::memcpy(p, &x, 2); break; }
    case KF_BFLOAT16: { uint16_t x = narrow_float(value, 7, 127); std::memcpy(p, &x, 2); break; }
    case KF_INT64: { int64_t x = static_cast<int64_t>(value); std::memcpy(p, &x, 8); break; }
    case KF_INT32: { int32_t x = static_cast<int32_t>(value); std::memcpy(p, &x, 4); break; }
    case KF_INT8:
    case KF_UINT8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(static_cast<int64_t>(value)); break;
    case KF_FLOAT8_E4M3FN: *static_cast<uint8_t*>(p) = kf_f_to_e4m3(static_cast<float>(value)); break;
    case KF_FLOAT8_E5M2: *static_cast<uint8_t*>(p) = kf_f_to_e5m2(static_cast<float>(value)); break;
    default: *static_cast<uint8_t*>(p) = value != 0 ? 1 : 0; break;
  }
}

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform(double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t HostTensor::offset_of(int64_t linear) const {
  int64_t offset = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    offset += (linear % shape[d]) * strides[d];
    linear /= shape[d];
  }
  return offset;
}

double HostTensor::get(int64_t linear) const {
  return load_element(dtype, storage.data() + offset_of(linear) * dtype_bytes(dtype));
}

DLTensor HostTensor::dl() {
  DLTensor t{};
  t.data = storage.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int>(shape.size());
  t.dtype = dlpack_type(dtype);
  t.shape = shape.empty() ? nullptr : shape.data();
  t.strides = strides.empty() ? nullptr : strides.data();
  t.byte_offset = 0;
  return t;
}

HostTensor random_tensor(kf_dtype dtype, const std::vector<int64_t>& shape, Layout layout,
                         Rng& rng) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  const size_t rank = shape.size();
  // Elements and bytes counted without overflow: a shape past 2^64 bytes
  // is out of memory like any other too large for the host (2^62 float32
  // elements wrapped to an empty buffer, which the loop below overran).
  int64_t elements = std::count(shape.begin(), shape.end(), 0) > 0 ? 0 : 1;  // (0 x 2^62 x 2^62 is empty)
  for (int64_t s : shape)
    if (__builtin_mul_overflow(elements, s, &elements)) throw std::bad_alloc();
  if (layout == Layout::Strided && __builtin_mul_overflow(elements, 2, &elements)) throw std::bad_alloc();
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(std::max<int64_t>(elements, 1)), dtype_bytes(dtype), &bytes) ||
      bytes > t.storage.max_size())  // (past it, vector throws length_error)
    throw std::bad_alloc();
  t.strides = compact_strides(shape);
  switch (layout) {
    case Layout::Contiguous: break;
    case Layout::Transposed:
      // Memory holds the reversed dims row-major: column-major strides.
      for (size_t d = 0, s = 1; d < rank; s *= static_cast<size_t>(shape[d]), ++d)
        t.strides[d] = static_cast<int64_t>(s);
      break;
    case Layout::Strided:
      for (auto& s : t.strides) s *= 2;
      break;
    case Layout::Broadcast:
      // Every index of dim 0 reads the same slice.
      if (rank >= 1 && shape[0] > 1) {
        t.strides[0] = 0;
        bytes /= static_cast<size_t>(shape[0]);
      }
      break;
  }
  // At least one element, so that even an empty tensor has a data pointer.
  t.storage.assign(std::max(bytes, static_cast<size_t>(dtype_bytes(dtype))), std::byte{0});
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (is_floating(dtype)) v = rng.uniform(-2.0, 2.0);
    else if (dtype == KF_BOOL) v = static_cast<double>(rng.next() & 1);
    else v = static_cast<double>(rng.next() % 4);
    store_element(dtype, t.storage.data() + t.offset_of(i) * dtype_bytes(dtype), v);
  }
  return t;
}

HostTensor zeros(kf_dtype dtype, const std::vector<int64_t>& shape, bool transposed) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = compact_strides(shape);
  if (transposed)
    for (size_t d = 0, s = 1; d < shape.size(); s *= static_cast<size_t>(shape[d]), ++d)
      t.strides[d] = static_cast<int64_t>(s);
  t.storage.assign(static_cast<size_t>(std::max<int64_t>(t.numel(), 1)) * dtype_bytes(dtype), std::byte{0});
  return t;
}

HostTensor scalar_tensor(kf_dtype dtype, double value) {
  HostTensor t;
  t.dtype = dtype;
  t.storage.assign(static_cast<size_t>(dtype_bytes(dtype)), std::byte{0});
  store_element(dtype, t.storage.data(), value);
  return t;
}

HostTensor convert(const HostTensor& t, kf_dtype dtype) {
  HostTensor c = zeros(dtype, t.shape);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) store_element(dtype, c.storage.data() + i * dtype_bytes(dtype), t.get(i));
  return c;
}

std::vector<double> read_values(const DLTensor& t) {
  const kf_dtype dtype = dtype_of(t.dtype);
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<int64_t> strides =
      t.strides ? std::vector<int64_t>(t.strides, t.strides + t.ndim) : compact_strides(shape);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> values(static_cast<size_t>(n));
  const auto* base = static_cast<const std::byte*>(t.data) + t.byte_offset;
  for (int64_t i = 0; i < n; ++i) {
    int64_t linear = i, offset = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      offset += (linear % shape[d]) * strides[d];
      linear /= shape[d];
    }
    values[static_cast<size_t>(i)] = load_element(dtype, base + offset * dtype_bytes(dtype));
  }
  return values;
}

size_t span_bytes(const DLTensor& t) {
  int64_t last = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return 0;
    int64_t stride = t.strides ? t.strides[d] : 1;
    if (!t.strides)
      for (int k = d + 1; k < t.ndim; ++k) stride *= t.shape[k];
    last += (t.shape[d] - 1) * stride;
  }
  return static_cast<size_t>(last + 1) * static_cast<size_t>(dtype_bytes(dtype_of(t.dtype)));
}

std::string shape_string(const int64_t* shape, int ndim) {
  std::string s = "[";
  for (int d = 0; d < ndim; ++d) {
    if (d) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

}  // namespace kfcli
