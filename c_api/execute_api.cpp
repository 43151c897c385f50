// Concretize, segment and execute: the run-time half of the C API.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "c_api/api_guard.h"
#include "c_api/handles.h"
#include "core/util/handle_registry.h"
#include "core/codegen/kernel_plan.h"
#include "core/concretize/input_meta.h"
#include "core/runtime/comm/communicator.h"
#include "core/text/text_printer.h"
#include "core/runtime/executor.h"
#include "core/runtime/outputs.h"
#include "core/schedule/registry.h"
#include "core/segment/matmul_pattern.h"
#include "core/segment/segment_text.h"
#include "core/util/scratch.h"

using kf::capi::guard;
using kf::capi::require;

namespace {

char* copy_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

kf::ExecOptions options_of(const kf_exec_options* o, const char* fn) {
  kf::ExecOptions opts;
  if (o == nullptr) return opts;
  kf::capi::require_struct(o, offsetof(kf_exec_options, allocator) + sizeof(void*), fn, "options");
  opts.stream = o->stream;
  opts.allocator = o->allocator;
  // A communicator handle is the Communicator itself (core/runtime/comm).
  if (o->struct_size >= offsetof(kf_exec_options, communicator) + sizeof(kf_communicator))
    opts.communicator = static_cast<kf::Communicator*>(o->communicator);
  if (opts.allocator != nullptr) {
    kf::capi::require_struct(opts.allocator, offsetof(kf_allocator, free) + sizeof(void*), fn,
                             "options->allocator");
    if (opts.allocator->alloc == nullptr || opts.allocator->free == nullptr)
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": options->allocator needs both alloc and free");
  }
  return opts;
}

const kf::Segment& segment_at(const kf_segmentation_s* h, size_t index, const char* fn) {
  const auto& segs = h->segmentation->segments;
  if (index >= segs.size())
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": index ", index, " is out of range (", segs.size(),
             " segments)");
  return segs[index];
}

// Binds the inputs into `b` (this thread's, see Scratch) and returns the
// plan (cached) for them.
std::shared_ptr<kf::Plan> bind(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                               const char* fn, kf::Binding& b) {
  kf::Fusion* fusion = kf::capi::fusion_of(f, fn);
  kf::bind_inputs(*fusion, inputs, num_inputs, &b);
  return kf::plan_for(*fusion, b);
}

void check_output_count(const kf::Fusion& f, size_t n, const char* fn) {
  if (n != f.outputs.size())
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": expected ", f.outputs.size(), " outputs, got ", n);
}

bool read_only(const uint64_t* flags, size_t i) {
  return flags != nullptr && (flags[i] & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
}

// DLPack's read-only flag: no output may write into a read-only input.
// Called after binding, so the fusion's input count has been checked.
void check_read_only_aliases(const kf::Fusion& f, const uint64_t* input_flags, const char* fn) {
  if (input_flags == nullptr) return;
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const int64_t a = f.outputs[i].alias_input;
    if (a >= 0 && read_only(input_flags, static_cast<size_t>(a)))
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": output ", i, " (value ", f.outputs[i].value,
               ") is declared to alias ", kf::input_name(f, static_cast<size_t>(a)),
               ", which is read-only (DLPACK_FLAG_BITMASK_READ_ONLY): an in-place output needs a "
               "writable input");
  }
}

// kf_execute and kf_execute_flagged: allocates the outputs and runs. On
// failure frees what it made and writes no output.
void execute_allocating(kf_fusion f, const DLTensor* const* inputs, const uint64_t* input_flags,
                        size_t num_inputs, DLManagedTensor** outputs, size_t num_outputs,
                        const kf_exec_options* options, const char* fn) {
  kf::ExecOptions opts = options_of(options, fn);
  kf::Scratch<kf::Binding> b;
  auto p = bind(f, inputs, num_inputs, fn, *b);
  const kf::ConcreteFusion& c = *p->concrete;
  check_output_count(*c.fusion, num_outputs, fn);
  if (num_outputs > 0) require(outputs, fn, "outputs");
  check_read_only_aliases(*c.fusion, input_flags, fn);
  std::vector<DLManagedTensor*> made;
  try {
    for (size_t i = 0; i < num_outputs; ++i)
      made.push_back(kf::allocate_output(c, *b, i, inputs, opts));
    std::vector<DLTensor*> dl;
    for (auto* m : made) dl.push_back(&m->dl_tensor);
    kf::execute(*p, *b, inputs, dl.data(), opts);
  } catch (...) {
    for (auto* m : made) m->deleter(m);
    throw;
  }
  for (size_t i = 0; i < num_outputs; ++i) outputs[i] = made[i];
}

// The plan for caller-allocated outputs (kf_execute_into, kf_concretize_into),
// with the outputs checked against it. The plan is made for the outputs'
// memory order too (a row-major output of a transposed input gets a tiled
// kernel): where the caller's outputs are not laid out as kfuse would lay
// them out, their orders join the key. `lookup`: plan_for (builds what is
// missing), or cached_plan (kf_fusion_is_ready: nullptr where a call would
// build a plan; the outputs are then checked no further than their count).
using PlanLookup = std::shared_ptr<kf::Plan> (*)(const kf::Fusion&, const kf::Binding&);
std::shared_ptr<kf::Plan> plan_into(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                    DLTensor* const* outputs, size_t num_outputs, const char* fn,
                                    kf::Binding& b, PlanLookup lookup = kf::plan_for) {
  kf::Fusion* fusion = kf::capi::fusion_of(f, fn);
  kf::bind_inputs(*fusion, inputs, num_inputs, &b);
  check_output_count(*fusion, num_outputs, fn);
  if (num_outputs > 0) require(outputs, fn, "outputs");
  auto p = lookup(*fusion, b);
  if (p != nullptr && !kf::outputs_in_plan_layout(*fusion, *p->concrete, outputs, num_outputs, b)) {
    kf::bind_output_layouts(*fusion, outputs, num_outputs, &b);
    p = lookup(*fusion, b);
  }
  if (p == nullptr) return p;
  kf::Scratch<std::vector<kf::MemoryRegion>> regions;
  regions->clear();
  for (size_t i = 0; i < num_outputs; ++i) kf::check_output(*p->concrete, b, i, outputs[i], regions.get());
  return p;
}

// kf_execute_into and kf_execute_into_flagged.
void execute_into(kf_fusion f, const DLTensor* const* inputs, const uint64_t* input_flags,
                  size_t num_inputs, DLTensor* const* outputs, const uint64_t* output_flags,
                  size_t num_outputs, const kf_exec_options* options, const char* fn) {
  kf::ExecOptions opts = options_of(options, fn);
  kf::Scratch<kf::Binding> b;
  auto p = plan_into(f, inputs, num_inputs, outputs, num_outputs, fn, *b);
  for (size_t i = 0; i < num_outputs; ++i)
    if (read_only(output_flags, i))
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": output ", i, " (value ", p->fusion().outputs[i].value,
               ") is read-only (DLPACK_FLAG_BITMASK_READ_ONLY)");
  check_read_only_aliases(p->fusion(), input_flags, fn);
  kf::execute(*p, *b, inputs, outputs, opts);
}

// A versioned output over one kf_execute makes: the DLTensor is copied (its
// shape and strides stay in the inner tensor), the deleter frees both.
struct VersionedOutput {
  DLManagedTensorVersioned v{};
  DLManagedTensor* inner = nullptr;
};

void delete_versioned(DLManagedTensorVersioned* m) {
  auto* o = static_cast<VersionedOutput*>(m->manager_ctx);
  o->inner->deleter(o->inner);
  delete o;
}

// Runs like kf_execute and wraps each output; on failure nothing is kept.
void execute_versioned(kf_fusion f, const DLTensor* const* inputs, const uint64_t* input_flags,
                       size_t num_inputs, DLManagedTensorVersioned** outputs, size_t num_outputs,
                       const kf_exec_options* options, const char* fn) {
  if (num_outputs > 0) require(outputs, fn, "outputs");
  std::vector<DLManagedTensor*> made(num_outputs, nullptr);
  std::vector<VersionedOutput*> wrapped(num_outputs, nullptr);
  execute_allocating(f, inputs, input_flags, num_inputs, made.data(), num_outputs, options, fn);
  try {
    for (size_t i = 0; i < num_outputs; ++i) wrapped[i] = new VersionedOutput;
  } catch (...) {
    for (size_t i = 0; i < num_outputs; ++i) {
      delete wrapped[i];
      made[i]->deleter(made[i]);
    }
    throw;
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    VersionedOutput* o = wrapped[i];
    o->inner = made[i];
    o->v.version.major = KF_DLPACK_MAJOR_VERSION;
    o->v.version.minor = KF_DLPACK_MINOR_VERSION;
    o->v.manager_ctx = o;
    o->v.deleter = delete_versioned;
    o->v.flags = 0;
    o->v.dl_tensor = made[i]->dl_tensor;
    outputs[i] = &o->v;
  }
}

}  // namespace

namespace {

std::string describe_launch(const kf::KernelPlan& plan) {
  const kf::LaunchRule& l = plan.launch;
  using Kind = kf::LaunchRule::Kind;
  std::string s = l.kind == Kind::Elementwise    ? "elementwise over"
                  : l.kind == Kind::PerRow       ? "one block per row of"
                  : l.kind == Kind::ColumnReduce ? "column tiles x row splits of"
                  : l.kind == Kind::Scatter      ? "the scatter kernels of"
                  : l.kind == Kind::Scan         ? (l.scan_block_per_line ? "one block per line of" : "one thread per line of")
                                                 : "rows x row splits of";
  s += " value " + std::to_string(l.domain_value) + ", block " + std::to_string(l.block);
  if (l.kind == kf::LaunchRule::Kind::Elementwise)
    s += ", " + std::to_string(l.items_per_thread) + " items per thread";
  if (l.shared_bytes) s += ", " + std::to_string(l.shared_bytes) + " bytes of shared memory";
  if (l.short_rows > 0)
    s += "; up to " + std::to_string(l.short_rows) + " rows: one kernel of " + std::to_string(l.short_tile_cols) +
         "-column tiles";
  return s;
}

std::string describe_args(const kf::KernelPlan& plan) {
  static const char* const kinds[] = {"data", "extent", "stride", "scalar", "divisor"};
  std::string s;
  for (size_t k = 0; k < plan.args.size(); ++k) {
    const kf::ArgSlot& a = plan.args[k];
    s += (k ? ", " : "") + std::string(kinds[static_cast<int>(a.kind)]) + "(" + std::to_string(a.value);
    if (a.kind != kf::ArgSlot::Kind::Data && a.kind != kf::ArgSlot::Kind::Scalar) s += "." + std::to_string(a.dim);
    s += ")";
  }
  return s;
}

}  // namespace

extern "C" {

KF_API kf_status kf_concretize(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                               kf_concrete* out) {
  return guard([&] {
    require(out, "kf_concretize", "out");
    kf::Scratch<kf::Binding> b;
    auto c = bind(f, inputs, num_inputs, "kf_concretize", *b);
    c->retain_external();
    *out = c.get();
  });
}

KF_API kf_status kf_concretize_into(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                    DLTensor* const* outputs, size_t num_outputs, kf_concrete* out) {
  return guard([&] {
    require(out, "kf_concretize_into", "out");
    kf::Scratch<kf::Binding> b;
    auto c = plan_into(f, inputs, num_inputs, outputs, num_outputs, "kf_concretize_into", *b);
    c->retain_external();
    *out = c.get();
  });
}

KF_API void kf_concrete_release(kf_concrete c) {
  if (c != nullptr && !kf::Plan::release_external(c))
    kf::capi::report_not_held("kf_concrete_release", "c", c);
}

KF_API kf_status kf_concrete_describe(kf_concrete c, char** out) {
  return guard([&] {
    auto* plan = kf::capi::plan_of(c, "kf_concrete_describe");
    // Checked before allocating: in `*require(out) = copy_string(...)` the
    // right side runs first and would leak when out is NULL.
    char** dst = require(out, "kf_concrete_describe", "out");
    *dst = copy_string(plan->concrete->describe());
  });
}

KF_API kf_status kf_segment(kf_concrete c, kf_segmentation* out) {
  return guard([&] {
    auto* plan = kf::capi::plan_of(c, "kf_segment");
    require(out, "kf_segment", "out");
    auto handle = std::make_unique<kf_segmentation_s>();
    handle->fusion = const_cast<kf::Fusion&>(plan->fusion()).shared_from_this();
    handle->plan = plan->shared_from_this();
    handle->concrete = plan->concrete.get();
    handle->segmentation = &plan->segmentation;
    kf::handles::hold_locked(handle.get());
    *out = handle.release();
  });
}

KF_API void kf_segmentation_release(kf_segmentation s) {
  if (s == nullptr) return;
  if (!kf::handles::drop_locked(s)) return kf::capi::report_not_held("kf_segmentation_release", "s", s);
  delete s;
}

KF_API kf_status kf_segmentation_count(kf_segmentation s, size_t* out) {
  return guard([&] {
    auto* h = kf::capi::segmentation_of(s, "kf_segmentation_count");
    *require(out, "kf_segmentation_count", "out") = h->segmentation->segments.size();
  });
}

KF_API kf_status kf_segmentation_get(kf_segmentation s, size_t index, kf_segment_info* info) {
  return guard([&] {
    const char* fn = "kf_segmentation_get";
    auto* h = kf::capi::segmentation_of(s, fn);
    kf::capi::require_struct(info, offsetof(kf_segment_info, num_dead_after) + sizeof(size_t), fn, "info");
    const kf::Segment& seg = segment_at(h, index, fn);
    info->run_order = index;
    info->scheduler = kf::scheduler_name(seg.scheduler).data();
    info->inputs = seg.api_inputs.data();
    info->num_inputs = seg.api_inputs.size();
    info->outputs = seg.task.outputs.data();
    info->num_outputs = seg.task.outputs.size();
    info->dead_after = seg.dead_after.data();
    info->num_dead_after = seg.dead_after.size();
    if (info->struct_size >= offsetof(kf_segment_info, num_children) + sizeof(size_t))
      info->num_children = seg.task.children.size();
  });
}

KF_API kf_status kf_segment_child(kf_segmentation s, size_t index, size_t child, kf_task_info* info) {
  return guard([&] {
    const char* fn = "kf_segment_child";
    auto* h = kf::capi::segmentation_of(s, fn);
    kf::capi::require_struct(info, sizeof(kf_task_info), fn, "info");
    const kf::Segment& seg = segment_at(h, index, fn);
    if (child >= seg.task.children.size())
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": child ", child, " is out of range (segment ", index,
               " has ", seg.task.children.size(), " nested tasks)");
    const kf::Task& task = seg.task.children[child];
    const std::optional<kf::MatmulPattern> p = kf::describe_matmul_pattern(*h->concrete, task);
    if (!p) kf::fail(KF_ERR_INTERNAL, fn, ": nested task ", child, " of segment ", index, " is no known pattern");
    info->pattern = kf::matmul_pattern_name(*h->concrete->fusion, *p).data();
    info->inputs = task.inputs.data();
    info->num_inputs = task.inputs.size();
    info->outputs = task.outputs.data();
    info->num_outputs = task.outputs.size();
  });
}

KF_API kf_status kf_segment_to_text(kf_segmentation s, size_t index, char** out) {
  return guard([&] {
    const char* fn = "kf_segment_to_text";
    auto* h = kf::capi::segmentation_of(s, fn);
    require(out, fn, "out");
    const kf::Segment& seg = segment_at(h, index, fn);
    *out = copy_string(kf::segment_to_text(*h->concrete->fusion, seg.task));
  });
}

KF_API kf_status kf_segment_schedule(kf_segmentation s, size_t index, char** out) {
  return guard([&] {
    const char* fn = "kf_segment_schedule";
    auto* h = kf::capi::segmentation_of(s, fn);
    require(out, fn, "out");
    const kf::Segment& seg = segment_at(h, index, fn);
    if (!seg.schedule) {
      if (seg.scheduler == kf::SchedulerKind::Library)
        kf::fail(KF_ERR_UNSUPPORTED, fn, ": segment ", index, " is a library call (matmul/linear) with no generated kernel");
      if (seg.task.exprs.empty()) kf::fail(KF_ERR_UNSUPPORTED, fn, ": segment ", index, " computes nothing (no-op)");
      kf::fail(KF_ERR_UNSUPPORTED, fn, ": segment ", index, ": no scheduler takes it: ", seg.unscheduled_why);
    }
    *out = copy_string(kf::describe(*seg.schedule));
  });
}

KF_API kf_status kf_segment_schedulers(kf_segmentation s, size_t index, char** out) {
  return guard([&] {
    const char* fn = "kf_segment_schedulers";
    auto* h = kf::capi::segmentation_of(s, fn);
    require(out, fn, "out");
    const kf::Segment& seg = segment_at(h, index, fn);
    if (seg.scheduler == kf::SchedulerKind::Library)
      kf::fail(KF_ERR_UNSUPPORTED, fn, ": segment ", index, " is a library call (matmul/linear): no scheduler is asked");
    if (seg.task.exprs.empty()) kf::fail(KF_ERR_UNSUPPORTED, fn, ": segment ", index, " computes nothing (no-op)");
    // Asked again with reasons (segmentation asked without): the registry
    // answers the same for the same task and tuning.
    const kf::ScheduleProposal p = kf::propose_schedule(*h->concrete, seg.task, kf::default_tuning(), true);
    if (!p.schedule && p.declined.empty())
      kf::fail(KF_ERR_UNSUPPORTED, fn, ": segment ", index, ": no scheduler is asked: ", p.why);
    std::string text;
    for (const kf::Declined& d : p.declined) text += std::string(d.family) + ": declined: " + d.why + "\n";
    if (p.schedule) text += std::string(kf::family_of(*p.schedule)) + ": takes it\n";
    *out = copy_string(text);
  });
}

KF_API kf_status kf_segment_cuda_source(kf_segmentation s, size_t index, char** out) {
  return guard([&] {
    const char* fn = "kf_segment_cuda_source";
    auto* h = kf::capi::segmentation_of(s, fn);
    require(out, fn, "out");
    const kf::Segment& seg = segment_at(h, index, fn);
    if (seg.scheduler == kf::SchedulerKind::Library)
      kf::fail(KF_ERR_UNSUPPORTED, fn, ": segment ", index,
               " is a library segment (matmul/linear call a library, no kernel is generated)");
    kf::KernelPlan plan = kf::emit_segment_kernel(*h->concrete, seg);
    std::string text = "// segment " + std::to_string(index) + ": kernel " + plan.name + "\n" +
                       "// schedule: " + kf::describe(*seg.schedule) + " index=" + (h->concrete->index32 ? "int32" : "int64") + "\n" +
                       "// launch: " + describe_launch(plan) + "\n" +
                       "// args: " + describe_args(plan) + "\n" + plan.source;
    for (const kf::KernelPlan& split : plan.split_rows)  // compiled only when a call launches it
      text += "\n// rows split over blocks (few rows too long for one block): kernel " + split.name + "\n" +
              "// launch: " + describe_launch(split) + "\n" + "// args: " + describe_args(split) + "\n" + split.source;
    *out = copy_string(text);
  });
}

KF_API kf_status kf_execute(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                            DLManagedTensor** outputs, size_t num_outputs,
                            const kf_exec_options* options) {
  return guard([&] {
    execute_allocating(f, inputs, nullptr, num_inputs, outputs, num_outputs, options, "kf_execute");
  });
}

KF_API kf_status kf_execute_into(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                 DLTensor* const* outputs, size_t num_outputs,
                                 const kf_exec_options* options) {
  return guard([&] {
    execute_into(f, inputs, nullptr, num_inputs, outputs, nullptr, num_outputs, options,
                 "kf_execute_into");
  });
}

namespace {

// The plan kf_execute (outputs NULL, none) or kf_execute_into with these
// tensors would run: from `lookup` (plan_for or cached_plan, see plan_into).
std::shared_ptr<kf::Plan> call_plan(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                    DLTensor* const* outputs, size_t num_outputs, const char* fn, kf::Binding& b,
                                    PlanLookup lookup) {
  if (num_inputs > 0) require(inputs, fn, "inputs");
  if (outputs != nullptr || num_outputs > 0) return plan_into(f, inputs, num_inputs, outputs, num_outputs, fn, b, lookup);
  kf::Fusion* fusion = kf::capi::fusion_of(f, fn);
  kf::bind_inputs(*fusion, inputs, num_inputs, &b);
  return lookup(*fusion, b);
}

}  // namespace

KF_API kf_status kf_fusion_is_ready(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                    DLTensor* const* outputs, size_t num_outputs, int* ready) {
  return guard([&] {
    const char* fn = "kf_fusion_is_ready";
    require(ready, fn, "ready");
    *ready = 0;
    kf::Scratch<kf::Binding> b;
    const auto p = call_plan(f, inputs, num_inputs, outputs, num_outputs, fn, *b, kf::cached_plan);
    if (p == nullptr) return;
    try {
      *ready = kf::prepared(*p) ? 1 : 0;
    } catch (const kf::Error& e) {
      if (e.status() != KF_ERR_NO_DEVICE) throw;  // (no GPU: the call cannot start, so it is not ready)
    }
  });
}

KF_API kf_status kf_fusion_prepare(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                   DLTensor* const* outputs, size_t num_outputs) {
  return guard([&] {
    const char* fn = "kf_fusion_prepare";
    kf::Scratch<kf::Binding> b;
    kf::prepare(*call_plan(f, inputs, num_inputs, outputs, num_outputs, fn, *b, kf::plan_for), *b);
  });
}

KF_API kf_status kf_execute_segment(kf_segmentation s, size_t index, const DLTensor* const* inputs,
                                    size_t num_inputs, DLTensor* const* outputs,
                                    size_t num_outputs, const kf_exec_options* options) {
  return guard([&] {
    const char* fn = "kf_execute_segment";
    auto* h = kf::capi::segmentation_of(s, fn);
    kf::ExecOptions opts = options_of(options, fn);
    if (num_inputs > 0) require(inputs, fn, "inputs");
    if (num_outputs > 0) require(outputs, fn, "outputs");
    kf::execute_segment(*h->plan, index, inputs, num_inputs, outputs, num_outputs, opts);
  });
}

KF_API kf_status kf_segment_output_shape(kf_segmentation s, size_t index, const DLTensor* const* inputs,
                                         size_t num_inputs, size_t output, int64_t* shape, size_t rank) {
  return guard([&] {
    const char* fn = "kf_segment_output_shape";
    auto* h = kf::capi::segmentation_of(s, fn);
    if (num_inputs > 0) require(inputs, fn, "inputs");
    if (rank > 0) require(shape, fn, "shape");
    kf::segment_output_shape(*h->plan, index, inputs, num_inputs, output, shape, rank);
  });
}

KF_API kf_status kf_execute_versioned(kf_fusion f,
                                      const DLManagedTensorVersioned* const* inputs,
                                      size_t num_inputs, DLManagedTensorVersioned** outputs,
                                      size_t num_outputs, const kf_exec_options* options) {
  return guard([&] {
    const char* fn = "kf_execute_versioned";
    const kf::Fusion* fusion = kf::capi::fusion_of(f, fn);
    if (num_inputs > 0) require(inputs, fn, "inputs");
    // Unpacked for the DLTensor path; a count that disagrees with the
    // definition is reported there, entries beyond it are not read.
    const size_t n = std::min(num_inputs, fusion->inputs.size());
    std::vector<const DLTensor*> tensors(num_inputs, nullptr);
    std::vector<uint64_t> flags(num_inputs, 0);
    for (size_t i = 0; i < n; ++i) {
      const DLManagedTensorVersioned* m = inputs[i];
      if (m == nullptr) continue;  // "input i (value v): tensor pointer is NULL" from binding
      if (m->version.major != KF_DLPACK_MAJOR_VERSION)
        kf::fail(KF_ERR_UNSUPPORTED, fn, ": ", kf::input_name(*fusion, i), ": DLPack version ",
                 m->version.major, ".", m->version.minor, " is not supported (kfuse reads major version ",
                 KF_DLPACK_MAJOR_VERSION, ")");
      tensors[i] = &m->dl_tensor;
      flags[i] = m->flags;
    }
    execute_versioned(f, tensors.data(), flags.data(), num_inputs, outputs, num_outputs, options, fn);
  });
}

KF_API kf_status kf_execute_flagged(kf_fusion f, const DLTensor* const* inputs,
                                    const uint64_t* input_flags, size_t num_inputs,
                                    DLManagedTensorVersioned** outputs, size_t num_outputs,
                                    const kf_exec_options* options) {
  return guard([&] {
    execute_versioned(f, inputs, input_flags, num_inputs, outputs, num_outputs, options,
                      "kf_execute_flagged");
  });
}

KF_API kf_status kf_execute_into_flagged(kf_fusion f, const DLTensor* const* inputs,
                                         const uint64_t* input_flags, size_t num_inputs,
                                         DLTensor* const* outputs, const uint64_t* output_flags,
                                         size_t num_outputs, const kf_exec_options* options) {
  return guard([&] {
    execute_into(f, inputs, input_flags, num_inputs, outputs, output_flags, num_outputs, options,
                 "kf_execute_into_flagged");
  });
}

namespace {

// `what` and `number` name the value in messages ("output 0", "value 3").
void value_shape(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs, int64_t value,
                 int64_t* shape, size_t rank, const char* fn, const char* what, int64_t number) {
  kf::Fusion* fusion = kf::capi::fusion_of(f, fn);
  kf::Scratch<kf::Binding> b;
  kf::bind_inputs(*fusion, inputs, num_inputs, b.get(), false);
  const std::span<const int64_t> sizes = b->sizes[value];
  if (rank != sizes.size())
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": rank is ", rank, ", ", what, " ", number, " has rank ",
             sizes.size());
  if (rank > 0) require(shape, fn, "shape");
  for (size_t d = 0; d < rank; ++d) shape[d] = sizes[d];
}

}  // namespace

KF_API kf_status kf_output_shape(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                 size_t index, int64_t* shape, size_t rank) {
  return guard([&] {
    const char* fn = "kf_output_shape";
    kf::Fusion* fusion = kf::capi::fusion_of(f, fn);
    if (index >= fusion->outputs.size())
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": index ", index, " is out of range (",
               fusion->outputs.size(), " outputs)");
    value_shape(f, inputs, num_inputs, fusion->outputs[index].value, shape, rank, fn, "output",
                static_cast<int64_t>(index));
  });
}

KF_API kf_status kf_value_shape(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                int64_t value, int64_t* shape, size_t rank) {
  return guard([&] {
    const char* fn = "kf_value_shape";
    kf::Fusion* fusion = kf::capi::fusion_of(f, fn);
    if (value < 0 || value >= static_cast<int64_t>(fusion->values.size()))
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": value id ", value, " is out of range [0, ",
               fusion->values.size(), ")");
    value_shape(f, inputs, num_inputs, value, shape, rank, fn, "value", value);
  });
}

}  // extern "C"
