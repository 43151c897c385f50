#include "core/runtime/cuda/step_launch.h"

#include <algorithm>
#include <utility>

namespace kf::cuda {

namespace {

// Grid-stride kernels: enough blocks for the work, at most 32 per
// multiprocessor (each thread then loops).
uint32_t grid_for(int64_t work, int block, int multiprocessors, int max_grid_x) {
  const int64_t want = (work + block - 1) / block;
  const int64_t cap = std::min<int64_t>(int64_t{32} * std::max(multiprocessors, 1), max_grid_x);
  return static_cast<uint32_t>(std::clamp<int64_t>(want, 1, cap));
}

int64_t product(std::span<const int64_t> s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}

}  // namespace

namespace {

// The updates (index positions, or slices) of a scatter call and each one's elements.
std::pair<int64_t, int64_t> scatter_units(const KernelPlan::ScatterKernels& k, const ValueSizes& sizes) {
  const std::span<const int64_t> out = sizes[k.output], index = sizes[k.index];
  const int64_t units = k.slices ? index[k.index_dim] : product(index);
  // A slice's elements: the result's along the other dims for index_reduce
  // (a rank-1 index), the index's for a scatter.
  const int64_t width = !k.slices ? 1 : index.size() == 1 ? product(out) / std::max<int64_t>(out[k.dim], 1)
                                                          : product(index) / std::max<int64_t>(units, 1);
  return {units, width};
}

}  // namespace

bool scatter_takes_sorted(const KernelPlan& plan, const ValueSizes& sizes) {
  const KernelPlan::ScatterKernels& k = plan.scatter;
  if (k.apply.empty()) return false;
  if (k.update.empty()) return true;
  const auto [units, width] = scatter_units(k, sizes);
  return width >= k.sorted_min_width && units <= int64_t{k.sorted_max_run} * sizes[k.output][k.dim];
}

StepLaunch scatter_launch(const KernelPlan& plan, const ValueSizes& sizes, int multiprocessors, int max_grid_x,
                          bool in_place) {
  const KernelPlan::ScatterKernels& k = plan.scatter;
  const int block = plan.launch.block;
  StepLaunch l;
  const std::span<const int64_t> out = sizes[k.output];
  const int64_t n_out = product(out);
  if (n_out == 0) return l;  // nothing to write (and every index is out of range)
  const auto step = [&](const std::string& kernel, int64_t work, int b = 0) {
    const int bl = b > 0 ? b : block;
    l.steps.push_back({&kernel, grid_for(work, bl, multiprocessors, max_grid_x), static_cast<uint32_t>(bl)});
  };
  // The copy of the input into the result: 4 elements per thread and step.
  // In place it would copy every element onto itself (an embedding
  // gradient [50257, 1600] updated at 2048 rows: 168 of 310 us; ncu,
  // docs/perf-log.md session 28); the atomic mean's counts it also zeroes are
  // then zeroed by the memset.
  if (!in_place) step(plan.name, (n_out + 3) / 4);
  const auto [units, width] = scatter_units(k, sizes);
  if (units == 0 || width == 0) return l;  // no updates (an index of extent 0 along another dim)
  if (scatter_takes_sorted(plan, sizes)) {
    int64_t padded = 2048;
    while (padded < units) padded *= 2;
    l.padded = padded;
    l.scratch_bytes = static_cast<uint64_t>(padded) * 16 +
                      static_cast<uint64_t>(padded / KernelPlan::kScatterSortedChunk) * 16 * static_cast<uint64_t>(width);
    step(k.keys, padded);
    const auto blocks = static_cast<uint32_t>(std::min<int64_t>(padded / 2048, max_grid_x));
    l.steps.push_back({&k.sort_block, blocks, 1024, 0, 0});
    for (int64_t kk = 4096; kk <= padded; kk *= 2) {
      for (int64_t j = kk / 2; j >= 2048; j /= 2) {
        step(k.sort_global, padded / 2);
        l.steps.back().sort_k = kk;
        l.steps.back().sort_j = j;
      }
      l.steps.push_back({&k.sort_block, blocks, 1024, kk, 0});
    }
    // Slices: a block per sorted position, no wider than the slice needs
    // (its threads take `lanes` elements each; the kernels stride by
    // blockDim.x); elements: a thread per position.
    const int64_t need = (width + std::max(k.lanes, 1) - 1) / std::max(k.lanes, 1);
    const auto slice_block = static_cast<uint32_t>(std::clamp<int64_t>((need + 31) / 32 * 32, 32, block));
    const auto positions = [&](const std::string& kernel) {
      if (k.slices)  // blocks grid-stride over positions: at most 32 per multiprocessor
        l.steps.push_back({&kernel, grid_for(padded * slice_block, static_cast<int>(slice_block), multiprocessors, max_grid_x), slice_block});
      else
        step(kernel, padded);
    };
    positions(k.apply);
    // The combine: one block (slices) or thread (elements) per chunk boundary.
    const int64_t boundaries = std::max<int64_t>(padded / KernelPlan::kScatterSortedChunk - 1, 1);
    if (k.slices)
      l.steps.push_back({&k.combine, static_cast<uint32_t>(std::min<int64_t>(boundaries, max_grid_x)), slice_block});
    else
      step(k.combine, boundaries);
    return l;
  }
  if (k.counts) l.scratch_bytes = static_cast<uint64_t>(n_out) * 4;
  if (k.counts && in_place) l.zero_bytes = l.scratch_bytes;
  if (!k.clear.empty()) step(k.clear, units * width);
  const int64_t per_thread = std::max(k.update_unroll, 1);
  step(k.update, (units * width + per_thread - 1) / per_thread);
  if (!k.mean.empty()) step(k.mean, n_out);
  return l;
}

StepLaunch scan_launch(const KernelPlan& plan, const ValueSizes& sizes, int multiprocessors, int max_grid_x) {
  StepLaunch l;
  const LaunchRule& rule = plan.launch;
  const std::span<const int64_t> domain = sizes[rule.domain_value];
  int64_t lines = 1, length = 1;
  for (size_t d = 0; d < domain.size(); ++d) (rule.reduced_dims[d] ? length : lines) *= domain[d];
  if (lines == 0 || length == 0) return l;
  if (rule.scan_pass_rows > 0) {
    const int64_t V = std::max(rule.items_per_thread, 1), L = rule.scan_pass_rows, W = std::max(rule.block / 32, 1);
    int64_t wr = 1;
    while (wr < W && wr * L < length) wr *= 2;
    const int64_t segments = (length + wr * L - 1) / (wr * L);
    const int64_t units = (lines + 32 * V - 1) / (32 * V), tiles = (units + W / wr - 1) / (W / wr);
    l.padded = segments;
    // The ticket counter, then each segment's aggregates and inclusive
    // prefixes per line: 64-bit words for each 32 bits of accumulator,
    // all zero before the kernel (a word's high half flags it written).
    const int64_t words = std::max(rule.scan_acc_bytes, 4) / 4;
    l.scratch_bytes = static_cast<uint64_t>(8 + 2 * segments * units * 32 * V * words * 8);
    l.zero_bytes = l.scratch_bytes;
    const int64_t cap = std::min<int64_t>(int64_t{32} * std::max(multiprocessors, 1), max_grid_x);
    l.steps.push_back({&plan.name, static_cast<uint32_t>(std::clamp<int64_t>(segments * tiles, 1, cap)),
                       static_cast<uint32_t>(rule.block), wr, 0});
    return l;
  }
  // About 2048 threads per multiprocessor, segments of at least 32 elements.
  const int64_t target = int64_t{2048} * std::max(multiprocessors, 1);
  const int64_t segments = std::clamp<int64_t>((target + lines - 1) / lines, 1, std::max<int64_t>(length / 32, 1));
  l.padded = segments;
  const std::string* partials = nullptr;
  const std::string* carry = nullptr;
  for (const KernelPlan::LaterKernel& k : plan.later) {
    if (k.name.ends_with("_s_partials")) partials = &k.name;
    if (k.name.ends_with("_s_carry")) carry = &k.name;
  }
  const auto step = [&](const std::string* kernel, int64_t work) {
    l.steps.push_back({kernel, grid_for(work, rule.block, multiprocessors, max_grid_x), static_cast<uint32_t>(rule.block)});
  };
  if (segments > 1) {
    l.scratch_bytes = static_cast<uint64_t>(segments * lines) * 8;
    step(partials, lines * segments);
    step(carry, lines);
  }
  step(&plan.name, lines * segments);
  return l;
}

}  // namespace kf::cuda
