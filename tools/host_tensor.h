// Host tensors for the CLI: typed element access through strides, the test
// layouts of `kfuse run`, and seeded random data. The CLI uses only the
// public C API, so the dtype helpers here are its own, not the core's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kfuse/kfuse.h"

namespace kfcli {

enum class Layout { Contiguous, Transposed, Strided, Broadcast };

bool parse_layout(const std::string& name, Layout* out);
const char* layout_name(Layout layout);

// Outputs: kfuse's own layout (kf_execute allocates them), or allocated by
// the caller (kf_execute_into) row-major or with reversed memory order.
enum class OutLayout { Kfuse, RowMajor, Transposed };

bool parse_out_layout(const std::string& name, OutLayout* out);
const char* out_layout_name(OutLayout layout);

int dtype_bytes(kf_dtype dtype);
bool is_floating(kf_dtype dtype);
DLDataType dlpack_type(kf_dtype dtype);
// nullopt-free mapping for outputs: KF_DTYPE_COUNT when not a kfuse dtype.
kf_dtype dtype_of(DLDataType type);

// One element at `p` as a double, and a double stored with one rounding.
double load_element(kf_dtype dtype, const void* p);
void store_element(kf_dtype dtype, void* p, double value);

// splitmix64: a tiny generator whose sequence is the same everywhere, so
// `--seed N` reproduces the same inputs on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform(double lo, double hi);  // [lo, hi)

 private:
  uint64_t state_;
};

// A CPU tensor that owns its storage. Strides are in elements; the storage
// may be larger than the element count (strided layout) or smaller
// (broadcast layout). The DLTensor from dl() points into this object: keep
// it alive (and unmoved) while the DLTensor is in use.
struct HostTensor {
  kf_dtype dtype = KF_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::vector<std::byte> storage;

  int64_t numel() const;
  // Offset in elements of the element at row-major position `linear`.
  int64_t offset_of(int64_t linear) const;
  double get(int64_t linear) const;
  DLTensor dl();
};

// Random values in `layout`: floats uniform in [-2, 2) rounded to the dtype,
// integers in [0, 4) (valid as small indices), bools 0/1.
HostTensor random_tensor(kf_dtype dtype, const std::vector<int64_t>& shape, Layout layout,
                         Rng& rng);
// A compact row-major tensor of zeros; `transposed`: its dims in reversed
// memory order (column-major strides), as a caller allocates an output in
// another memory order.
HostTensor zeros(kf_dtype dtype, const std::vector<int64_t>& shape, bool transposed = false);
// A 0-dim tensor holding `value`.
HostTensor scalar_tensor(kf_dtype dtype, double value);
// The same logical values, compact row-major, stored as `dtype`.
HostTensor convert(const HostTensor& t, kf_dtype dtype);

// Row-major values of a DLTensor whose memory is readable on the host.
std::vector<double> read_values(const DLTensor& t);
// Bytes from the data pointer (after byte_offset) to one past the last
// element the tensor's strides reach; 0 for an empty tensor.
size_t span_bytes(const DLTensor& t);

std::string shape_string(const int64_t* shape, int ndim);

}  // namespace kfcli
