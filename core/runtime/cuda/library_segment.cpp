#include "core/runtime/cuda/library_segment.h"

#include <algorithm>
#include <optional>

#include "core/runtime/cuda/cublaslt.h"
#include "core/runtime/gemm_layout.h"
#include "core/segment/matmul_pattern.h"
#include "core/util/env_switch.h"
#include "core/util/error.h"
#include "core/util/dl_layout.h"

namespace kf::cuda {

namespace {

// What the planner needs of a tensor (NULL strides made explicit).
GemmTensor gemm_tensor(const DLTensor& t) {
  GemmTensor g;
  g.address = dl_address(t);
  g.sizes.assign(t.shape, t.shape + t.ndim);
  for (int d = 0; d < t.ndim; ++d) g.strides.push_back(dl_stride(t, d));
  return g;
}

// Whether $KFUSE_EPILOGUE_FALLBACK asks to run every matmul pattern unfused
// (tests use it to reach the fallback). Spelled like every on/off switch
// (env_switch.h), so that "true" means what it says.
bool fallback_forced() { return env_switch("KFUSE_EPILOGUE_FALLBACK", false); }

// Runs the library op of segment `index` into `out`: with the segment's
// matmul pattern (bias, activation) unless `product_only`. Returns what
// cublaslt_gemm returns.
bool run_library(Backend& backend, const ConcreteFusion& c, const Segmentation& s, size_t index,
                 const DLTensor* const* inputs, const DLTensor& out, bool product_only,
                 const ExecOptions& options) {
  const Segment& seg = s.segments[index];
  const Fusion& f = *c.fusion;
  MatmulPattern pattern;
  if (!seg.task.children.empty()) {
    const std::optional<MatmulPattern> described = describe_matmul_pattern(c, seg.task.children[0]);
    if (!described) fail(KF_ERR_INTERNAL, "segment ", index, ": its nested task is no matmul pattern");
    pattern = *described;
  } else if (seg.task.exprs.size() == 1) {
    pattern.product_expr = seg.task.exprs[0];
  } else {
    fail(KF_ERR_INTERNAL, "segment ", index, ": a library segment holds one op or a matmul pattern, holds ",
         seg.task.exprs.size(), " ops");
  }
  const Expr& e = f.exprs.at(static_cast<size_t>(pattern.product_expr));
  const char* op = e.op == Op::MATMUL ? "matmul" : "linear";
  if (e.op != Op::MATMUL && e.op != Op::LINEAR)
    fail(KF_ERR_INTERNAL, "segment ", index, ": ", op_name(e.op), " is not a library op");
  auto value = [&](int64_t id, const char* what) -> const DLTensor& {
    const auto& in = seg.task.inputs;
    auto it = std::find(in.begin(), in.end(), id);
    if (it == in.end()) fail(KF_ERR_INTERNAL, "segment ", index, ": ", op, " ", what, " is not a segment input");
    return *inputs[it - in.begin()];
  };
  auto input = [&](size_t arg) -> const DLTensor& { return value(e.inputs[arg], "argument"); };

  const DType dtype = f.value(e.outputs[0]).dtype;
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F64)
    fail(KF_ERR_UNSUPPORTED, "segment ", index, ": ", op, " on the GPU supports float32, float16, "
         "bfloat16 and float64 results, got ", dtype_name(dtype));
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const DType t = f.value(e.inputs[i]).dtype;
    if (t != dtype)
      fail(KF_ERR_UNSUPPORTED, "segment ", index, ": ", op, " on the GPU needs every argument in the "
           "result dtype ", dtype_name(dtype), "; argument ", i, " is ", dtype_name(t),
           " (cast it first)");
  }
  auto on_device = [&](const DLTensor& t, const char* what, size_t i) {
    if (t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAManaged)
      fail(KF_ERR_DEVICE_MISMATCH, "segment ", index, ": ", op, " ", what, " ", i,
           " is not in CUDA device memory (device type ", int(t.device.device_type), ")");
  };
  for (size_t i = 0; i < e.inputs.size(); ++i) on_device(input(i), "argument", i);
  // The pattern's bias: linear's own or that of a bias add (same dtype).
  const DLTensor* bias = nullptr;
  if (e.inputs.size() == 3) bias = &input(2);
  if (!product_only && pattern.bias_added) {
    bias = &value(pattern.bias, "bias");
    on_device(*bias, "bias", 0);
  }

  GemmInputs in;
  in.linear = e.op == Op::LINEAR;
  in.elem_size = dtype_size(dtype);
  in.x = gemm_tensor(input(0));
  in.y = gemm_tensor(input(1));
  in.out = gemm_tensor(out);
  if (bias) in.bias = gemm_tensor(*bias);
  const Activation activation = product_only ? Activation::None : pattern.activation;
  in.activation = activation != Activation::None;
  return cublaslt_gemm(plan_gemm(in), in, dtype, activation, backend, c.device.id, options);
}

}  // namespace

bool run_library_segment(Backend& backend, const ConcreteFusion& c, const Segmentation& s,
                         size_t index, const DLTensor* const* inputs, DLTensor* const* outputs,
                         const ExecOptions& options) {
  const Segment& seg = s.segments[index];
  if (seg.task.outputs.size() != 1)
    fail(KF_ERR_INTERNAL, "segment ", index, ": a library segment has one output, has ", seg.task.outputs.size());
  if (!seg.task.children.empty() && fallback_forced()) return false;
  return run_library(backend, c, s, index, inputs, *outputs[0], false, options);
}

void run_library_product(Backend& backend, const ConcreteFusion& c, const Segmentation& s,
                         size_t index, const DLTensor* const* inputs, const DLTensor& product,
                         const ExecOptions& options) {
  run_library(backend, c, s, index, inputs, product, true, options);
}

}  // namespace kf::cuda
