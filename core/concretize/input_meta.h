// Reads and checks the DLPack metadata of the inputs of one call against the
// definition: rank, dtype, device, sizes, strides, offsets. Data pointers are
// never dereferenced, except the data of scalar inputs (0-dim CPU tensors).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/concretize/shape_inference.h"
#include "core/ir/fusion.h"

namespace kf {

enum class DeviceKind : uint8_t { CPU = 1, CUDA = 2 };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int id = 0;
  bool operator==(const Device&) const = default;
};

// The DLPack device type as an int. Reading the enum field directly is
// undefined behaviour when a caller stored a value outside the enum.
int device_type_code(const DLDevice& d);
// kDLCPU and kDLCUDAHost are host memory; kDLCUDA and kDLCUDAManaged are
// device memory; anything else is not supported (nullopt).
std::optional<DeviceKind> device_kind(const DLDevice& d);

struct InputMeta {
  Device device;
  Extents sizes;
  Extents strides;               // elements; filled in when DLPack's are NULL
  std::byte* data = nullptr;     // data + byte_offset
  int alignment = 16;            // largest power of two <= 16 dividing the address
  int64_t max_offset = 0;        // largest element offset reached
  int64_t count = 0;             // elements
  double scalar = 0;             // scalar inputs: value
  int64_t scalar_i64 = 0;        // integer (and bool) scalar inputs: exact value
};

// How messages name a tensor of a call: "input 1 (value 3)", or with the
// API call first, "kf_execute_segment: output 0 (value 7)". Streamed only
// when a message is built: checks on the hot path must not allocate.
struct TensorName {
  const char* fn;    // nullptr: no prefix
  const char* what;  // "input", "output"
  size_t index;
  int64_t value;
};
std::ostream& operator<<(std::ostream& os, const TensorName& n);

// Checks tensor `t` bound to value `v` (rank, dtype, device, sizes, strides,
// offset, alignment; scalars are read) and writes its metadata into `m`
// (every field). `name` names it in messages.
void read_tensor(const Value& v, const DLTensor* t, const TensorName& name, InputMeta* m);

// Checks input `index` and writes its metadata into `m` (every field).
void read_input(const Fusion& fusion, size_t index, const DLTensor* t, InputMeta* m);

// Checks all inputs (count, each one, one device) and writes their metadata
// into `metas` (its storage is reused) and the device the fusion runs on.
void read_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs,
                 std::vector<InputMeta>* metas, Device* device);

// "input 1 (value 3)"
std::string input_name(const Fusion& fusion, size_t index);


}  // namespace kf
