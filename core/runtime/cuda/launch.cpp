#include "core/runtime/cuda/launch.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/util/error.h"
#include "core/util/dl_layout.h"

namespace kf::cuda {

namespace {

int64_t double_bits(double d) {
  int64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

// A scalar argument: float scalars as the bits of a double, others as int64.
int64_t encode_scalar(DType dtype, double f64, int64_t i64) {
  return is_float(dtype) ? double_bits(f64) : i64;
}

// The value of a 0-dim CPU scalar tensor, exactly (int64 does not go through double).
int64_t read_scalar_slot(const DLTensor& t, DType dtype) {
  const auto* p = reinterpret_cast<const std::byte*>(dl_address(t));
  switch (dtype) {
    case DType::I64: { int64_t x; std::memcpy(&x, p, 8); return x; }
    case DType::I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::I8: return *reinterpret_cast<const int8_t*>(p);
    case DType::U8: return *reinterpret_cast<const uint8_t*>(p);
    case DType::Bool: { uint8_t x; std::memcpy(&x, p, 1); return x != 0; }
    case DType::F64: { double x; std::memcpy(&x, p, 8); return double_bits(x); }
    case DType::F32: { float x; std::memcpy(&x, p, 4); return double_bits(x); }
    case DType::F16: { uint16_t x; std::memcpy(&x, p, 2); return double_bits(half_to_float(x)); }
    case DType::BF16: { uint16_t x; std::memcpy(&x, p, 2); return double_bits(bf16_to_float(x)); }
    case DType::F8E4M3: return double_bits(e4m3fn_to_float(*reinterpret_cast<const uint8_t*>(p)));
    case DType::F8E5M2: return double_bits(e5m2_to_float(*reinterpret_cast<const uint8_t*>(p)));
  }
  return 0;
}

bool device_accessible(const DLTensor& t) {
  return t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged ||
         t.device.device_type == kDLCUDAHost;
}

}  // namespace

std::vector<SlotSource> resolve_slots(const Fusion& f, const Task& task, const std::vector<ArgSlot>& slots) {
  std::vector<SlotSource> out;
  for (const ArgSlot& slot : slots) {
    SlotSource src;
    int64_t id = slot.value;
    if (slot.kind == ArgSlot::Kind::Extent || slot.kind == ArgSlot::Kind::Divisor) {
      if (id < 0) {  // an input extent: -1 - (first_extent_index[i] + dim)
        int64_t e = -1 - id;
        for (size_t i = 0; i < f.inputs.size(); ++i) {
          int64_t first = f.first_extent_index[i];
          if (first >= 0 && e >= first && e < first + f.value(f.inputs[i]).rank) {
            src.value = f.inputs[i];
            break;
          }
        }
      } else {
        src.value = id;
      }
      src.from = SlotSource::From::Sizes;
      out.push_back(src);
      continue;
    }
    const Value& v = f.value(id);
    if (slot.kind == ArgSlot::Kind::Scalar && v.kind == ValueKind::Constant) {
      src.from = SlotSource::From::Constant;
      src.constant = encode_scalar(v.dtype, v.f64, v.i64);
      out.push_back(src);
      continue;
    }
    auto in = std::find(task.inputs.begin(), task.inputs.end(), id);
    auto outp = std::find(task.outputs.begin(), task.outputs.end(), id);
    if (in != task.inputs.end()) {
      src.from = SlotSource::From::Input;
      src.index = static_cast<size_t>(in - task.inputs.begin());
    } else if (outp != task.outputs.end() && slot.kind != ArgSlot::Kind::Scalar) {
      src.from = SlotSource::From::Output;
      src.index = static_cast<size_t>(outp - task.outputs.begin());
    } else {
      fail(KF_ERR_INTERNAL, "kernel argument slot ", out.size(), " names value ", id,
           ", which is not an input or output of its segment");
    }
    src.value = id;
    out.push_back(src);
  }
  return out;
}

void fill_arguments(const Fusion& f, const std::vector<ArgSlot>& slots,
                    const std::vector<SlotSource>& sources, const ValueSizes& sizes,
                    const DLTensor* const* inputs, DLTensor* const* outputs, int64_t* args) {
  for (size_t k = 0; k < slots.size(); ++k) {
    const ArgSlot& slot = slots[k];
    const SlotSource& src = sources[k];
    const DLTensor* t = src.from == SlotSource::From::Input    ? inputs[src.index]
                        : src.from == SlotSource::From::Output ? outputs[src.index]
                                                               : nullptr;
    switch (slot.kind) {
      case ArgSlot::Kind::Data:
        if (!device_accessible(*t))
          fail(KF_ERR_DEVICE_MISMATCH, "value ", slot.value,
               ": a GPU kernel reads it, but it is in host memory (only 0-dim scalar inputs may be)");
        args[k] = static_cast<int64_t>(dl_address(*t));
        break;
      case ArgSlot::Kind::Stride:
        args[k] = dl_stride(*t, slot.dim);
        break;
      case ArgSlot::Kind::Extent:
        args[k] = sizes[src.value][static_cast<size_t>(slot.dim)];
        break;
      case ArgSlot::Kind::Divisor:
        args[k] = static_cast<int64_t>(fastdiv_word(sizes[src.value][static_cast<size_t>(slot.dim)]));
        break;
      case ArgSlot::Kind::Scalar:
        args[k] = src.from == SlotSource::From::Constant
                      ? src.constant
                      : read_scalar_slot(*t, f.value(slot.value).dtype);
        break;
    }
  }
}

namespace {

// Threads per multiprocessor and its register file (every GPU kfuse
// targets, sm_80 to sm_100, has these).
constexpr int64_t kThreadsPerSm = 2048, kRegistersPerSm = 65536;

// Blocks of `block` threads resident on one multiprocessor, by threads,
// registers (allocated in units of 8 per thread) and shared memory.
int64_t resident_blocks(int64_t block, int registers, int64_t shared, int64_t max_shared) {
  int64_t n = kThreadsPerSm / block;
  if (registers > 0) n = std::min(n, kRegistersPerSm / ((registers + 7) / 8 * 8 * block));
  if (shared > 0) n = std::min(n, max_shared / shared);
  return n;
}

// PerRow with row_items > 0: the block that holds a row of `row` elements
// in registers (the plan's block when the row needs more).
int64_t register_row_block(const LaunchRule& rule, int64_t row) {
  const int64_t threads = (row + rule.row_items - 1) / rule.row_items;
  return std::clamp<int64_t>((threads + 31) / 32 * 32, 32, rule.block);
}

}  // namespace

std::span<const int64_t> launch_domain(const LaunchRule& rule, const ValueSizes& sizes) {
  std::span<const int64_t> best = sizes[rule.domain_value];
  if (rule.kind != LaunchRule::Kind::Elementwise) return best;
  const auto elements = [](std::span<const int64_t> d) {
    int64_t n = 1;
    for (int64_t s : d) n *= s;
    return n;
  };
  int64_t most = elements(best);
  for (int64_t v : rule.loop_domains)
    if (const int64_t n = elements(sizes[v]); n > most) {
      most = n;
      best = sizes[v];
    }
  return best;
}

LaunchDims launch_dims(const LaunchRule& rule, std::span<const int64_t> domain, int max_grid_x, int multiprocessors,
                       const KernelLimits& limits, int cluster) {
  const int64_t max_dynamic_shared = limits.max_dynamic_shared;
  LaunchDims dims;
  dims.block = static_cast<uint32_t>(rule.block);
  dims.shared_bytes = static_cast<uint32_t>(rule.shared_bytes);
  int64_t work = 1;
  if (rule.kind == LaunchRule::Kind::ColumnReduce) {
    int64_t cols = 1, rows = 1;
    for (size_t d = 0; d < domain.size(); ++d) (rule.reduced_dims[d] ? rows : cols) *= domain[d];
    if (takes_short_columns(rule, domain)) {  // one kernel, one tile per block
      const int64_t tiles = (cols + rule.short_tile_cols - 1) / rule.short_tile_cols;
      if (tiles > max_grid_x)
        fail(KF_ERR_UNSUPPORTED, "a column reduction over ", cols, " columns needs ", tiles,
             " blocks, more than the device's grid limit of ", max_grid_x);
      dims.grid = static_cast<uint32_t>(tiles);
      dims.short_columns = true;
      return dims;
    }
    const int64_t cap = std::min<int64_t>(rule.max_blocks, max_grid_x);
    const int64_t tiles = (cols + rule.tile_cols - 1) / rule.tile_cols;
    if (tiles == 0) return dims;  // grid 0: nothing to do
    // The partials and epilogue kernels take one tile per block (no
    // grid-stride loop), so every tile gets a block: the device's grid
    // limit, not max_blocks (a 32768 x 2 x 4096 MoE combine has 2^21 tiles
    // of 64 columns; capped at 65535 x 32 blocks it once launched nothing
    // and returned KF_OK).
    if (tiles > max_grid_x)
      fail(KF_ERR_UNSUPPORTED, "a column reduction over ", cols, " columns needs ", tiles,
           " blocks, more than the device's grid limit of ", max_grid_x);
    // About grid.split_blocks blocks in all, each reducing at least
    // grid.split_rows rows (GridTargets).
    const int64_t target = std::max(rule.grid.split_blocks, 1), least = std::max(rule.grid.split_rows, 1);
    const int64_t splits =
        std::clamp<int64_t>((target + tiles - 1) / tiles, 1, std::max<int64_t>(1, (rows + least - 1) / least));
    dims.grid = static_cast<uint32_t>(tiles);
    dims.grid_y = static_cast<uint32_t>(std::min<int64_t>(splits, 65535));
    dims.splits = dims.grid_y;
    dims.finish_grid = static_cast<uint32_t>(std::min<int64_t>((cols + rule.finish_cols - 1) / rule.finish_cols, cap));
    // The epilogue: about grid.epilogue_blocks blocks, each writing at
    // least grid.epilogue_rows rows.
    const int64_t epilogue = std::max(rule.grid.epilogue_blocks, 1), epilogue_rows = std::max(rule.grid.epilogue_rows, 1);
    dims.epilogue_grid_y = static_cast<uint32_t>(std::clamp<int64_t>(
        (epilogue + tiles - 1) / tiles, 1, std::min<int64_t>(65535, std::max<int64_t>(1, rows / epilogue_rows))));
    dims.scratch_bytes =
        (static_cast<uint64_t>(rule.accumulators) * dims.grid_y + static_cast<uint64_t>(rule.result_words)) *
        static_cast<uint64_t>(cols) * 8;
    return dims;
  }
  if (rule.kind == LaunchRule::Kind::Scan) {
    int64_t lines = 1, length = 1;
    for (size_t d = 0; d < domain.size(); ++d) (rule.reduced_dims[d] ? length : lines) *= domain[d];
    if (lines == 0 || length == 0) return dims;
    const int64_t cap = std::min<int64_t>(rule.max_blocks, max_grid_x);
    dims.grid = static_cast<uint32_t>(std::min<int64_t>(
        rule.scan_block_per_line ? lines : (lines + rule.block - 1) / rule.block, cap));
    return dims;
  }
  if (rule.kind == LaunchRule::Kind::SplitRows) {
    int64_t rows = 1, row = 1;
    for (size_t d = 0; d < domain.size(); ++d) (rule.reduced_dims[d] ? row : rows) *= domain[d];
    const int64_t cap = std::min<int64_t>(rule.max_blocks, max_grid_x);
    if (rows == 0 || rows > cap) return dims;  // (prefer_split_rows never picks these)
    // About grid.split_blocks partials blocks, each at least four vectors
    // per thread; the epilogue about grid.epilogue_blocks blocks, at least
    // one vector per thread.
    const int64_t vector = int64_t{rule.block} * std::max(rule.items_per_thread, 1);
    const int64_t target = std::max(rule.grid.split_blocks, 1), epilogue = std::max(rule.grid.epilogue_blocks, 1);
    dims.grid = static_cast<uint32_t>(rows);
    dims.grid_y = static_cast<uint32_t>(
        std::clamp<int64_t>((target + rows - 1) / rows, 1, std::clamp<int64_t>(row / (4 * vector), 1, 65535)));
    dims.splits = dims.grid_y;
    dims.epilogue_grid_y = static_cast<uint32_t>(
        std::clamp<int64_t>((epilogue + rows - 1) / rows, 1, std::clamp<int64_t>(row / vector, 1, 65535)));
    dims.finish_grid = static_cast<uint32_t>(std::min<int64_t>((rows + rule.finish_cols - 1) / rule.finish_cols, cap));
    dims.scratch_bytes =
        (static_cast<uint64_t>(rule.accumulators) * dims.grid_y + static_cast<uint64_t>(rule.result_words)) *
        static_cast<uint64_t>(rows) * 8;
    return dims;
  }
  int64_t elementwise_cap = std::numeric_limits<int64_t>::max();
  if (rule.kind == LaunchRule::Kind::Elementwise) {
    for (int64_t s : domain) work *= s;
    const int64_t per_block = static_cast<int64_t>(rule.block) * std::max(rule.items_per_thread, 1);
    work = (work + per_block - 1) / per_block;
    // grid.waves: a few waves of resident blocks, each thread looping,
    // so the set-up before the loops is paid once per thread for many
    // steps (docs/perf-log.md: rope, 56 instructions per element with one step).
    if (rule.grid.waves > 0 && multiprocessors > 0)
      elementwise_cap = int64_t{multiprocessors} * rule.grid.waves *
                        std::max<int64_t>(1, resident_blocks(rule.block, limits.registers, rule.shared_bytes,
                                                             std::max<int64_t>(max_dynamic_shared, rule.shared_bytes)));
  }
  int64_t blocks_per_sm = rule.threads_per_sm / std::max<int64_t>(rule.block, 1);
  if (rule.kind == LaunchRule::Kind::PerRow) {  // a reduction over an empty row still writes its identity
    int64_t row = 1;
    for (size_t d = 0; d < domain.size(); ++d) {
      if (d >= rule.reduced_dims.size() || !rule.reduced_dims[d]) work *= domain[d];
      else row *= domain[d];
    }
    if (rule.row_items > 0) dims.block = static_cast<uint32_t>(register_row_block(rule, row));
    if (rule.across_rows > 0) {  // a warp per row, across_rows rows per block
      dims.block = 32;
      dims.block_y = static_cast<uint32_t>(rule.across_rows);
      work = (work + rule.across_rows - 1) / rule.across_rows;
    }
    blocks_per_sm = rule.threads_per_sm / std::max<int64_t>(dims.block, 1);
    // Inner-outer: no more blocks than its registers let reside at once. A
    // second wave would start as the first ends, its blocks' rows behind
    // a tail (H200, docs/perf-log.md session 24: layernorm_bwd 32768 x 4096
    // bf16, 512-thread blocks of 64 registers, 4 per SM asked, 2 resident:
    // 0.300 -> 0.279 ms as one wave).
    if (rule.outer_accumulators > 0 && limits.registers > 0)
      blocks_per_sm = std::min(blocks_per_sm, resident_blocks(dims.block, limits.registers, 0, max_dynamic_shared));
    if (rule.row_partial_bytes > 0) {  // the Edges kernel's column partials (edge_partials_fit)
      const int64_t shared = int64_t{rule.row_partial_bytes} * (row + rule.row_stage_pad);
      dims.shared_bytes = static_cast<uint32_t>(shared);
      blocks_per_sm = std::min(blocks_per_sm, resident_blocks(dims.block, limits.registers, shared, max_dynamic_shared));
    }
    if (rule.row_items > 0 && (rule.stream_rows || row > int64_t{dims.block} * rule.row_items)) {
      dims.long_rows = true;
      // Too long for the registers: staged in shared memory where it fits
      // (the kernel checks the size it got and streams otherwise).
      // A row that leaves room for one block per multiprocessor only is
      // streamed instead: the block idles at each of its barriers with
      // nothing to overlap them, and its second pass mostly hits L2
      // (docs/perf-log.md, session 10: float32 rows of 32768 0.86 -> 0.79 ms).
      // Inner-outer rows keep their stage (their streamed partials go
      // through memory).
      const int64_t staged_row = cluster > 1 ? cluster_part(row, cluster) : row;
      const int64_t bytes = rule.row_stage_bytes * (staged_row + rule.row_stage_pad);
      const int64_t room = rule.outer_accumulators > 0 || cluster > 1 ? max_dynamic_shared : max_dynamic_shared / 2;
      const int64_t shared = bytes > 0 && bytes <= room ? bytes : 0;
      dims.shared_bytes = static_cast<uint32_t>(shared);
      // Any block size serves these paths: the one that keeps the most
      // threads resident (a 1024-thread block of 64 registers is alone on
      // its multiprocessor, idle at every barrier; docs/perf-log.md).
      // On a tie the smaller block: more blocks overlap each other's barriers.
      int64_t best = 0;
      for (int64_t b = rule.block; b >= 256 && cluster < 2; b /= 2) {
        const int64_t n = resident_blocks(b, limits.registers, shared, max_dynamic_shared);
        if (n * b >= best) {
          best = n * b;
          dims.block = static_cast<uint32_t>(b);
          blocks_per_sm = n;
        }
      }
      // The cluster kernel: the smallest block from RowParams::cluster_block
      // up that keeps half a multiprocessor's threads resident (each thread
      // then holds more of the part; H100, docs/perf-log.md session 22: 256
      // threads against 512 and 1024 took batch norm 1.92 -> 1.69 ms, but
      // group norm's 80 KB parts, two blocks per multiprocessor, 0.106 ->
      // 0.130), else the block that keeps the most.
      for (int64_t b = std::min(rule.cluster_block, rule.block); b <= rule.block && cluster > 1; b *= 2) {
        const int64_t n = resident_blocks(b, limits.registers, shared, max_dynamic_shared);
        if (n * b > best) {
          best = n * b;
          dims.block = static_cast<uint32_t>(b);
          blocks_per_sm = n;
        }
        if (n * b >= kThreadsPerSm / 2) break;
      }
    }
  }
  int64_t cap = std::min<int64_t>({rule.max_blocks, int64_t{max_grid_x}, elementwise_cap});
  if (cluster > 1) {  // whole clusters, one per row
    work *= cluster;
    cap = cap / cluster * cluster;
  }
  if (rule.outer_accumulators > 0)  // resident blocks only: each writes a row of partials
    cap = std::min<int64_t>(cap, int64_t{std::max(multiprocessors, 1)} * std::max<int64_t>(1, blocks_per_sm));
  dims.grid = static_cast<uint32_t>(std::clamp<int64_t>(work, 0, std::max<int64_t>(cap, 1)));
  if (rule.outer_accumulators > 0) {
    int64_t row = 1;
    for (size_t d = 0; d < domain.size(); ++d)
      if (d < rule.reduced_dims.size() && rule.reduced_dims[d]) row *= domain[d];
    // Rows but no columns: no partials to combine, the outer results are
    // still written (identities over zero rows when there are no rows).
    dims.grid = std::max<uint32_t>(dims.grid, 1);
    dims.splits = dims.grid;
    dims.finish_grid = static_cast<uint32_t>(
        std::clamp<int64_t>((row + rule.finish_cols - 1) / rule.finish_cols, 1, std::min<int64_t>(rule.max_blocks, max_grid_x)));
    dims.scratch_bytes = static_cast<uint64_t>(rule.outer_accumulators) * dims.grid * static_cast<uint64_t>(row) * 8;
  }
  return dims;
}

namespace {

// A PerRow call's row length: the product of its reduced extents.
int64_t row_length(const LaunchRule& rule, std::span<const int64_t> domain) {
  int64_t row = 1;
  for (size_t d = 0; d < domain.size(); ++d)
    if (d < rule.reduced_dims.size() && rule.reduced_dims[d]) row *= domain[d];
  return row;
}

}  // namespace

bool takes_long_rows(const LaunchRule& rule, std::span<const int64_t> domain) {
  if (rule.kind != LaunchRule::Kind::PerRow || rule.row_items <= 0) return false;
  if (rule.stream_rows) return true;
  const int64_t row = row_length(rule, domain);
  return row > register_row_block(rule, row) * rule.row_items;
}

// One row per block gives a row that needs at most a warp a block of 32
// threads: a multiprocessor holds at most 32 blocks, so at most half its
// threads, of which only the row's work, and each row pays
// kf_block_reduce's barriers. The short-row kernel fills its blocks with
// rows and reduces each within its group by shuffles (H200: sum over rows
// of 128 float16, one block per row, reached a tenth of the copy rate).
bool takes_short_rows(const LaunchRule& rule, std::span<const int64_t> domain) {
  if (rule.kind != LaunchRule::Kind::PerRow || rule.short_row_block <= 0 || rule.row_items <= 0) return false;
  return row_length(rule, domain) <= int64_t{32} * rule.row_items;
}

// A group pays for its unravelling (H200, corpus seeds 730114261,
// 259726623, 1542175980, docs/perf-log.md session 32: inner dims of 63 to
// 4095 ran 1.4-1.8x slower grouped) unless its inner dim leaves most of a
// tile empty (2-32: 1.07-18x faster grouped).
bool takes_ungrouped_tiles(const LaunchRule& rule, std::span<const int64_t> domain) {
  if (rule.kind != LaunchRule::Kind::Elementwise || rule.tile_group_dims.empty()) return false;
  return std::all_of(rule.tile_group_dims.begin(), rule.tile_group_dims.end(), [&](int d) {
    return 2 * domain[static_cast<size_t>(d)] > rule.tile;
  });
}

LaunchDims short_row_dims(const LaunchRule& rule, std::span<const int64_t> domain, int max_grid_x) {
  int64_t rows = 1, row = 1;
  for (size_t d = 0; d < domain.size(); ++d) (d < rule.reduced_dims.size() && rule.reduced_dims[d] ? row : rows) *= domain[d];
  const int64_t need = std::max<int64_t>((row + rule.row_items - 1) / rule.row_items, 1);
  int64_t threads = 1;
  while (threads < need && threads < 32) threads *= 2;
  LaunchDims dims;
  dims.block = static_cast<uint32_t>(threads);
  dims.block_y = static_cast<uint32_t>(std::max<int64_t>(rule.short_row_block / threads, 1));
  const int64_t cap = std::min<int64_t>(rule.max_blocks, max_grid_x);
  dims.grid = static_cast<uint32_t>(std::clamp<int64_t>((rows + dims.block_y - 1) / dims.block_y, 0, std::max<int64_t>(cap, 1)));
  return dims;
}

bool edge_partials_fit(const LaunchRule& rule, std::span<const int64_t> domain, int64_t max_dynamic_shared) {
  return int64_t{rule.row_partial_bytes} * (row_length(rule, domain) + rule.row_stage_pad) <= max_dynamic_shared;
}

bool takes_tight_registers(const LaunchRule& rule, std::span<const int64_t> domain) {
  if (rule.kind != LaunchRule::Kind::PerRow || rule.tight_registers <= 0 || takes_long_rows(rule, domain)) return false;
  const int64_t row = row_length(rule, domain);
  const int64_t block = register_row_block(rule, row);
  constexpr int kMainRegisters = 64;  // __launch_bounds__(1024, 1)
  return 2 * resident_blocks(block, rule.tight_registers, 0, 0) >= 3 * resident_blocks(block, kMainRegisters, 0, 0);
}

bool takes_wide_rows(const LaunchRule& rule, std::span<const int64_t> domain, int64_t max_dynamic_shared) {
  if (rule.kind != LaunchRule::Kind::PerRow || rule.wide_row_items <= 0 || rule.stream_rows ||
      !takes_long_rows(rule, domain))
    return false;
  const int64_t row = row_length(rule, domain);
  // (launch_dims stages a row without outer reductions within half the limit)
  return row <= rule.block * rule.wide_row_items &&
         rule.row_stage_bytes * (row + rule.row_stage_pad) > max_dynamic_shared / 2;
}

int cluster_blocks(const LaunchRule& rule, std::span<const int64_t> domain, int multiprocessors,
                   int64_t max_dynamic_shared) {
  if (rule.kind != LaunchRule::Kind::PerRow || rule.cluster_max < 2 || rule.row_stage_bytes <= 0 ||
      !takes_long_rows(rule, domain))
    return 0;
  int64_t rows = 1, row = 1;
  for (size_t d = 0; d < domain.size(); ++d) (d < rule.reduced_dims.size() && rule.reduced_dims[d] ? row : rows) *= domain[d];
  const int64_t sms = std::max(multiprocessors, 1), room = max_dynamic_shared / 2;
  if (rows == 0) return 0;
  if (!rule.cluster_stageable && rows >= 2 * sms && rule.row_stage_bytes * (row + rule.row_stage_pad) <= room) return 0;
  // Parts in a quarter of the shared memory where the cluster allows (four
  // or more blocks of a multiprocessor overlap each other's barriers), else in half.
  for (const int64_t part_room : {room / 2, room})
    for (int n = 2; n <= rule.cluster_max; n *= 2)
      if (rule.row_stage_bytes * (cluster_part(row, n) + rule.row_stage_pad) <= part_room && rows * n >= sms) return n;
  return 0;
}

bool windows_fit(const LaunchRule& rule, const ValueSizes& sizes) {
  for (const LaunchRule::Window& w : rule.windows) {
    const std::span<const int64_t> domain = sizes[w.domain_value];
    int64_t positions = 1;
    for (int d : w.dims) positions = mul_saturating(positions, domain[static_cast<size_t>(d)]);
    if (positions > w.span) return false;
  }
  return true;
}

bool takes_short_columns(const LaunchRule& rule, std::span<const int64_t> domain) {
  if (rule.kind != LaunchRule::Kind::ColumnReduce || rule.short_rows <= 0) return false;
  // The one place that decides: the split kernel's partials and second
  // launch cost more than a thread looping over a short column's rows
  // (the threshold's reasons: Tuning::column_short_rows).
  int64_t rows = 1, cols = 1;
  for (size_t d = 0; d < domain.size(); ++d) (rule.reduced_dims[d] ? rows : cols) *= domain[d];
  if (rows <= rule.short_rows) return true;
  // Columns enough to fill the device: the split kernel would take one
  // split (launch_dims), so its partials and the finishing kernel only
  // add traffic and a launch (a masked mean over 129 tokens of 128 x 12288
  // columns: a 57 us finish beside a 276 us partials kernel, ncu, H200,
  // docs/perf-log.md session 51), and the twin's blocks still fill it.
  if (rule.grid.short_columns_blocks <= 0 || rule.tile_cols <= 0 || rule.short_tile_cols <= 0) return false;
  const int64_t tiles = (cols + rule.tile_cols - 1) / rule.tile_cols,
                twin = (cols + rule.short_tile_cols - 1) / rule.short_tile_cols;
  return tiles >= std::max(rule.grid.split_blocks, 1) && twin >= rule.grid.short_columns_blocks;
}

bool prefer_split_rows(const LaunchRule& rule, std::span<const int64_t> domain, int multiprocessors) {
  if (rule.kind != LaunchRule::Kind::PerRow) return false;
  int64_t rows = 1, row = 1;
  for (size_t d = 0; d < domain.size(); ++d) (d < rule.reduced_dims.size() && rule.reduced_dims[d] ? row : rows) *= domain[d];
  // A row without a register plan is streamed by one block whatever its
  // length: split it once each thread of that block would load more than
  // grid.streamed_items elements (GridTargets).
  const int64_t items = rule.row_items > 0 ? rule.row_items : std::max(rule.grid.streamed_items, 1);
  return rows > 0 && rows < 2 * int64_t{std::max(multiprocessors, 1)} && row > int64_t{rule.block} * items;
}

}  // namespace kf::cuda
