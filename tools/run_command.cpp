// `kfuse run`: execute a fusion file on random inputs and check it against
// an independent float64 evaluation of the same text on the CPU backend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "cuda_driver.h"
#include "fusion_file.h"

namespace kfcli {

namespace {

struct Tolerance {
  double atol, rtol;
};

// Derived from the output dtype: a few units in the last place of the
// storage type, which is where a correct low-precision result differs from
// the float64 one. Integers and bools must match exactly.
Tolerance tolerance_for(kf_dtype dtype) {
  switch (dtype) {
    case KF_FLOAT64: return {1e-10, 1e-9};
    case KF_FLOAT32: return {1e-5, 1e-4};
    case KF_FLOAT16: return {1e-3, 1e-2};
    case KF_BFLOAT16: return {1e-2, 2e-2};
    // 3 and 2 mantissa bits; each op rounds to the format, so allow a few
    // half-ulps (2^-4 and 2^-3 relative) and their subnormal quanta.
    case KF_FLOAT8_E4M3FN: return {4e-3, 0.15};
    case KF_FLOAT8_E5M2: return {1e-4, 0.3};
    default: return {0, 0};
  }
}

// Output tensors returned by kf_execute, released by their deleters.
struct Outputs {
  std::vector<DLManagedTensor*> tensors;
  ~Outputs() {
    for (DLManagedTensor* t : tensors)
      if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
};

// Inputs copied to device memory with the same shapes and strides; scalar
// inputs stay 0-dim CPU tensors, as the C API asks.
struct DeviceInputs {
  CudaDriver* driver = nullptr;
  std::vector<void*> buffers;
  std::vector<DLTensor> tensors;
  ~DeviceInputs() {
    for (void* p : buffers) driver->release(p);
  }
};

void upload(CudaDriver& driver, std::vector<HostTensor>& host, DeviceInputs* device) {
  device->driver = &driver;
  for (HostTensor& t : host) {
    DLTensor dl = t.dl();
    if (t.shape.empty()) {
      device->tensors.push_back(dl);
      continue;
    }
    void* p = driver.allocate(t.storage.size());
    device->buffers.push_back(p);
    driver.to_device(p, t.storage.data(), t.storage.size());
    dl.data = p;
    dl.device = {kDLCUDA, 0};
    device->tensors.push_back(dl);
  }
}

std::vector<double> values_of(const DLTensor& t, CudaDriver* driver) {
  if (t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAManaged) return read_values(t);
  std::vector<std::byte> host(span_bytes(t));
  driver->to_host(host.data(), static_cast<const std::byte*>(t.data) + t.byte_offset, host.size());
  DLTensor copy = t;
  copy.data = host.data();
  copy.byte_offset = 0;
  copy.device = {kDLCPU, 0};
  return read_values(copy);
}

std::string strides_string(const DLTensor& t) {
  if (t.strides == nullptr) return "compact";
  return shape_string(t.strides, t.ndim);
}

void print_values(const char* label, const std::vector<double>& v) {
  std::printf("  %-11s", label);
  const size_t n = std::min<size_t>(v.size(), 6);
  if (v.empty()) std::printf("(no elements)");
  for (size_t i = 0; i < n; ++i) std::printf("%s%.6g", i ? ", " : "", v[i]);
  std::printf("%s\n", v.size() > n ? ", ..." : "");
}

// Compares one output with its reference; prints the errors; true on pass.
bool compare(const std::vector<double>& got, const std::vector<double>& want, kf_dtype dtype) {
  const Tolerance tol = tolerance_for(dtype);
  double max_abs = 0, max_rel = 0;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], r = want[i];
    double err;
    if (std::isnan(a) || std::isnan(r)) err = (std::isnan(a) && std::isnan(r)) ? 0 : INFINITY;
    else if (std::isinf(a) || std::isinf(r)) err = a == r ? 0 : INFINITY;
    else err = std::fabs(a - r);
    const double rel = err / std::max(std::fabs(r), tol.atol > 0 ? tol.atol : 1e-300);
    max_abs = std::max(max_abs, err);
    max_rel = std::max(max_rel, rel);
    // NaN and inf must match exactly (rtol * inf would accept anything).
    const bool finite = std::isfinite(a) && std::isfinite(r);
    const bool ok = err == 0 || (finite && err <= tol.atol + tol.rtol * std::fabs(r));
    if (!ok && bad++ == 0) first_bad = i;
  }
  std::printf("  max abs err %.3g, max rel err %.3g (tolerance %g + %g*|ref| for %s)\n", max_abs,
              max_rel, tol.atol, tol.rtol, kf_dtype_name(dtype));
  if (bad > 0)
    std::printf("  %zu of %zu elements out of tolerance; first at flat index %zu: got %.9g, want %.9g\n",
                bad, got.size(), first_bad, got[first_bad], want[first_bad]);
  return bad == 0;
}

// Shapes that the fusion rejects (a broadcast of 3 against 4, a reshape to
// another element count) are an input error, exit status 2 like a bad
// --shapes string, not a FAIL of kfuse: shape inference alone decides.
void check_input_shapes(const Fusion& fusion, std::vector<HostTensor>& inputs,
                        const std::vector<kf_value_info>& outs) {
  std::vector<DLTensor> dl;
  for (HostTensor& t : inputs) dl.push_back(t.dl());
  std::vector<const DLTensor*> args;
  for (const DLTensor& t : dl) args.push_back(&t);
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<int64_t> shape(static_cast<size_t>(outs[i].rank));
    const kf_status status =
        kf_output_shape(fusion.get(), args.data(), args.size(), i, shape.data(), shape.size());
    if (status != KF_OK)
      throw CliError(status, std::string("the input shapes do not fit the fusion: ") +
                                 kf_status_name(status) + ": " + kf_last_error());
  }
}

}  // namespace

int run_command(const Options& options) {
  const FusionFile file = load_fusion_file(options.file);
  const Fusion fusion(file.text);
  std::string description;
  std::vector<HostTensor> inputs = make_inputs(fusion, file, options, &description);
  const std::vector<kf_value_info> outs = fusion.outputs();
  std::printf("fusion: %s (inputs: %zu, outputs: %zu)\n", file.path.c_str(), inputs.size(), outs.size());
  std::printf("inputs: %s; layout %s, seed %llu; outputs %s\n", description.c_str(), layouts_name(options).c_str(),
              static_cast<unsigned long long>(options.seed), out_layout_name(options.out_layout));
  check_input_shapes(fusion, inputs, outs);

  // Pick the device. auto uses a GPU when the driver finds one and says so.
  std::unique_ptr<CudaDriver> driver;
  if (options.device != "cpu") {
    std::string why;
    driver = CudaDriver::open(&why);
    if (!driver && options.device == "cuda") throw CliError(KF_OK, "--device cuda: " + why);
    if (!driver) std::printf("device auto: no GPU (%s), using the CPU backend\n", why.c_str());
  }

  DeviceInputs device_inputs;
  std::vector<DLTensor> host_dl;
  for (HostTensor& t : inputs) host_dl.push_back(t.dl());
  std::vector<const DLTensor*> args;
  if (driver) {
    upload(*driver, inputs, &device_inputs);
    for (const DLTensor& t : device_inputs.tensors) args.push_back(&t);
    std::printf("backend: cuda:0 (%s)\n", driver->device_name().c_str());
  } else {
    for (const DLTensor& t : host_dl) args.push_back(&t);
    std::printf("backend: cpu\n");
  }

  // The reference's inputs (the same logical values in float64), taken
  // before the run: an output that updates an input in place overwrites it.
  const Fusion reference(float64_text(file.text));
  const std::vector<kf_value_info> ref_inputs = reference.inputs();
  std::vector<HostTensor> ref_host;
  for (size_t i = 0; i < inputs.size(); ++i) ref_host.push_back(convert(inputs[i], ref_inputs[i].dtype));

  // The outputs: kfuse's own (kf_execute), or the caller's in the order
  // --out-layout asks for (kf_execute_into); `got` points at them either way.
  Outputs result;
  result.tensors.assign(outs.size(), nullptr);
  std::vector<HostTensor> own;
  std::vector<DLTensor> caller;
  DeviceInputs caller_device;  // device buffers of `caller`, released at exit
  caller_device.driver = driver.get();
  kf_status status;
  if (options.out_layout == OutLayout::Kfuse) {
    status = kf_execute(fusion.get(), args.data(), args.size(), result.tensors.data(), outs.size(), nullptr);
  } else {
    own = caller_outputs(fusion, args, options.out_layout);
    caller = output_tensors(fusion, own, args, driver ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0});
    const std::vector<int64_t> alias = output_aliases(fusion);
    std::vector<DLTensor*> out_args;
    for (size_t i = 0; i < caller.size(); ++i) {
      if (driver && alias[i] < 0) {
        caller_device.buffers.push_back(driver->allocate(std::max<size_t>(span_bytes(caller[i]), 1)));
        caller[i].data = caller_device.buffers.back();
      }
      out_args.push_back(&caller[i]);
    }
    status = kf_execute_into(fusion.get(), args.data(), args.size(), out_args.data(), out_args.size(), nullptr);
  }
  if (status != KF_OK) {
    // Never fall back to the CPU behind the caller's back: say what failed.
    if (driver && status == KF_ERR_UNSUPPORTED)
      std::printf("the CUDA backend does not support this fusion: %s\n"
                  "(--device cpu runs it on the CPU backend)\n", kf_last_error());
    else if (status == KF_ERR_OUT_OF_MEMORY)  // too large for the machine: an input error, not a FAIL
      throw CliError(status, std::string(options.out_layout == OutLayout::Kfuse ? "kf_execute" : "kf_execute_into") + " failed: " + kf_status_name(status) + ": " + kf_last_error());
    else
      std::printf("%s failed: %s: %s\n", options.out_layout == OutLayout::Kfuse ? "kf_execute" : "kf_execute_into",
                  kf_status_name(status), kf_last_error());
    std::printf("FAIL\n");
    return 1;
  }
  if (driver) driver->synchronize();

  // The reference: the same text in float64 on the CPU, with the same
  // logical input values (converted exactly to float64).
  std::vector<DLTensor> ref_dl;
  for (HostTensor& t : ref_host) ref_dl.push_back(t.dl());
  std::vector<const DLTensor*> ref_args;
  for (const DLTensor& t : ref_dl) ref_args.push_back(&t);
  Outputs expected;
  expected.tensors.assign(outs.size(), nullptr);
  check(kf_execute(reference.get(), ref_args.data(), ref_args.size(), expected.tensors.data(),
                   outs.size(), nullptr),
        "kf_execute (float64 reference)");

  bool pass = true;
  const auto names = value_names(fusion);
  for (size_t i = 0; i < outs.size(); ++i) {
    const DLTensor& got = caller.empty() ? result.tensors[i]->dl_tensor : caller[i];
    const DLTensor& want = expected.tensors[i]->dl_tensor;
    std::printf("output %zu (%s): %s %s, strides %s\n", i, names.at(outs[i].id).c_str(),
                kf_dtype_name(outs[i].dtype), shape_string(got.shape, got.ndim).c_str(),
                strides_string(got).c_str());
    if (shape_string(got.shape, got.ndim) != shape_string(want.shape, want.ndim)) {
      std::printf("  shape differs from the reference %s\n", shape_string(want.shape, want.ndim).c_str());
      pass = false;
      continue;
    }
    const std::vector<double> got_values = values_of(got, driver.get());
    const std::vector<double> want_values = read_values(want);
    print_values("values:", got_values);
    print_values("reference:", want_values);
    pass = compare(got_values, want_values, outs[i].dtype) && pass;
  }
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace kfcli
