// kernel_source: wraps the emitted bodies into one CUDA translation unit
// (the argument struct, __launch_bounds__, names from a hash of the text)
// and derives the launch rule from the schedule.
#include <algorithm>
#include <cstdio>
#include <string_view>

#include "core/codegen/emitters.h"
#include "core/codegen/kernel_plan.h"
#include "core/codegen/prelude_parts.h"
#include "core/codegen/reduction_scratch.h"
#include "core/util/deep_stack.h"
#include "core/util/error.h"

namespace kf {

namespace {

std::string hex64(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// "struct KfArgs { long long a[N]; [extra words] };"
std::string args_struct(size_t slots, const char* extra) {
  return "struct KfArgs { long long a[" + std::to_string(std::max<size_t>(slots, 1)) + "];" + extra + " };\n";
}

// One kernel: its signature up to the name, and the rest.
struct KernelText {
  std::string head, tail;
};
// min_blocks > 0: __launch_bounds__(block, min_blocks) (one_block_per_sm: 1).
KernelText kernel_text(int block, bool one_block_per_sm, const std::string& body, int max_registers = 0, int min_blocks = 0) {
  if (one_block_per_sm) min_blocks = 1;
  const std::string bounds = max_registers > 0 ? "KF_MAXNREG(" + std::to_string(block) + ", " + std::to_string(max_registers) + ")"
                                               : "__launch_bounds__(" + std::to_string(block) + (min_blocks > 0 ? ", " + std::to_string(min_blocks) : "") + ")";
  return {"extern \"C\" __global__ void " + bounds + " ", "(const KfArgs args) {\n" + body + "}\n"};
}

// Elements a staged row may take beyond its length for the 16-byte
// alignment of the next row (LaunchRule::row_stage_pad).
constexpr int kStageRowAlign = 16;

// A kernel's scalar twin (KernelPlan::scalar_twins): its suffix + this.
constexpr std::string_view kScalarSuffix = "_scalar";

// Names every kernel of `kernels` kf_<hash of the whole text><suffix>, so
// equal sources get equal names (the kernel cache keys on the source).
// Suffixes: "" (the main kernel), "_finish", "_long", "_tight", "_wide",
// "_edges", "_long_edges", "_cluster", "_short" and "_rows" set plan.name, finish_name, long_row_name,
// tight_name, wide_name, edges_name, long_edges_name, cluster_name, short_name (columns) and
// short_rows_name ("_rows"); "<suffix>_scalar" is the scalar twin of the kernel with <suffix>.
void assemble(KernelPlan& plan, const std::string& args, const std::vector<KernelText>& kernels,
              const std::vector<std::string>& suffixes) {
  std::string unnamed = args;
  for (const KernelText& k : kernels) unnamed += k.head + k.tail;
  const std::string name = "kf_" + hex64(fnv1a(unnamed));
  std::string text = args;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string kernel = kernels[i].head + name + suffixes[i] + kernels[i].tail;
    text += kernel;
    // Each unit carries only the prelude it uses (prelude_parts.h).
    plan.units.push_back({name + suffixes[i], prelude_for(args + kernel) + args + kernel});
    const std::string& sfx = suffixes[i];
    if (sfx.ends_with(kScalarSuffix)) {  // the scalar twin of the kernel before it
      plan.scalar_twins.push_back({name + sfx.substr(0, sfx.size() - kScalarSuffix.size()), name + sfx});
      continue;
    }
    if (sfx != "_finish" && (sfx.starts_with("_p") || sfx.starts_with("_f") || sfx.starts_with("_s_") || sfx == "_epilogue"))  // later column and scatter kernels
      plan.later.push_back({name + sfx, sfx == "_epilogue"    ? KernelPlan::LaterKernel::Grid::Epilogue
                                        : sfx.starts_with("_f") ? KernelPlan::LaterKernel::Grid::Finish
                                                                : KernelPlan::LaterKernel::Grid::Partials});
    else
      (sfx == "_finish" ? plan.finish_name
       : sfx == "_long" ? plan.long_row_name
       : sfx == "_tight" ? plan.tight_name
       : sfx == "_wide"  ? plan.wide_name
       : sfx == "_edges" ? plan.edges_name
       : sfx == "_long_edges" ? plan.long_edges_name
       : sfx == "_cluster" ? plan.cluster_name
       : sfx == "_short" ? plan.short_name
       : sfx == "_rows" ? plan.short_rows_name
       : sfx == "_ungrouped" ? plan.ungrouped_name
                         : plan.name) = name + sfx;
  }
  plan.source = prelude_for(text) + text;
  // Each check once (kernels of a plan read the same tensors).
  for (std::vector<ArgCheck>* checks : {&plan.vector_checks, &plan.edge_checks}) {
    std::vector<ArgCheck> unique;
    for (const ArgCheck& c : *checks)
      if (std::find(unique.begin(), unique.end(), c) == unique.end()) unique.push_back(c);
    *checks = std::move(unique);
  }
}

// The split-row kernels of a row schedule (emit_split_row.cpp): per phase
// the partials and the column finish, then the epilogue of a
// normalization.
KernelPlan split_row_plan(const ConcreteFusion& c, const Task& task, const RowParams& row, SchedulerKind scheduler) {
  const int block = row.kernels.split_block;
  KernelWriter w(c, task);
  KernelPlan plan;
  plan.scheduler = scheduler;
  LaunchRule& launch = plan.launch;
  launch.kind = LaunchRule::Kind::SplitRows;
  launch.grid = row.grid;
  launch.domain_value = row.rows.domain;
  launch.reduced_dims = row.rows.reduced;
  launch.block = block;
  launch.items_per_thread = row.vectors.width;
  const ColumnParams finish = split_row_finish(row);
  launch.finish_block = finish.finish_block;
  launch.finish_cols = finish.col_threads;
  launch.accumulators = column_partial_words(w.fusion(), row.rows);
  const size_t phases = row.rows.phases.size();
  if (phases > 1 || row.rows.normalizes) launch.result_words = column_result_words(w.fusion(), row.rows);
  launch.extra_args = 2;
  std::vector<KernelText> kernels;
  std::vector<std::string> suffixes;
  for (size_t ph = 0; ph < phases; ++ph) {
    emit_split_row(w, row, ph);
    kernels.push_back(kernel_text(block, false, w.take_kernel()));
    emit_column_finish(w, finish, ph);
    kernels.push_back(kernel_text(finish.finish_block, false, w.take_kernel()));
    suffixes.push_back(ph == 0 ? "" : "_p" + std::to_string(ph));
    suffixes.push_back(ph == 0 ? "_finish" : "_f" + std::to_string(ph));
  }
  if (row.rows.normalizes) {
    emit_split_row(w, row, phases);
    kernels.push_back(kernel_text(block, false, w.take_kernel()));
    suffixes.push_back("_epilogue");
  }
  plan.args = w.args();
  assemble(plan, args_struct(plan.args.size(), " long long scratch, splits;"), kernels, suffixes);
  return plan;
}

KernelPlan emit_kernel_here(const ConcreteFusion& c, const Task& task, const KernelSchedule& schedule);

}  // namespace

// KernelWriter's value-at-index evaluation recurses once per op of a
// chain: a deep fusion is emitted on a stack sized for the deepest one
// the builder accepts (core/util/deep_stack.h).
KernelPlan emit_kernel(const ConcreteFusion& c, const Task& task, const KernelSchedule& schedule) {
  return on_deep_stack(c.fusion->depth, [&] { return emit_kernel_here(c, task, schedule); });
}

namespace {

KernelPlan emit_kernel_here(const ConcreteFusion& c, const Task& task, const KernelSchedule& schedule) {
  KernelWriter w(c, task);
  KernelPlan plan;
  plan.scheduler = kind_of(schedule);
  LaunchRule& launch = plan.launch;
  if (const auto* col = std::get_if<ColumnParams>(&schedule)) {
    launch.kind = LaunchRule::Kind::ColumnReduce;
    launch.grid = col->grid;
    launch.domain_value = col->rows.domain;
    launch.reduced_dims = col->rows.reduced;
    launch.block = col->block;
    launch.finish_block = col->finish_block;
    launch.finish_cols = col->col_threads;
    launch.tile_cols = col->tile_cols();
    launch.accumulators = column_partial_words(w.fusion(), col->rows);
    const size_t phases = col->rows.phases.size();
    const bool epilogue = column_epilogue(*col);
    if (phases > 1 || epilogue) launch.result_words = column_result_words(w.fusion(), col->rows);
    launch.extra_args = 2;
    std::vector<KernelText> kernels;
    std::vector<std::string> suffixes;
    // A kernel with a vector path is written twice: the vector path alone
    // (its conditions checked by the host) and the scalar path alone, a
    // twin compiled only for calls that need it.
    const bool twins = col->vectors.width > 0;
    const auto partials = [&](size_t ph, const std::string& suffix) {
      w.paths = twins ? KernelWriter::Paths::Vector : KernelWriter::Paths::Both;
      emit_column_partials(w, *col, ph, &plan.vector_checks);
      kernels.push_back(kernel_text(col->block, false, w.take_kernel(), 0, ph == phases && twins ? col->epilogue_blocks : 0));
      suffixes.push_back(suffix);
      if (twins) {
        w.paths = KernelWriter::Paths::Scalar;
        emit_column_partials(w, *col, ph);
        kernels.push_back(kernel_text(col->block, false, w.take_kernel()));
        suffixes.push_back(suffix + std::string(kScalarSuffix));
      }
      w.paths = KernelWriter::Paths::Both;
    };
    for (size_t ph = 0; ph < phases; ++ph) {
      partials(ph, ph == 0 ? "" : "_p" + std::to_string(ph));
      emit_column_finish(w, *col, ph);
      kernels.push_back(kernel_text(col->finish_block, false, w.take_kernel()));
      suffixes.push_back(ph == 0 ? "_finish" : "_f" + std::to_string(ph));
    }
    if (epilogue) partials(phases, "_epilogue");
    // Short columns in one kernel, with its own scalar twin (the same
    // vector checks: one vector plan).
    if (col->short_rows > 0) {
      launch.short_rows = col->short_rows;
      launch.short_tile_cols = col->short_twin().tile_cols();
      w.paths = twins ? KernelWriter::Paths::Vector : KernelWriter::Paths::Both;
      emit_column_short(w, *col, &plan.vector_checks);
      kernels.push_back(kernel_text(col->block, false, w.take_kernel()));
      suffixes.push_back("_short");
      if (twins) {
        w.paths = KernelWriter::Paths::Scalar;
        emit_column_short(w, *col);
        kernels.push_back(kernel_text(col->block, false, w.take_kernel()));
        suffixes.push_back("_short" + std::string(kScalarSuffix));
      }
      w.paths = KernelWriter::Paths::Both;
    }
    plan.args = w.args();
    assemble(plan, args_struct(plan.args.size(), " long long scratch, splits;"), kernels, suffixes);
    return plan;
  }
  if (const auto* sc = std::get_if<ScatterParams>(&schedule)) {
    launch.kind = LaunchRule::Kind::Scatter;
    const Expr& e = w.fusion().exprs[static_cast<size_t>(sc->expr)];
    launch.domain_value = e.outputs[0];
    launch.block = sc->block;
    launch.extra_args = 4;
    KernelPlan::ScatterKernels& k = plan.scatter;
    k.index = e.inputs[1];
    k.output = e.outputs[0];
    k.self = e.inputs[0];
    k.dim = ScatterAttrs(e).index();
    k.slices = sc->slices;
    k.index_dim = static_cast<size_t>(sc->index_dim);
    k.sorted_min_width = sc->sorted_min_width;
    k.sorted_max_run = sc->sorted_max_run;
    k.lanes = sc->lanes;
    k.update_unroll = sc->update_unroll;
    k.counts = !sc->sorted && sc->reduce == ScatterReduce::Mean;
    std::vector<KernelText> kernels;
    std::vector<std::string> suffixes;
    const auto add = [&](void (*emit)(KernelWriter&, const ScatterParams&), const char* suffix, int block) {
      emit(w, *sc);
      kernels.push_back(kernel_text(block, false, w.take_kernel()));
      suffixes.push_back(suffix);
    };
    add(emit_scatter_copy, "", sc->block);
    if (sc->sorted) {
      add(emit_scatter_keys, "_s_keys", sc->block);
      add(emit_scatter_sort_block, "_s_sort_block", 1024);
      add(emit_scatter_sort_global, "_s_sort_global", sc->block);
      add(emit_scatter_apply, "_s_apply", sc->block);
      add(emit_scatter_combine, "_s_combine", sc->block);
    }
    if (!sc->sorted || sc->sorted_min_width > 0) {  // (sorted for speed: narrower slices take the atomics)
      if (!sc->include_self && sc->reduce != ScatterReduce::None) add(emit_scatter_clear, "_s_clear", sc->block);
      add(emit_scatter_update, "_s_update", sc->block);
      if (sc->reduce == ScatterReduce::Mean) add(emit_scatter_mean, "_s_mean", sc->block);
    }
    plan.args = w.args();
    assemble(plan, args_struct(plan.args.size(), " long long scratch, padded, sort_k, sort_j;") + std::string(scatter_helpers()),
             kernels, suffixes);
    for (const KernelPlan::LaterKernel& l : plan.later) {
      const std::string role = l.name.substr(l.name.find("_s_") + 3);
      (role == "clear" ? k.clear : role == "update" ? k.update : role == "mean" ? k.mean : role == "keys" ? k.keys
       : role == "sort_block" ? k.sort_block : role == "sort_global" ? k.sort_global : role == "apply" ? k.apply
                                                                                          : k.combine) = l.name;
    }
    return plan;
  }
  if (const auto* sc = std::get_if<ScanParams>(&schedule)) {
    const Expr& e = w.fusion().exprs[static_cast<size_t>(sc->expr)];
    launch.kind = LaunchRule::Kind::Scan;
    launch.domain_value = e.outputs[0];
    launch.reduced_dims.assign(w.rank(e.outputs[0]), false);
    launch.reduced_dims[ScanAttrs(e).index()] = true;
    launch.block = sc->block;
    launch.scan_block_per_line = sc->block_per_line;
    if (sc->block_per_line) {
      emit_scan(w, *sc);
      plan.args = w.args();
      assemble(plan, args_struct(plan.args.size(), "") + scan_helpers(w, *sc),
               {kernel_text(launch.block, false, w.preamble() + w.body())}, {""});
      return plan;
    }
    if (sc->pass_rows > 0) {  // one kernel, segments chained by a look-back
      launch.extra_args = 3;
      launch.items_per_thread = std::max(sc->vectors.width, 1);
      launch.scan_pass_rows = sc->pass_rows;
      const DType out_t = w.fusion().value(e.outputs[0]).dtype;
      launch.scan_acc_bytes = is_float(out_t) && out_t != DType::F64 ? 4 : 8;
      emit_scan(w, *sc);
      plan.args = w.args();
      assemble(plan, args_struct(plan.args.size(), " long long scratch, segments, row_warps;") + scan_helpers(w, *sc),
               {kernel_text(launch.block, false, w.preamble() + w.body(), 0, std::max(512 / launch.block, 1))}, {""});
      return plan;
    }
    // A thread per line, in segments: partials, carry, then the scan.
    launch.extra_args = 2;
    std::vector<KernelText> kernels;
    emit_scan(w, *sc);
    kernels.push_back(kernel_text(launch.block, false, w.take_kernel()));
    emit_scan_partials(w, *sc);
    kernels.push_back(kernel_text(launch.block, false, w.take_kernel()));
    emit_scan_carry(w, *sc);
    kernels.push_back(kernel_text(launch.block, false, w.take_kernel()));
    plan.args = w.args();
    assemble(plan, args_struct(plan.args.size(), " long long scratch, segments;") + scan_helpers(w, *sc), kernels,
             {"", "_s_partials", "_s_carry"});
    return plan;
  }
  if (const auto* pw = std::get_if<PointwiseParams>(&schedule)) {
    launch.kind = LaunchRule::Kind::Elementwise;
    launch.domain_value = pw->loops[0].outputs[0];
    if (pw->loops.size() > 1)
      for (const PointwiseLoop& l : pw->loops) launch.loop_domains.push_back(l.outputs[0]);
    launch.block = pw->block;
    // Positions per thread and step: a loop without vectors takes
    // scalar_unroll of them (its grid would otherwise leave all but one in
    // scalar_unroll blocks without a position).
    int width = 1;
    for (const PointwiseLoop& l : pw->loops)
      width = std::max(width, l.vectors.width > 0 ? l.vectors.width * pw->unroll
                              : l.elements.width > 0 ? pw->scalar_unroll : 1);
    launch.items_per_thread = width;
    launch.grid = pw->grid;
    for (const PointwiseLoop& l : pw->loops) {
      if (l.window <= 0) continue;
      LaunchRule::Window win;
      win.domain_value = l.outputs[0];
      for (size_t k = l.order.size() - static_cast<size_t>(l.window); k < l.order.size(); ++k)
        win.dims.push_back(static_cast<int>(l.order[k]));
      // (window_loop's steps: U vectors of V on the vector path, scalar_unroll positions on the scalar one)
      const int scalar = std::max(pw->scalar_unroll, 1);
      win.span = int64_t{pw->block} * (l.vectors.width > 0 ? std::min(l.vectors.width * l.unroll, scalar) : scalar);
      launch.windows.push_back(std::move(win));
      for (const Output& o : w.fusion().outputs)
        if (o.alias_input >= 0 && std::find(l.outputs.begin(), l.outputs.end(), o.value) != l.outputs.end()) {
          const int64_t in = w.fusion().inputs[static_cast<size_t>(o.alias_input)];
          if (std::find(task.inputs.begin(), task.inputs.end(), in) != task.inputs.end()) launch.window_inputs.push_back(in);
        }
    }
    // The vector loops and their scalar fallbacks as twin kernels (the
    // fallbacks were 30-45% of such a kernel's compile time: rope).
    if (std::any_of(pw->loops.begin(), pw->loops.end(), [](const PointwiseLoop& l) { return l.vectors.width > 0; })) {
      w.paths = KernelWriter::Paths::Vector;
      emit_pointwise(w, task, *pw, &plan.vector_checks);
      const std::string vector = w.take_kernel();
      w.paths = KernelWriter::Paths::Scalar;
      emit_pointwise(w, task, *pw);
      w.paths = KernelWriter::Paths::Both;
      plan.args = w.args();
      assemble(plan, args_struct(plan.args.size(), ""),
               {kernel_text(launch.block, false, vector, 0, pw->min_blocks), kernel_text(launch.block, false, w.take_kernel())},
               {"", std::string(kScalarSuffix)});
      return plan;
    }
    emit_pointwise(w, task, *pw);
  } else if (const auto* t = std::get_if<TiledParams>(&schedule)) {
    emit_tiled(w, *t);
    launch.kind = LaunchRule::Kind::Elementwise;
    launch.domain_value = t->outputs[0];
    launch.block = t->block;
    launch.items_per_thread = t->tile * t->tile / t->block;  // one tile per block
    if (!t->group_a.empty() || !t->group_b.empty()) {
      // Whether a group's inner dim is a batch of a few or a feature dim of
      // thousands is known only at run time: where each fills tiles alone,
      // the unravelling only costs (registers, instructions), so the same
      // tiles over single dims are the twin taken then (takes_ungrouped_tiles).
      const std::string grouped = w.take_kernel();
      TiledParams single = *t;
      single.group_a.clear();
      single.group_b.clear();
      single.walk_b_with_a = false;  // (B is one dim)
      emit_tiled(w, single);
      if (!t->group_a.empty()) launch.tile_group_dims.push_back(static_cast<int>(t->dim_a));
      if (!t->group_b.empty()) launch.tile_group_dims.push_back(static_cast<int>(t->dim_b));
      launch.tile = t->tile;
      plan.args = w.args();
      assemble(plan, args_struct(plan.args.size(), ""),
               {kernel_text(launch.block, false, grouped), kernel_text(launch.block, false, w.take_kernel())},
               {"", "_ungrouped"});
      return plan;
    }
  } else {
    // The main kernel, then those of RowKernels (the schedule's choice).
    const RowParams& row = std::get<RowParams>(schedule);
    const RowKernels& planned = row.kernels;
    const bool twins = planned.scalar_twin;
    if (twins) w.paths = KernelWriter::Paths::Vector;
    emit_row(w, task, row, RowKernel::Main, &plan.vector_checks);
    w.paths = KernelWriter::Paths::Both;
    launch.kind = LaunchRule::Kind::PerRow;
    launch.grid = row.grid;
    launch.domain_value = row.rows.domain;
    launch.reduced_dims = row.rows.reduced;
    launch.block = row.block;
    // (the across kernel holds no row in registers: its block is fixed)
    launch.row_items = row.across.empty() ? row.vectors.width * row.vectors_per_thread : 0;
    launch.row_stage_bytes = row_stage_bytes(w.fusion(), row);
    // Each staged row is rounded up to 16 bytes (declare_stage): at most 15
    // bytes more per staged input, each at least a byte per element.
    launch.row_stage_pad = kStageRowAlign;
    launch.stream_rows = row.stream_rows;
    launch.across_rows = row.across_rows;
    const std::string main = w.take_kernel();
    std::vector<KernelText> kernels = {kernel_text(launch.block, launch.row_items > 0, main)};
    std::vector<std::string> suffixes = {""};
    if (twins) {
      w.paths = KernelWriter::Paths::Scalar;
      emit_row(w, task, row, RowKernel::Main);
      w.paths = KernelWriter::Paths::Both;
      kernels.push_back(kernel_text(launch.block, launch.row_items > 0, w.take_kernel()));
      suffixes.push_back(std::string(kScalarSuffix));
    }
    if (planned.tight_registers > 0) {  // the register path under a register budget
      kernels.push_back(kernel_text(launch.block, true, main, planned.tight_registers));
      suffixes.push_back("_tight");
      launch.tight_registers = planned.tight_registers;
    }
    if (planned.wide_vectors_per_thread > 0) {  // the register path with more vectors per thread
      RowParams wide = row;
      wide.vectors_per_thread = planned.wide_vectors_per_thread;
      w.paths = KernelWriter::Paths::Vector;
      emit_row(w, task, wide, RowKernel::Main);
      w.paths = KernelWriter::Paths::Both;
      kernels.push_back(kernel_text(launch.block, true, w.take_kernel()));
      suffixes.push_back("_wide");
      launch.wide_row_items = wide.vectors.width * wide.vectors_per_thread;
    }
    if (planned.long_rows) {  // rows longer than the main kernel's registers hold
      emit_row(w, task, row, RowKernel::LongRows);
      kernels.push_back(kernel_text(launch.block, false, w.take_kernel()));
      suffixes.push_back("_long");
    }
    // Rows shared by the blocks of a cluster (sm_90): compiled only for
    // the calls that take it (cluster_blocks).
    if (planned.cluster) {
      emit_row(w, task, row, RowKernel::Cluster);
      kernels.push_back(kernel_text(launch.block, false, w.take_kernel()));
      suffixes.push_back("_cluster");
      launch.cluster_max = row.cluster_max;
      launch.cluster_block = row.cluster_block;
      launch.cluster_stageable = row.cluster_stageable;
    }
    // Rows of any length and start (an odd width), which fail the vector
    // checks of the kernels above: held in registers, or as long rows.
    if (planned.long_edges) {
      if (planned.edges) {
        w.paths = KernelWriter::Paths::Vector;
        emit_row(w, task, row, RowKernel::Edges, &plan.edge_checks);
        w.paths = KernelWriter::Paths::Both;
        kernels.push_back(kernel_text(launch.block, true, w.take_kernel()));
        suffixes.push_back("_edges");
      }
      emit_row(w, task, row, RowKernel::LongEdges, &plan.edge_checks);
      kernels.push_back(kernel_text(launch.block, false, w.take_kernel()));
      suffixes.push_back("_long_edges");
      plan.edge_row_pad = kStageRowAlign + 2 * row.edge_vectors.width - 2;
      // (inner-outer: partial rows of up to row + 2V - 1 words, each
      // rounded up to 16 bytes)
      plan.edge_partial_bytes = row_partial_bytes(w.fusion(), row);
    }
    // The register path with several rows per block, for rows that leave
    // the main kernel a block of one warp, most of it idle (takes_short_rows).
    if (planned.short_rows_block > 0) {
      std::vector<ArgCheck> checks;
      w.paths = KernelWriter::Paths::Vector;
      emit_row(w, task, row, RowKernel::ShortRows, &checks);
      w.paths = KernelWriter::Paths::Both;
      for (const ArgCheck& c : checks)
        if (std::find(plan.vector_checks.begin(), plan.vector_checks.end(), c) == plan.vector_checks.end())
          fail(KF_ERR_INTERNAL, "the short-row kernel checks a vector the main kernel does not");
      kernels.push_back(kernel_text(planned.short_rows_block, false, w.take_kernel(), 0, planned.short_rows_min_blocks));
      suffixes.push_back("_rows");
      // Its scalar twin, for short rows that fail the vector checks (an odd
      // width or start): otherwise they took the long-row kernel, a block
      // per row (seed 1853590537 c0146, cross-entropy over 21 classes
      // innermost: a 256-thread block per row, 1.69 ms, 0.10x torch.compile).
      w.paths = KernelWriter::Paths::Scalar;
      emit_row(w, task, row, RowKernel::ShortRows);
      w.paths = KernelWriter::Paths::Both;
      kernels.push_back(kernel_text(planned.short_rows_block, false, w.take_kernel(), 0, planned.short_rows_min_blocks));
      suffixes.push_back("_rows" + std::string(kScalarSuffix));
      launch.short_row_block = planned.short_rows_block;
    }
    if (planned.split_block > 0) plan.split_rows.push_back(split_row_plan(c, task, row, plan.scheduler));
    if (row.has_outer()) {  // inner-outer: the partials' finishing kernel
      launch.outer_accumulators = static_cast<int>(row.outer.phases[0].size());
      launch.threads_per_sm = row.outer_threads_per_sm;
      launch.finish_block = row.finish_block;
      launch.finish_cols = ColumnParams{}.col_threads;
      launch.extra_args = 2;
      ColumnParams finish;
      finish.rows = row.outer;
      finish.finish_block = row.finish_block;
      emit_column_finish(w, finish);
      kernels.push_back(kernel_text(row.finish_block, false, w.take_kernel()));
      suffixes.push_back("_finish");
    }
    plan.args = w.args();
    assemble(plan, args_struct(plan.args.size(), row.has_outer() ? " long long scratch, splits;" : ""), kernels, suffixes);
    return plan;
  }
  plan.args = w.args();
  assemble(plan, args_struct(plan.args.size(), ""),
           {kernel_text(launch.block, launch.row_items > 0, w.preamble() + w.body())}, {""});
  return plan;
}

}  // namespace

const std::string& KernelPlan::scalar_of(const std::string& kernel) const {
  for (const ScalarTwin& t : scalar_twins)
    if (t.kernel == kernel) return t.scalar;
  return kernel;
}

bool holds(const ArgCheck& check, const int64_t* args) {
  switch (check.kind) {
    case ArgCheck::Kind::Multiple: {
      int64_t sum = check.offset;
      for (int w : check.words) sum += args[w];
      return check.modulus > 0 && sum % check.modulus == 0;
    }
    case ArgCheck::Kind::SliceMultiple: {  // kf_slice_start (prelude.cpp)
      const int64_t extent = args[check.words.at(0)];
      int64_t start = check.offset;
      if (start < 0) start = start < -extent ? 0 : start + extent;
      start = std::min(start, extent);
      return check.modulus > 0 && start % check.modulus == 0;
    }
    case ArgCheck::Kind::Equal:
      return args[check.words.at(0)] == (check.words.size() > 1 ? args[check.words[1]] : check.offset);
    case ArgCheck::Kind::Congruent:
      return check.modulus > 0 && (args[check.words.at(0)] - args[check.words.at(1)]) % check.modulus == 0;
  }
  return false;
}

size_t KernelPlan::unit_of(const std::string& kernel) const {
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].kernel == kernel) return u;
  fail(KF_ERR_INTERNAL, "kernel ", kernel, " is in no compile unit of its plan");
}

KernelPlan emit_segment_kernel(const ConcreteFusion& c, const Segment& segment) {
  if (!segment.schedule) fail(KF_ERR_UNSUPPORTED, "no scheduler takes this segment: ", segment.unscheduled_why);
  return emit_kernel(c, segment.task, *segment.schedule);
}

}  // namespace kf
