// The CUDA backend: stream-ordered memory, copies, and segments run as
// generated kernels. The first run of a segmentation generates the kernels
// of all its segments and compiles those the run launches on a bounded
// pool of threads (loaded_kernel.h), keeping each in the plan's KernelSlot;
// later calls only fill the argument block and launch on the caller's
// stream. Nothing here synchronizes the device.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/runtime/backend.h"
#include "core/runtime/cuda/copy_kernels.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/launch.h"
#include "core/runtime/cuda/library_segment.h"
#include "core/runtime/cuda/loaded_kernel.h"
#include "core/runtime/cuda/permute_copy.h"
#include "core/runtime/cuda/strided_copy.h"
#include "core/segment/matmul_pattern.h"
#include "core/util/error.h"
#include "core/runtime/cuda/step_launch.h"
#include "core/util/scratch.h"
#include "core/util/dl_layout.h"


namespace kf {

namespace {

using namespace kf::cuda;

constexpr uint32_t kCopyBlock = 256;

CUstream stream_of(const ExecOptions& o) { return static_cast<CUstream>(o.stream); }

std::vector<int64_t> strides_of(const DLTensor& t) {
  std::vector<int64_t> s(static_cast<size_t>(t.ndim));
  dl_strides(t, s.data());
  return s;
}

bool on_host(const DLTensor& t) { return t.device.device_type == kDLCPU; }

void launch(CUfunction f, const char* name, uint32_t grid, uint32_t block, uint32_t shared,
            CUstream stream, int64_t* args, uint32_t grid_y = 1, uint32_t block_y = 1) {
  void* params[] = {args};
  CUresult r = driver().cuLaunchKernel_(f, grid, grid_y, 1, block, block_y, 1, shared, stream, params, nullptr);
  if (r != CUDA_SUCCESS)
    fail(KF_ERR_BACKEND, "CUDA driver could not launch kernel ", name, " (grid ", grid, ", block ",
         block, ", shared ", shared, " bytes): ", describe_result("cuLaunchKernel", r));
}

// A launch in thread-block clusters of `cluster` blocks along x (sm_90).
void launch_clusters(CUfunction f, const char* name, uint32_t grid, uint32_t block, uint32_t shared, CUstream stream,
                     int64_t* args, uint32_t cluster) {
  void* params[] = {args};
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = cluster;
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  CUlaunchConfig config{};
  config.gridDimX = grid;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = block;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = shared;
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  CUresult r = driver().cuLaunchKernelEx_(&config, f, params, nullptr);
  if (r != CUDA_SUCCESS)
    fail(KF_ERR_BACKEND, "CUDA driver could not launch kernel ", name, " (grid ", grid, " in clusters of ", cluster,
         ", block ", block, ", shared ", shared, " bytes): ", describe_result("cuLaunchKernelEx", r));
}

class CudaBackend final : public Backend {
 public:
  void* allocate(size_t bytes, int device, const ExecOptions& options) override {
    bytes = std::max<size_t>(bytes, 1);
    if (const kf_allocator* a = options.allocator) {
      void* p = nullptr;
      int rc = a->alloc(a->context, bytes, device, options.stream, &p);
      if (rc != 0 || p == nullptr)
        fail(KF_ERR_OUT_OF_MEMORY, "the caller's kf_allocator failed to allocate ", bytes,
             " bytes on CUDA device ", device, " (returned ", rc, ")");
      return p;
    }
    ScopedContext context(device);
    CUdeviceptr ptr = 0;
    // kfuse's pool (DeviceInfo::pool: it keeps freed memory), else the
    // device's default pool, ordered on the caller's stream.
    if (context.info().pool != nullptr)
      check(driver().cuMemAllocFromPoolAsync_(&ptr, bytes, context.info().pool, stream_of(options)),
            "cuMemAllocFromPoolAsync");
    else if (context.info().memory_pools)
      check(driver().cuMemAllocAsync_(&ptr, bytes, stream_of(options)), "cuMemAllocAsync");
    else
      check(driver().cuMemAlloc_(&ptr, bytes), "cuMemAlloc");
    return reinterpret_cast<void*>(ptr);
  }

  // Runs in destructors (intermediates, output deleters): never throws.
  void release(void* ptr, size_t bytes, int device, const ExecOptions& options) override {
    if (ptr == nullptr) return;
    if (const kf_allocator* a = options.allocator) {
      a->free(a->context, ptr, std::max<size_t>(bytes, 1), device, options.stream);
      return;
    }
    try {
      ScopedContext context(device);
      auto p = reinterpret_cast<CUdeviceptr>(ptr);
      if (context.info().memory_pools)
        driver().cuMemFreeAsync_(p, stream_of(options));
      else
        driver().cuMemFree_(p);
    } catch (...) {
    }
  }

  void prepare(const Plan& p, const ValueSizes& sizes) override {
    ScopedContext context(p.concrete->device.id);  // first, so a missing GPU is reported as such
    load_segments(p, sizes);
  }
  bool prepared(const Plan& p) const override { return segments_loaded(p); }

  void run_segment(const Plan& p, size_t index, const ValueSizes& sizes, const DLTensor* const* inputs,
                   DLTensor* const* outputs, const ExecOptions& options) override {
    const ConcreteFusion& c = *p.concrete;
    const Segmentation& s = p.segmentation;
    ScopedContext context(c.device.id);  // first, so a missing GPU is reported as such
    const Segment& seg = s.segments[index];
    if (seg.scheduler == SchedulerKind::Library) {  // matmul/linear (+ epilogue): cuBLASLt
      if (!run_library_segment(*this, c, s, index, inputs, outputs, options))
        run_pattern_unfused(p, index, sizes, inputs, outputs, options, context);
      return;
    }
    if (seg.task.exprs.empty()) return;  // no-op segment: nothing to compute
    run_kernel(c, loaded_segment(p, index, sizes), sizes, inputs, outputs, options,
               context);
  }

  // A kernel with in-place windows whose window is longer than one block
  // iteration (windows_fit) reads copies of the inputs it updates in place:
  // made on the stream before it, their argument words pointed at them,
  // released behind it. (Their bytes from the first element to the last,
  // gaps included, so the kernel's strides stay valid.)
  class WindowCopies {
   public:
    WindowCopies(CudaBackend& backend, const ConcreteFusion& c, const LoadedKernel& k, const ValueSizes& sizes,
                 const DLTensor* const* inputs, const ExecOptions& options, int64_t* args)
        : backend_(backend), device_(c.device.id), options_(options) {
      const LaunchRule& rule = k.plan.launch;
      if (rule.windows.empty() || windows_fit(rule, sizes)) return;
      try {
        copy_inputs(k, inputs, args);
      } catch (...) {
        release_all();
        throw;
      }
    }
    ~WindowCopies() { release_all(); }
    WindowCopies(const WindowCopies&) = delete;
    WindowCopies& operator=(const WindowCopies&) = delete;

   private:
    void copy_inputs(const LoadedKernel& k, const DLTensor* const* inputs, int64_t* args) {
      const LaunchRule& rule = k.plan.launch;
      for (size_t s = 0; s < k.plan.args.size(); ++s) {
        const ArgSlot& slot = k.plan.args[s];
        const SlotSource& src = k.sources[s];
        if (slot.kind != ArgSlot::Kind::Data || src.from != SlotSource::From::Input ||
            std::find(rule.window_inputs.begin(), rule.window_inputs.end(), slot.value) == rule.window_inputs.end())
          continue;
        const DLTensor& t = *inputs[src.index];
        std::vector<int64_t> shape(t.shape, t.shape + t.ndim), strides(static_cast<size_t>(t.ndim));
        dl_strides(t, strides.data());
        const ElementReach reach = element_reach(shape, strides);
        if (reach.max_offset < 0) continue;  // empty: nothing read
        uintptr_t end = 0;
        if (reach.bad_dim >= 0 || !byte_end(dl_address(t), reach.max_offset, dl_element_bytes(t), &end))
          fail(KF_ERR_INTERNAL, "value ", slot.value, ": its bytes cannot be copied for an in-place window");
        const size_t bytes = end - dl_address(t);
        void* copy = backend_.allocate(bytes, device_, options_);
        copies_.push_back({copy, bytes});
        check(driver().cuMemcpyAsync_(reinterpret_cast<CUdeviceptr>(copy), dl_address(t), bytes, stream_of(options_)),
              "cuMemcpyAsync");
        args[s] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(copy));
      }
    }
    void release_all() {
      for (const auto& [ptr, bytes] : copies_) backend_.release(ptr, bytes, device_, options_);
      copies_.clear();
    }
    CudaBackend& backend_;
    int device_;
    const ExecOptions& options_;
    std::vector<std::pair<void*, size_t>> copies_;
  };

  // Launches a loaded kernel on tensors in the order of its task's inputs
  // and outputs.
  void run_kernel(const ConcreteFusion& c, const LoadedKernel& k, const ValueSizes& sizes,
                  const DLTensor* const* inputs, DLTensor* const* outputs, const ExecOptions& options,
                  ScopedContext& context) {
    const KernelVariant v = kernel_variant(k.plan, sizes, context.info());
    if (v == KernelVariant::SplitRows) {
      run_kernel(c, k.variant(v), sizes, inputs, outputs, options, context);
      return;
    }
    // A plan with scalar twins loads its vector variant (Main, Tight, Wide,
    // LongRows, Cluster, Short, ShortRows) or the one for tensors that fail its checks once the call's
    // argument words are known (below); the rest load their variant now.
    const bool vector_variant = is_vector_variant(v);
    if (!vector_variant || (k.plan.scalar_twins.empty() && k.plan.long_edges_name.empty())) k.variant(v);
    if (k.plan.launch.kind == LaunchRule::Kind::Scatter ||
        (k.plan.launch.kind == LaunchRule::Kind::Scan && !k.plan.launch.scan_block_per_line)) {
      run_steps(c, k, sizes, inputs, outputs, options, context);
      return;
    }
    const std::span<const int64_t> domain = launch_domain(k.plan.launch, sizes);
    if (launch_dims(k.plan.launch, domain, context.info().max_grid_x, context.info().multiprocessors).grid == 0)
      return;  // empty domain
    Scratch<std::vector<int64_t>> arg_block;  // per thread: no allocation per call
    std::vector<int64_t>& args = *arg_block;
    args.assign(std::max<size_t>(k.plan.args.size() + static_cast<size_t>(k.plan.launch.extra_args), 1), 0);
    fill_arguments(*c.fusion, k.plan.args, k.sources, sizes, inputs, outputs, args.data());
    const WindowCopies window_copies(*this, c, k, sizes, inputs, options, args.data());
    // The variant for these tensors (call_variant), loaded on first need.
    // A tight kernel that spills gives way to the main one.
    KernelVariant run = call_variant(k.plan, v, sizes, context.info(), args.data());
    if (run == KernelVariant::Tight && k.variant(run).tight_spills) run = KernelVariant::Main;
    // (the Edges kernel's column partials against its own static shared memory)
    if (run == KernelVariant::Edges && k.plan.edge_partial_bytes > 0 &&
        !edge_partials_fit(k.variant(run).edges_launch, sizes[k.plan.launch.domain_value], k.edges_limits.max_dynamic_shared))
      run = KernelVariant::LongEdges;
    k.variant(run);
    const bool long_rows = run == KernelVariant::LongRows, tight = run == KernelVariant::Tight,
               wide = run == KernelVariant::Wide, scalar_twin = run == KernelVariant::Scalar,
               edges = run == KernelVariant::Edges, long_edges = run == KernelVariant::LongEdges,
               clustered = run == KernelVariant::Cluster, short_columns = run == KernelVariant::ShortColumns,
               short_scalar = run == KernelVariant::ShortColumnsScalar, short_rows = run == KernelVariant::ShortRows || run == KernelVariant::ShortRowsScalar,
               short_rows_scalar = run == KernelVariant::ShortRowsScalar,
               ungrouped = run == KernelVariant::Ungrouped;
    // (as kernel_variant chose; the kernel streams a part its shared memory cannot stage)
    const int cluster = clustered ? cluster_blocks_on(k.plan, domain, context.info()) : 0;
    const LaunchDims dims =
        short_rows ? short_row_dims(k.plan.launch, domain, context.info().max_grid_x)
                   : launch_dims(wide ? k.wide_launch : long_edges ? k.long_edges_launch : edges ? k.edges_launch : k.plan.launch,
                                 domain, context.info().max_grid_x, context.info().multiprocessors,
                                 long_rows ? k.long_limits : long_edges ? k.long_edges_limits : edges ? k.edges_limits
                                           : clustered ? k.cluster_limits : ungrouped ? k.ungrouped_limits : k.limits,
                                 cluster);
    if (dims.long_rows != (long_rows || long_edges || clustered) && !k.plan.long_row_name.empty())
      fail(KF_ERR_INTERNAL, "kernel ", k.plan.name, ": the launch and the variant disagree on long rows");
    if (dims.short_columns != (short_columns || short_scalar))
      fail(KF_ERR_INTERNAL, "kernel ", k.plan.name, ": the launch and the variant disagree on short columns");
    CUfunction function = scalar_twin ? k.scalar
                          : long_rows ? k.long_row
                          : tight     ? k.tight
                          : wide      ? k.wide
                          : edges     ? k.edges
                          : long_edges ? k.long_edges
                          : clustered ? k.cluster
                          : short_columns ? k.short_columns
                          : short_scalar ? k.short_scalar
                          : short_rows_scalar ? k.short_rows_scalar
                          : short_rows ? k.short_rows
                          : ungrouped ? k.ungrouped
                                      : k.function;
    const char* name = scalar_twin ? k.plan.scalar_of(k.plan.name).c_str()
                       : long_rows ? k.plan.long_row_name.c_str()
                       : tight     ? k.plan.tight_name.c_str()
                       : wide      ? k.plan.wide_name.c_str()
                       : edges     ? k.plan.edges_name.c_str()
                       : long_edges ? k.plan.long_edges_name.c_str()
                       : clustered ? k.plan.cluster_name.c_str()
                       : short_columns ? k.plan.short_name.c_str()
                       : short_scalar ? k.plan.scalar_of(k.plan.short_name).c_str()
                       : short_rows_scalar ? k.plan.scalar_of(k.plan.short_rows_name).c_str()
                       : short_rows ? k.plan.short_rows_name.c_str()
                       : ungrouped ? k.plan.ungrouped_name.c_str()
                                   : k.plan.name.c_str();
    if (!k.plan.finish_name.empty() && !dims.short_columns) {
      // Partials into a stream-ordered scratch buffer, then the finishing
      // kernel; the buffer is released in stream order behind it.
      const std::vector<CUfunction>& later = scalar_twin ? k.scalar_later : k.later;
      const size_t n = k.plan.args.size();
      const size_t bytes = static_cast<size_t>(dims.scratch_bytes);
      void* scratch = allocate(bytes, c.device.id, options);
      args[n] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(scratch));
      args[n + 1] = dims.splits;
      try {
        launch(function, name, dims.grid, dims.block, dims.shared_bytes, stream_of(options), args.data(),
               dims.grid_y);
        launch(k.finish, k.plan.finish_name.c_str(), dims.finish_grid, static_cast<uint32_t>(k.plan.launch.finish_block), 0,
               stream_of(options), args.data());
        for (size_t i = 0; i < later.size(); ++i) {  // later phases, the epilogue
          const KernelPlan::LaterKernel& l = k.plan.later[i];
          const char* later_name = scalar_twin ? k.plan.scalar_of(l.name).c_str() : l.name.c_str();
          using Grid = KernelPlan::LaterKernel::Grid;
          if (l.grid == Grid::Finish)
            launch(later[i], later_name, dims.finish_grid, static_cast<uint32_t>(k.plan.launch.finish_block), 0,
                   stream_of(options), args.data());
          else
            launch(later[i], later_name, dims.grid, dims.block, dims.shared_bytes, stream_of(options), args.data(),
                   l.grid == Grid::Epilogue ? dims.epilogue_grid_y : dims.grid_y);
        }
      } catch (...) {
        release(scratch, bytes, c.device.id, options);
        throw;
      }
      release(scratch, bytes, c.device.id, options);
      return;
    }
    if (clustered) {
      launch_clusters(function, name, dims.grid, dims.block, dims.shared_bytes, stream_of(options), args.data(),
                      static_cast<uint32_t>(cluster));
      return;
    }
    launch(function, name, dims.grid, dims.block, dims.shared_bytes,
           stream_of(options), args.data(), 1, dims.block_y);
  }

  // Whether a scatter's result is the tensor it scatters into: the same
  // address and strides (an in-place update the caller asked for).
  static bool scatters_in_place(const LoadedKernel& k, const DLTensor* const* inputs, DLTensor* const* outputs) {
    const DLTensor *self = nullptr, *result = nullptr;
    for (const SlotSource& s : k.sources) {
      if (s.from == SlotSource::From::Input && s.value == k.plan.scatter.self) self = inputs[s.index];
      if (s.from == SlotSource::From::Output && s.value == k.plan.scatter.output) result = outputs[s.index];
    }
    if (self == nullptr || result == nullptr || dl_address(*self) != dl_address(*result) || self->ndim != result->ndim)
      return false;
    for (int d = 0; d < self->ndim; ++d)
      if (self->shape[d] != result->shape[d] || (self->shape[d] > 1 && dl_stride(*self, d) != dl_stride(*result, d)))
        return false;
    return true;
  }

  // A scatter's or segmented scan's kernels in the order step_launch.h
  // gives, with their scratch allocated in stream order behind them.
  void run_steps(const ConcreteFusion& c, const LoadedKernel& k, const ValueSizes& sizes, const DLTensor* const* inputs,
                 DLTensor* const* outputs, const ExecOptions& options, ScopedContext& context) {
    const int sms = context.info().multiprocessors, max_grid = context.info().max_grid_x;
    const StepLaunch l = k.plan.launch.kind == LaunchRule::Kind::Scatter
                             ? scatter_launch(k.plan, sizes, sms, max_grid, scatters_in_place(k, inputs, outputs))
                             : scan_launch(k.plan, sizes, sms, max_grid);
    if (l.steps.empty()) return;
    Scratch<std::vector<int64_t>> arg_block;
    std::vector<int64_t>& args = *arg_block;
    const size_t n = k.plan.args.size();
    args.assign(n + static_cast<size_t>(std::max(k.plan.launch.extra_args, 4)), 0);
    fill_arguments(*c.fusion, k.plan.args, k.sources, sizes, inputs, outputs, args.data());
    const size_t bytes = static_cast<size_t>(l.scratch_bytes);
    void* scratch = bytes > 0 ? allocate(bytes, c.device.id, options) : nullptr;
    args[n] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(scratch));
    args[n + 1] = l.padded;
    const auto function_of = [&](const std::string& name) {
      if (name == k.plan.name) return k.function;
      for (size_t i = 0; i < k.plan.later.size(); ++i)
        if (k.plan.later[i].name == name && i < k.later.size() && k.later[i] != nullptr) return k.later[i];
      fail(KF_ERR_INTERNAL, "kernel ", name, " of a multi-step plan is not loaded");
    };
    try {
      if (l.zero_bytes > 0)
        check(driver().cuMemsetD32Async_(reinterpret_cast<CUdeviceptr>(scratch), 0, l.zero_bytes / 4, stream_of(options)),
              "cuMemsetD32Async");
      for (const LaunchStep& s : l.steps) {
        args[n + 2] = s.sort_k;
        args[n + 3] = s.sort_j;
        launch(function_of(*s.kernel), s.kernel->c_str(), s.grid, s.block, 0, stream_of(options), args.data());
      }
    } catch (...) {
      if (scratch != nullptr) release(scratch, bytes, c.device.id, options);
      throw;
    }
    if (scratch != nullptr) release(scratch, bytes, c.device.id, options);
  }

  // A matmul pattern that cuBLASLt cannot run as one call: the product into
  // a compact temporary (it has the result's shape), then the rest of the
  // pattern (bias add, casts, activation) as a generated kernel.
  void run_pattern_unfused(const Plan& p, size_t index, const ValueSizes& sizes,
                           const DLTensor* const* inputs, DLTensor* const* outputs,
                           const ExecOptions& options, ScopedContext& context) {
    const ConcreteFusion& c = *p.concrete;
    const Segmentation& s = p.segmentation;
    const Segment& seg = s.segments[index];
    const LoadedKernel& k = loaded_pattern_kernel(p, index);
    const int64_t product = k.product;
    const DLTensor& out = *outputs[0];
    DLTensor temp = out;
    temp.strides = nullptr;
    temp.byte_offset = 0;
    temp.dtype = to_dlpack(c.fusion->value(product).dtype);
    const size_t bytes = static_cast<size_t>(dl_numel(out) * dtype_size(c.fusion->value(product).dtype));
    temp.data = allocate(bytes, c.device.id, options);
    try {
      run_library_product(*this, c, s, index, inputs, temp, options);
      std::vector<const DLTensor*> ins;
      for (int64_t id : k.task.inputs) {
        if (id == product) {
          ins.push_back(&temp);
          continue;
        }
        const auto& in = seg.task.inputs;
        const auto it = std::find(in.begin(), in.end(), id);
        if (it == in.end()) fail(KF_ERR_INTERNAL, "segment ", index, ": its epilogue reads value ", id, ", no segment input");
        ins.push_back(inputs[it - in.begin()]);
      }
      run_kernel(c, k, sizes, ins.data(), outputs, options, context);
    } catch (...) {
      release(temp.data, bytes, c.device.id, options);
      throw;
    }
    release(temp.data, bytes, c.device.id, options);
  }

  void copy(const DLTensor& src, const DLTensor& dst, const ExecOptions& options) override {
    const auto element = static_cast<int>(dl_element_bytes(src));
    if (element != 1 && element != 2 && element != 4 && element != 8)
      fail(KF_ERR_UNSUPPORTED, "CUDA copy: ", element, "-byte elements are not supported");
    if (on_host(dst))
      fail(KF_ERR_UNSUPPORTED, "CUDA copy: the destination is in host memory");
    const std::vector<int64_t> sizes(src.shape, src.shape + src.ndim);
    const CopyLayout layout = collapse_copy(sizes, strides_of(src), strides_of(dst));
    if (layout.numel == 0) return;
    const int device = dst.device.device_id;
    ScopedContext context(device);
    const CUstream stream = stream_of(options);
    const uintptr_t src_ptr = dl_address(src), dst_ptr = dl_address(dst);
    const auto bytes = static_cast<size_t>(layout.numel) * static_cast<size_t>(element);
    if (on_host(src)) {  // a scalar input (0-dim CPU tensor) that is also an output
      if (!layout.contiguous())
        fail(KF_ERR_UNSUPPORTED, "CUDA copy: a copy from pageable host memory must be contiguous");
      check(driver().cuMemcpyHtoDAsync_(dst_ptr, reinterpret_cast<const void*>(src_ptr), bytes, stream),
            "cuMemcpyHtoDAsync");
      return;
    }
    if (src_ptr == dst_ptr && layout.src_strides == layout.dst_strides) return;  // the same elements
    if (overlaps(layout, src_ptr, dst_ptr, element)) {
      copy_through_temporary(src, dst, device, bytes, options);
      return;
    }
    if (layout.contiguous()) {
      check(driver().cuMemcpyAsync_(dst_ptr, src_ptr, bytes, stream), "cuMemcpyAsync");
      return;
    }
    Scratch<std::vector<int64_t>> arg_block;  // per thread: no allocation per call
    std::vector<int64_t>& args = *arg_block;
    args.assign({static_cast<int64_t>(dst_ptr), static_cast<int64_t>(src_ptr), layout.numel});
    args.insert(args.end(), layout.sizes.begin(), layout.sizes.end());
    args.insert(args.end(), layout.src_strides.begin(), layout.src_strides.end());
    args.insert(args.end(), layout.dst_strides.begin(), layout.dst_strides.end());
    // The kernels are cached by variant (copy_kernels.h): a warm copy
    // generates and hashes no source.
    // A permutation: tiles through shared memory, a grid of 4 blocks per
    // multiprocessor looping over them.
    if (const auto plan = plan_permute_copy(layout, element, context.info().multiprocessors, context.info().max_grid_x)) {
      const CopyKernel& k = copy_kernels().permute(device, plan->variant());
      launch(k.function, k.name.c_str(), static_cast<uint32_t>(plan->grid), static_cast<uint32_t>(plan->threads), 0,
             stream, args.data());
      return;
    }
    // Per element: a thread per element, of up to 16 bytes where both
    // tensors' rows allow (widen_copy), indexed in 32 bits where it fits.
    CopyLayout wide = layout;
    const int wide_bytes = widen_copy(&wide, element, src_ptr, dst_ptr);
    args.assign({static_cast<int64_t>(dst_ptr), static_cast<int64_t>(src_ptr), wide.numel});
    args.insert(args.end(), wide.sizes.begin(), wide.sizes.end());
    args.insert(args.end(), wide.src_strides.begin(), wide.src_strides.end());
    args.insert(args.end(), wide.dst_strides.begin(), wide.dst_strides.end());
    const int rank = static_cast<int>(wide.sizes.size());
    const CopyKernel& k = copy_kernels().strided(device, {wide_bytes, rank, copy_fits_int32(wide)});
    const int64_t blocks = std::min<int64_t>((wide.numel + kCopyBlock - 1) / kCopyBlock,
                                             std::min<int64_t>(65535LL * 32, context.info().max_grid_x));
    launch(k.function, k.name.c_str(), static_cast<uint32_t>(blocks), kCopyBlock, 0, stream, args.data());
  }

 private:
  static bool overlaps(const CopyLayout& l, uintptr_t src, uintptr_t dst, int element) {
    // Both tensors passed the entry checks: their byte ranges do not wrap.
    uintptr_t src_end, dst_end;
    byte_end(src, element_reach(l.sizes, l.src_strides).max_offset, element, &src_end);
    byte_end(dst, element_reach(l.sizes, l.dst_strides).max_offset, element, &dst_end);
    return src < dst_end && dst < src_end;
  }

  // src and dst share memory: go through a compact temporary, in stream order.
  void copy_through_temporary(const DLTensor& src, const DLTensor& dst, int device, size_t bytes,
                              const ExecOptions& options) {
    void* temp = allocate(bytes, device, options);
    DLTensor t = src;
    t.data = temp;
    t.byte_offset = 0;
    t.strides = nullptr;
    t.device = dst.device;
    try {
      copy(src, t, options);
      copy(t, dst, options);
    } catch (...) {
      release(temp, bytes, device, options);
      throw;
    }
    release(temp, bytes, device, options);
  }
};

}  // namespace

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace kf
