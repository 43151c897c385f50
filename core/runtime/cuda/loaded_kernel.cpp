#include "core/runtime/cuda/loaded_kernel.h"
#include "core/runtime/cuda/step_launch.h"

#include <limits>
#include <optional>

#include "core/runtime/cuda/kernel_cache.h"
#include "core/segment/matmul_pattern.h"
#include "core/util/debug_log.h"
#include "core/util/error.h"

namespace kf {

namespace {

using namespace kf::cuda;

constexpr uint32_t kDefaultSharedLimit = 48 * 1024;  // beyond this a kernel must opt in

// Static shared memory an Edges or cluster row kernel may have besides its
// partials or stage (its block reductions'); run_kernel checks the loaded
// kernel's own figure.
constexpr int kEdgesStaticReserve = 4096;

// The Edges kernel's launch: plan.launch with the column partials' shared memory.
LaunchRule make_edges_launch(const KernelPlan& plan) {
  LaunchRule rule = plan.launch;
  rule.row_partial_bytes = plan.edge_partial_bytes;
  if (plan.edge_partial_bytes > 0) rule.row_stage_pad = plan.edge_row_pad;
  return rule;
}

size_t index_of(KernelVariant v) {
  switch (v) {
    case KernelVariant::Main: return 0;
    case KernelVariant::LongRows: return 1;
    case KernelVariant::Scalar: return 2;
    case KernelVariant::Tight: return 3;
    case KernelVariant::Wide: return 4;
    case KernelVariant::Edges: return 5;
    case KernelVariant::LongEdges: return 6;
    case KernelVariant::Cluster: return 7;
    case KernelVariant::ScatterAtomic: return 8;
    case KernelVariant::ShortColumns: return 9;
    case KernelVariant::ShortColumnsScalar: return 10;
    case KernelVariant::ShortRows: return 11;
    case KernelVariant::Ungrouped: return 12;
    case KernelVariant::ShortRowsScalar: return 13;
    case KernelVariant::SplitRows: break;
  }
  fail(KF_ERR_INTERNAL, "a split-row variant loads through its own plan");
}

// Opts `f` in to the plan's shared memory beyond the default limit.
void allow_shared(int device, const KernelPlan& plan, CUfunction f, const std::string& name) {
  const auto shared = static_cast<uint32_t>(plan.launch.shared_bytes);
  if (shared <= kDefaultSharedLimit) return;
  ScopedContext context(device);
  if (shared > static_cast<uint32_t>(context.info().max_shared_optin))
    fail(KF_ERR_UNSUPPORTED, "kernel ", name, " needs ", shared, " bytes of shared memory; the device allows ",
         context.info().max_shared_optin);
  check(driver().cuFuncSetAttribute_(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared)),
        "cuFuncSetAttribute");
}

// A long-row kernel's limits, opted in to all the dynamic shared memory
// the device allows when it has a staged row path (or `partials`: the
// inner-outer Edges kernel's column partials).
KernelLimits long_row_limits(int device, const KernelPlan& plan, CUfunction f, bool partials = false) {
  KernelLimits limits;
  if (plan.launch.row_stage_bytes > 0 || partials) {
    ScopedContext context(device);
    int static_bytes = 0;
    check(driver().cuFuncGetAttribute_(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), "cuFuncGetAttribute");
    const int dynamic = context.info().max_shared_optin - static_bytes;
    if (dynamic > 0) {
      check(driver().cuFuncSetAttribute_(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic), "cuFuncSetAttribute");
      limits.max_dynamic_shared = dynamic;
    }
  }
  check(driver().cuFuncGetAttribute_(&limits.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, f), "cuFuncGetAttribute");
  return limits;
}

LoadedQuery loaded_on(int device) {
  return [device](const Digest& key) { return kernel_loaded(device, key); };
}

std::unique_ptr<LoadedKernel> make_loaded(const ConcreteFusion& c, const Task& task, KernelPlan plan) {
  auto k = std::make_unique<LoadedKernel>();
  k->device = c.device.id;
  k->sources = resolve_slots(*c.fusion, task, plan.args);
  if (!plan.split_rows.empty()) k->split = make_loaded(c, task, plan.split_rows[0]);
  k->plan = std::move(plan);
  return k;
}

// Whether one of `checks` that reads extents only fails with `sizes` (a
// width the vectors do not divide): the first run then compiles the Edges
// kernel or the scalar twins, not kernels the call would not launch.
// Checks of pointers and strides wait for the call's tensors
// (vector_checks_fail, edge_kernel_fits).
bool extents_fail(const LoadedKernel& k, const std::vector<ArgCheck>& checks, const ValueSizes& sizes) {
  const size_t n = k.plan.args.size();
  std::vector<int64_t> words(n, 0);
  std::vector<bool> known(n, false);
  for (size_t i = 0; i < n; ++i)
    if (k.plan.args[i].kind == ArgSlot::Kind::Extent) {
      words[i] = sizes[k.sources[i].value][static_cast<size_t>(k.plan.args[i].dim)];
      known[i] = true;
    }
  for (const ArgCheck& c : checks) {
    bool extents_only = true;
    for (int w : c.words) extents_only = extents_only && known[static_cast<size_t>(w)];
    if (extents_only && !holds(c, words.data())) return true;
  }
  return false;
}

bool has_kernel(const Segment& seg) {
  return seg.scheduler != SchedulerKind::Library && seg.scheduler != SchedulerKind::Communication &&
         !seg.task.exprs.empty();
}

}  // namespace

// Fills the kernel slot of every generated segment of `p` that has none:
// every plan is generated and the variant each segment takes with `sizes`
// (Main or, when an extent check fails already, Scalar)
// compiled, all on the compile pool, then loaded in run order.
void load_segments(const Plan& p, const ValueSizes& sizes) {
  const ConcreteFusion& c = *p.concrete;
  const Segmentation& s = p.segmentation;
  std::lock_guard lock(p.kernels_mutex);
  std::vector<size_t> missing;
  for (size_t k = 0; k < s.segments.size(); ++k)
    if (has_kernel(s.segments[k]) && p.kernel_slot(k).ready.load(std::memory_order_acquire) == nullptr)
      missing.push_back(k);
  if (missing.empty()) return;
  const DebugStep step("compile");
  std::vector<KernelPlan> plans = make_segment_plans(c, s, missing);
  std::vector<std::unique_ptr<LoadedKernel>> kernels;
  std::vector<LoadedKernel*> targets;  // per segment: the kernel whose variant loads (the split plan's for SplitRows)
  std::vector<KernelVariant> variants;
  std::vector<UnitRequest> requests;
  for (size_t i = 0; i < missing.size(); ++i) {
    kernels.push_back(make_loaded(c, s.segments[missing[i]].task, std::move(plans[i])));
    LoadedKernel& k = *kernels.back();
    KernelVariant v = kernel_variant(k.plan, sizes, device_info(c.device.id));
    const bool vector_variant =
        v == KernelVariant::Main || v == KernelVariant::Tight || v == KernelVariant::Wide || v == KernelVariant::ShortColumns ||
        v == KernelVariant::ShortRows;
    if ((vector_variant || v == KernelVariant::LongRows || v == KernelVariant::Cluster) &&
        (!k.plan.scalar_twins.empty() || !k.plan.long_edges_name.empty()) && extents_fail(k, k.plan.vector_checks, sizes)) {
      if (!k.plan.long_edges_name.empty() && !extents_fail(k, k.plan.edge_checks, sizes))
        v = edges_variant(k.plan, v, sizes, device_info(c.device.id));
      else if (k.plan.scalar_twins.empty()) {}  // (the kernel's own fallback paths)
      else if (v == KernelVariant::Wide) v = KernelVariant::LongRows;
      else if (v != KernelVariant::LongRows && v != KernelVariant::Cluster) v = scalar_variant(v);
    }
    LoadedKernel* target = &k;
    if (v == KernelVariant::SplitRows) {
      target = k.split.get();
      v = KernelVariant::Main;
    }
    targets.push_back(target);
    variants.push_back(v);
    requests.push_back({&target->plan, target->kernels_of(v)});
  }
  const int device = c.device.id;
  const std::vector<CompiledUnits> units = compile_units(requests, device_info(device).sm, loaded_on(device));
  for (size_t i = 0; i < missing.size(); ++i) {
    targets[i]->load(variants[i], units[i]);
    KernelSlot& slot = p.kernel_slot(missing[i]);
    slot.kernel = std::move(kernels[i]);
    slot.ready.store(slot.kernel.get(), std::memory_order_release);
  }
  if (step) step.done("kernels of " + std::to_string(missing.size()) + " segment(s) ready");
}

bool segments_loaded(const Plan& p) {
  const Segmentation& s = p.segmentation;
  for (size_t k = 0; k < s.segments.size(); ++k)
    if (has_kernel(s.segments[k]) && p.kernel_slot(k).ready.load(std::memory_order_acquire) == nullptr) return false;
  return true;
}

int cluster_blocks_on(const KernelPlan& plan, std::span<const int64_t> domain, const cuda::DeviceInfo& device) {
  if (plan.cluster_name.empty() || device.sm < 90) return 0;
  return cluster_blocks(plan.launch, domain, device.multiprocessors, device.max_shared_optin - kEdgesStaticReserve);
}

KernelVariant kernel_variant(const KernelPlan& plan, const ValueSizes& sizes, const cuda::DeviceInfo& device) {
  if (plan.launch.kind == LaunchRule::Kind::Scatter && plan.scatter.sorted_min_width > 0 &&
      !cuda::scatter_takes_sorted(plan, sizes))
    return KernelVariant::ScatterAtomic;
  if (plan.launch.kind == LaunchRule::Kind::ColumnReduce && !plan.short_name.empty() &&
      takes_short_columns(plan.launch, sizes[plan.launch.domain_value]))
    return KernelVariant::ShortColumns;
  if (!plan.ungrouped_name.empty() && takes_ungrouped_tiles(plan.launch, sizes[plan.launch.domain_value]))
    return KernelVariant::Ungrouped;
  if (plan.launch.kind != LaunchRule::Kind::PerRow) return KernelVariant::Main;
  const std::span<const int64_t> domain = sizes[plan.launch.domain_value];
  // The cluster kernel takes rows that one block would re-read (LongRows)
  // or that split over blocks (SplitRows), and rows the wide kernel would
  // hold in registers when too few to fill the device. Where the wide kernel
  // fills it, it stays (H100, docs/perf-log.md session 22: softmax over 2048 x
  // 32768 float32 0.192 ms held against 0.224 staged, its exp computed
  // once; 256 x 32768 0.054 held against 0.039 in clusters).
  if (cluster_blocks_on(plan, domain, device) > 1) {
    int64_t rows = 1;
    for (size_t d = 0; d < domain.size(); ++d)
      if (d >= plan.launch.reduced_dims.size() || !plan.launch.reduced_dims[d]) rows *= domain[d];
    const bool wide = !plan.wide_name.empty() && takes_wide_rows(plan.launch, domain, device.max_shared_optin);
    if (!wide || rows < 2 * int64_t{device.multiprocessors}) return KernelVariant::Cluster;
  }
  if (!plan.split_rows.empty() && prefer_split_rows(plan.launch, domain, device.multiprocessors))
    return KernelVariant::SplitRows;
  if (!plan.wide_name.empty() && takes_wide_rows(plan.launch, domain, device.max_shared_optin))
    return KernelVariant::Wide;
  // Short rows before long ones: a streamed plan (takes_long_rows whatever
  // the row's length) holds a short row in its group's registers too.
  if (!plan.short_rows_name.empty() && takes_short_rows(plan.launch, domain)) return KernelVariant::ShortRows;
  if (!plan.long_row_name.empty() && takes_long_rows(plan.launch, domain)) return KernelVariant::LongRows;
  if (!plan.tight_name.empty() && takes_tight_registers(plan.launch, domain)) return KernelVariant::Tight;
  return KernelVariant::Main;
}

KernelVariant edges_variant(const KernelPlan& plan, KernelVariant v, const ValueSizes& sizes,
                            const cuda::DeviceInfo& device) {
  // Where Tight stands for Main, the main kernel's block fits a
  // multiprocessor once: the register path at 64 registers ran slower than
  // the staged long-row path there (H100: softmax 16384x16391 bf16 0.62 ms
  // against 0.52, layernorm 0.68 against 0.45; docs/perf-log.md session 16).
  // (ShortRows holds its rows in registers as Main does. Its scalar twin
  // keeps several rows per block: it takes them without an Edges kernel,
  // and where a row needs fewer than a warp's threads, which the Edges
  // kernel would give a block of one warp, mostly idle: a variance over
  // rows of 91 bfloat16 ran at 8% of DRAM bandwidth, instruction-bound,
  // a 32-thread block per row; docs/perf-log.md session 41.)
  if (v == KernelVariant::ShortRows &&
      (plan.edges_name.empty() ||
       short_row_dims(plan.launch, sizes[plan.launch.domain_value], std::numeric_limits<int>::max()).block < 32))
    return KernelVariant::ShortRowsScalar;
  if ((v != KernelVariant::Main && v != KernelVariant::ShortRows) || plan.edges_name.empty()) return KernelVariant::LongEdges;
  if (plan.edge_partial_bytes > 0 &&
      !edge_partials_fit(make_edges_launch(plan), sizes[plan.launch.domain_value], device.max_shared_optin - kEdgesStaticReserve))
    return KernelVariant::LongEdges;
  return KernelVariant::Edges;
}

bool is_vector_variant(KernelVariant v) {
  return v == KernelVariant::Main || v == KernelVariant::Tight || v == KernelVariant::Wide || v == KernelVariant::LongRows ||
         v == KernelVariant::Cluster || v == KernelVariant::ShortColumns || v == KernelVariant::ShortRows;
}

KernelVariant call_variant(const KernelPlan& plan, KernelVariant v, const ValueSizes& sizes,
                           const cuda::DeviceInfo& device, const int64_t* args) {
  if (!is_vector_variant(v) || !vector_checks_fail(plan, args)) return v;
  if (edge_kernel_fits(plan, args)) return edges_variant(plan, v, sizes, device);
  if (plan.scalar_twins.empty()) return v;
  if (v == KernelVariant::Wide) return KernelVariant::LongRows;
  if (v == KernelVariant::LongRows || v == KernelVariant::Cluster) return v;  // (their own scalar paths)
  return scalar_variant(v);
}

KernelVariant scalar_variant(KernelVariant v) {
  return v == KernelVariant::ShortColumns ? KernelVariant::ShortColumnsScalar
         : v == KernelVariant::ShortRows ? KernelVariant::ShortRowsScalar
                                         : KernelVariant::Scalar;
}

bool vector_checks_fail(const KernelPlan& plan, const int64_t* args) {
  if (plan.scalar_twins.empty() && plan.long_edges_name.empty()) return false;
  for (const ArgCheck& c : plan.vector_checks)
    if (!holds(c, args)) return true;
  return false;
}

bool edge_kernel_fits(const KernelPlan& plan, const int64_t* args) {
  if (plan.long_edges_name.empty()) return false;
  for (const ArgCheck& c : plan.edge_checks)
    if (!holds(c, args)) return false;
  return true;
}

namespace {

// Whether later kernel `name` of `plan` loads with variant v (Main, Scalar
// or ScatterAtomic): all of them, but for a scatter with both paths the
// atomic path's (clear, update, mean) with ScatterAtomic only and the
// sorted path's with Main only.
bool later_of_variant(const KernelPlan& plan, const std::string& name, KernelVariant v) {
  if (plan.launch.kind != LaunchRule::Kind::Scatter || plan.scatter.sorted_min_width <= 0)
    return v != KernelVariant::ScatterAtomic;
  const KernelPlan::ScatterKernels& k = plan.scatter;
  const bool atomic = name == k.clear || name == k.update || name == k.mean;
  return atomic == (v == KernelVariant::ScatterAtomic);
}

}  // namespace

std::vector<std::string> LoadedKernel::kernels_of(KernelVariant v) const {
  std::vector<std::string> names;
  switch (v) {
    case KernelVariant::SplitRows: return names;
    case KernelVariant::Main: names.push_back(plan.name); break;
    case KernelVariant::LongRows: names.push_back(plan.long_row_name); break;
    case KernelVariant::Scalar: names.push_back(plan.scalar_of(plan.name)); break;
    case KernelVariant::Tight: names.push_back(plan.tight_name); break;
    case KernelVariant::Wide: names.push_back(plan.wide_name); break;
    case KernelVariant::Edges: names.push_back(plan.edges_name); break;
    case KernelVariant::LongEdges: names.push_back(plan.long_edges_name); break;
    case KernelVariant::Cluster: names.push_back(plan.cluster_name); break;
    case KernelVariant::ShortRows: names.push_back(plan.short_rows_name); break;
    case KernelVariant::ShortRowsScalar: names.push_back(plan.scalar_of(plan.short_rows_name)); break;
    case KernelVariant::Ungrouped: names.push_back(plan.ungrouped_name); break;
    case KernelVariant::ScatterAtomic: names.push_back(plan.name); break;
    case KernelVariant::ShortColumns: return {plan.short_name};  // alone: no finish, no later kernels
    case KernelVariant::ShortColumnsScalar: return {plan.scalar_of(plan.short_name)};
  }
  if (!plan.finish_name.empty()) names.push_back(plan.finish_name);
  if (v == KernelVariant::Main || v == KernelVariant::Scalar || v == KernelVariant::ScatterAtomic)
    for (const KernelPlan::LaterKernel& l : plan.later)
      if (later_of_variant(plan, l.name, v))
        names.push_back(v == KernelVariant::Scalar ? plan.scalar_of(l.name) : l.name);
  return names;
}

void LoadedKernel::load(KernelVariant v, const CompiledUnits& units) {
  const size_t index = index_of(v);
  const auto load = [&](const std::string& name) {
    const size_t u = plan.unit_of(name);
    return load_kernel(device, units.keys[u], plan.units[u].source, name, units.images[u].get());
  };
  if (v == KernelVariant::ShortColumns || v == KernelVariant::ShortColumnsScalar) {  // alone: no finish, no later kernels
    if (v == KernelVariant::ShortColumns) short_columns = load(plan.short_name);
    else short_scalar = load(plan.scalar_of(plan.short_name));
    loaded_[index].store(true, std::memory_order_release);
    return;
  }
  if (!plan.finish_name.empty() && finish == nullptr) finish = load(plan.finish_name);
  if (v == KernelVariant::Main || v == KernelVariant::ScatterAtomic) {
    if (function == nullptr) function = load(plan.name);
    later.resize(plan.later.size(), nullptr);
    for (size_t i = 0; i < plan.later.size(); ++i)
      if (later[i] == nullptr && later_of_variant(plan, plan.later[i].name, v)) later[i] = load(plan.later[i].name);
    allow_shared(device, plan, function, plan.name);
    // Elementwise: its grid is a few waves of resident blocks; inner-outer
    // rows: one wave of them.
    if (plan.launch.kind == LaunchRule::Kind::Elementwise || plan.launch.outer_accumulators > 0)
      check(driver().cuFuncGetAttribute_(&limits.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, function),
            "cuFuncGetAttribute");
  } else if (v == KernelVariant::Scalar) {
    scalar = load(plan.scalar_of(plan.name));
    for (const KernelPlan::LaterKernel& l : plan.later) scalar_later.push_back(load(plan.scalar_of(l.name)));
    allow_shared(device, plan, scalar, plan.scalar_of(plan.name));
  } else if (v == KernelVariant::Wide) {
    wide = load(plan.wide_name);
    allow_shared(device, plan, wide, plan.wide_name);
    wide_launch = plan.launch;
    wide_launch.row_items = plan.launch.wide_row_items;
  } else if (v == KernelVariant::Tight) {
    tight = load(plan.tight_name);
    allow_shared(device, plan, tight, plan.tight_name);
    int local_bytes = 0;
    check(driver().cuFuncGetAttribute_(&local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, tight), "cuFuncGetAttribute");
    tight_spills = local_bytes > kTightSpillBytes;
  } else if (v == KernelVariant::Edges) {
    edges = load(plan.edges_name);
    edges_launch = make_edges_launch(plan);
    if (plan.edge_partial_bytes > 0) edges_limits = long_row_limits(device, plan, edges, true);
    else allow_shared(device, plan, edges, plan.edges_name);
  } else if (v == KernelVariant::LongEdges) {
    long_edges = load(plan.long_edges_name);
    long_edges_limits = long_row_limits(device, plan, long_edges);
    long_edges_launch = plan.launch;
    long_edges_launch.stream_rows = true;  // the long-row kernel's launch, whatever the row's length
    long_edges_launch.row_stage_pad = plan.edge_row_pad;
  } else if (v == KernelVariant::Cluster) {
    cluster = load(plan.cluster_name);
    cluster_limits = long_row_limits(device, plan, cluster);
  } else if (v == KernelVariant::ShortRows) {
    short_rows = load(plan.short_rows_name);
  } else if (v == KernelVariant::ShortRowsScalar) {
    short_rows_scalar = load(plan.scalar_of(plan.short_rows_name));
  } else if (v == KernelVariant::Ungrouped) {  // (Elementwise: its grid is a few waves of resident blocks)
    ungrouped = load(plan.ungrouped_name);
    allow_shared(device, plan, ungrouped, plan.ungrouped_name);
    check(driver().cuFuncGetAttribute_(&ungrouped_limits.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, ungrouped),
          "cuFuncGetAttribute");
  } else {
    long_row = load(plan.long_row_name);
    long_limits = long_row_limits(device, plan, long_row);
  }
  loaded_[index].store(true, std::memory_order_release);
}

const LoadedKernel& LoadedKernel::variant(KernelVariant v) const {
  if (v == KernelVariant::SplitRows) {
    if (split == nullptr) fail(KF_ERR_INTERNAL, "kernel ", plan.name, " has no split-row plan");
    return split->variant(KernelVariant::Main);
  }
  std::atomic<bool>& loaded = loaded_[index_of(v)];
  if (!loaded.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    if (!loaded.load(std::memory_order_relaxed)) {
      // Created non-const (make_loaded): loading fills the functions once.
      auto& self = const_cast<LoadedKernel&>(*this);
      const DebugStep step("compile");
      self.load(v, compile_plan(plan, device_info(device).sm, loaded_on(device), kernels_of(v)));
      if (step) step.done("kernel " + kernels_of(v)[0] + " ready (a variant loaded on first need)");
    }
  }
  return *this;
}

const LoadedKernel& loaded_segment(const Plan& p, size_t index, const ValueSizes& sizes) {
  const KernelSlot& slot = p.kernel_slot(index);
  const LoadedKernel* k = slot.ready.load(std::memory_order_acquire);
  if (k == nullptr) {
    load_segments(p, sizes);
    k = slot.ready.load(std::memory_order_acquire);
  }
  return *k;
}

const LoadedKernel& loaded_pattern_kernel(const Plan& plan, size_t index) {
  const ConcreteFusion& c = *plan.concrete;
  const Segment& seg = plan.segmentation.segments[index];
  KernelSlot& slot = plan.kernel_slot(index);
  if (const LoadedKernel* k = slot.ready.load(std::memory_order_acquire)) return *k;
  std::lock_guard lock(plan.kernels_mutex);
  if (const LoadedKernel* k = slot.ready.load(std::memory_order_acquire)) return *k;
  if (seg.task.children.empty()) fail(KF_ERR_INTERNAL, "a library segment without a pattern has no kernel");
  const Task& pattern = seg.task.children[0];
  const std::optional<MatmulPattern> p = describe_matmul_pattern(c, pattern);
  if (!p) fail(KF_ERR_INTERNAL, "a library segment's nested task is no matmul pattern");
  if (!seg.schedule) fail(KF_ERR_INTERNAL, "a matmul pattern's epilogue has no schedule");
  Task task = matmul_epilogue_task(*c.fusion, pattern, *p);
  KernelPlan kernel_plan = emit_kernel(c, task, *seg.schedule);
  if (!kernel_plan.long_row_name.empty())
    fail(KF_ERR_INTERNAL, "a matmul pattern's epilogue kernel ", kernel_plan.name, " is a row kernel");
  std::unique_ptr<LoadedKernel> k = make_loaded(c, task, std::move(kernel_plan));
  k->task = std::move(task);
  k->product = p->product;
  k->variant(KernelVariant::Main);
  slot.kernel = std::move(k);
  slot.ready.store(slot.kernel.get(), std::memory_order_release);
  return *slot.kernel;
}

}  // namespace kf
