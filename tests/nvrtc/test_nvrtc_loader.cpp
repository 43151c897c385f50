// The CUDA runtime's host side, without a GPU: NVRTC loads and compiles for
// sm_80 and sm_90 (CUBIN), reports compile errors with its log; the
// strided-copy kernels compile; copy layouts collapse; kernel arguments and
// grids follow a plan; and with no driver a kDLCUDA input fails with
// KF_ERR_NO_DEVICE and a clear message (skipped where a driver exists).
// Project headers first: cmocka defines a fail() macro.
#include "core/pipeline/plan.h"
#include "core/define/builder.h"
#include "core/runtime/backend.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/launch.h"
#include "core/runtime/cuda/loaded_kernel.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/runtime/cuda/permute_copy.h"
#include "core/runtime/cuda/strided_copy.h"
#include "core/runtime/executor.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include "nvrtc/nvrtc_skip.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace kf;
using namespace kf::cuda;

namespace {

const char* kTinyKernel = R"(
extern "C" __global__ void add_one(float* x, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)";

bool is_elf(const std::vector<char>& image) {
  return image.size() > 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0;
}

void test_nvrtc_loads(void**) {
  std::string why;
  if (!nvrtc_available(&why)) fail_msg("NVRTC not available: %s", why.c_str());
  NvrtcVersion v = nvrtc_version();
  assert_true(v.major >= 12);
  std::vector<int> archs = nvrtc_supported_archs();
  assert_false(archs.empty());
  assert_true(std::find(archs.begin(), archs.end(), 90) != archs.end());
}

void test_compiles_cubin_for_sm80_and_sm90(void**) {
  for (int sm : {80, 90}) {
    CompiledCode code = nvrtc_compile(kTinyKernel, "add_one", sm);
    assert_false(code.is_ptx);
    assert_true(is_elf(code.image));
  }
}

void test_options(void**) {
  std::vector<std::string> opts = nvrtc_options(90);
  auto has = [&](const std::string& o) { return std::find(opts.begin(), opts.end(), o) != opts.end(); };
  assert_true(has("-std=c++17"));
  assert_true(has("-default-device"));
  assert_true(has("--gpu-architecture=sm_90"));
  assert_false(cuda_include_dir().empty());
  assert_true(has("--include-path=" + cuda_include_dir()));
  // An architecture newer than NVRTC knows gets PTX for the newest one it does.
  std::vector<std::string> future = nvrtc_options(990);
  assert_true(std::find(future.begin(), future.end(),
                        "--gpu-architecture=compute_" + std::to_string(nvrtc_supported_archs().back())) !=
              future.end());
  CompiledCode ptx = nvrtc_compile(kTinyKernel, "add_one", 990);
  assert_true(ptx.is_ptx);
  assert_non_null(std::strstr(ptx.image.data(), ".entry add_one"));
  // KFUSE_NVRTC_FAST_COMPILE: NVRTC's -Ofc level where NVRTC has it; any
  // other value adds nothing.
  assert_false(has("-Ofc=mid"));
  setenv("KFUSE_NVRTC_FAST_COMPILE", "mid", 1);
  const std::vector<std::string> fast = nvrtc_options(90);
  const NvrtcVersion v = nvrtc_version();
  const bool has_ofc = v.major > 12 || (v.major == 12 && v.minor >= 8);
  assert_int_equal(std::count(fast.begin(), fast.end(), "-Ofc=mid"), has_ofc ? 1 : 0);
  if (has_ofc) assert_true(is_elf(nvrtc_compile(kTinyKernel, "add_one", 90).image));
  setenv("KFUSE_NVRTC_FAST_COMPILE", "fastest", 1);
  assert_int_equal(nvrtc_options(90).size(), opts.size());
  unsetenv("KFUSE_NVRTC_FAST_COMPILE");
}

void test_half_headers(void**) {
  const char* src = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void h(__half* x, __nv_bfloat16* y) {
  x[threadIdx.x] = __float2half(__half2float(x[threadIdx.x]) * 2.0f);
  y[threadIdx.x] = __float2bfloat16(__bfloat162float(y[threadIdx.x]) + 1.0f);
}
)";
  assert_true(is_elf(nvrtc_compile(src, "h", 90).image));
}

void test_compile_error_has_log(void**) {
  try {
    nvrtc_compile("extern \"C\" __global__ void bad() { undeclared_thing = 1; }", "bad", 90);
    fail_msg("expected a compile error");
  } catch (const kf::Error& e) {
    assert_int_equal(e.status(), KF_ERR_BACKEND);
    assert_non_null(std::strstr(e.what(), "bad"));
    assert_non_null(std::strstr(e.what(), "undeclared_thing"));
    assert_non_null(std::strstr(e.what(), "sm_90"));
  }
}

void test_strided_copy_kernels_compile(void**) {
  for (int e : {1, 2, 4, 8, 16})
    for (int rank : {1, 2, 3, 6})
      for (bool index32 : {false, true}) {
        std::string name = strided_copy_name(e, rank, index32);
        assert_true(is_elf(nvrtc_compile(strided_copy_source(e, rank, index32), name, 90).image));
      }
}

void test_permute_copy_kernels(void**) {
  // Every shape of plan: one dim per group, groups of 2 and 3 dims, a
  // narrow group B (512 x 8), rank 8, a broadcast source, 64-bit offsets, a
  // narrow group A; each for every element size.
  const std::vector<CopyLayout> layouts = {
      collapse_copy({16512, 12288}, {12288, 1}, {1, 16512}),
      collapse_copy({4, 2048, 12288}, {2048 * 12288, 12288, 1}, {1, 4, 8192}),
      collapse_copy({8, 2047, 12288}, {2047 * 12288, 12288, 1}, {1, 8 * 12288, 8}),
      collapse_copy({256, 4, 4, 4}, {64, 16, 4, 1}, {1, 256, 1024, 4096}),
      collapse_copy({2, 2, 2, 2, 2, 2, 3, 1029}, {6 * 1029 * 32, 6 * 1029 * 16, 6 * 1029 * 8, 6 * 1029 * 4,
                                                  6 * 1029 * 2, 6 * 1029, 1029, 1},
                    {3 * 1029, 2, 3 * 1029 * 4, 1, 3 * 1029 * 2, 3 * 1029 * 8, 1029, 3 * 1029 * 16}),
      collapse_copy({1024, 64}, {0, 1}, {1, 1024}),
      collapse_copy({256, 128}, {1, int64_t{1} << 25}, {128, 1}),
      collapse_copy({16, 4096}, {1, 16}, {4096, 1}),  // A of 16: the shared tile's rows along B
  };
  std::map<std::string, std::string> source_of;  // kernels are cached by name: one name, one source
  for (int e : {1, 2, 4, 8})
    for (const CopyLayout& l : layouts) {
      const auto plan = plan_permute_copy(l, e, 132, 1 << 30);
      assert_true(plan.has_value());
      const std::string source = permute_copy_source(*plan);
      const auto [it, added] = source_of.emplace(plan->name(), source);
      if (!added) {
        assert_true(it->second == source);
        continue;
      }
      assert_true(is_elf(nvrtc_compile(source, plan->name(), 90).image));
    }
  assert_true(source_of.size() >= 20);
  assert_int_equal(plan_permute_copy(layouts[4], 8, 132, 1 << 30)->rank, 8);
  assert_false(plan_permute_copy(layouts[6], 4, 132, 1 << 30)->index32);
  assert_true(plan_permute_copy(layouts[7], 2, 132, 1 << 30)->rows_along_b);
}

void test_collapse_copy(void**) {
  // Contiguous in the same order: one block.
  CopyLayout l = collapse_copy({2, 3, 4}, {12, 4, 1}, {12, 4, 1});
  assert_true(l.contiguous());
  assert_int_equal(l.sizes[0], 24);
  // Size-1 dims do not matter, whatever their strides.
  l = collapse_copy({2, 1, 4}, {4, 99, 1}, {4, 7, 1});
  assert_true(l.contiguous());
  // Transposed source: two dims, ordered by the destination.
  l = collapse_copy({3, 4}, {1, 3}, {4, 1});
  assert_false(l.contiguous());
  assert_int_equal(l.sizes.size(), 2);
  assert_int_equal(l.dst_strides[1], 1);
  assert_int_equal(l.src_strides[1], 3);
  // A sliced source (row pitch 10) keeps rows apart; inner dims still merge.
  l = collapse_copy({5, 2, 4}, {10, 4, 1}, {8, 4, 1});
  assert_int_equal(l.sizes.size(), 2);
  assert_int_equal(l.sizes[1], 8);
  assert_int_equal(l.src_strides[0], 10);
  // Broadcast source (stride 0).
  l = collapse_copy({4, 3}, {0, 1}, {3, 1});
  assert_int_equal(l.sizes.size(), 2);
  assert_int_equal(l.src_strides[0], 0);
  // Empty and 0-dim.
  assert_int_equal(collapse_copy({3, 0}, {1, 1}, {1, 1}).numel, 0);
  l = collapse_copy({}, {}, {});
  assert_int_equal(l.numel, 1);
  assert_true(l.contiguous());
}

void test_launch_dims(void**) {
  std::vector<Sizes> sizes = {{1000, 3}, {0, 5}, {4, 7, 9}};
  LaunchRule r;
  r.domain_value = 0;
  r.block = 128;
  r.items_per_thread = 4;
  LaunchDims d = launch_dims(r, sizes[0], 1 << 30, 132);
  assert_int_equal(d.grid, (3000 + 511) / 512);
  assert_int_equal(d.block, 128);
  r.max_blocks = 2;
  assert_int_equal(launch_dims(r, sizes[0], 1 << 30, 132).grid, 2);
  r.max_blocks = 1 << 20;
  assert_int_equal(launch_dims(r, sizes[0], 3, 132).grid, 3);  // the device's grid limit
  // An empty domain: nothing to launch.
  assert_int_equal(launch_dims(r, sizes[1], 1 << 30, 132).grid, 0);
  // A large domain: one step per thread, unless the grid is bounded: 16
  // waves of resident blocks, each thread looping (16 blocks of 128
  // threads per multiprocessor; 4 with 64 registers).
  assert_int_equal(launch_dims(r, Sizes{1 << 20, 1024}, 1 << 30, 132).grid, 1 << 20);
  r.grid.waves = 16;
  assert_int_equal(launch_dims(r, Sizes{1 << 20, 1024}, 1 << 30, 132).grid, 132 * 16 * 16);
  assert_int_equal(launch_dims(r, Sizes{1 << 20, 1024}, 1 << 30, 132, KernelLimits{0, 128}).grid, 132 * 4 * 16);
  assert_int_equal(launch_dims(r, Sizes{1 << 20, 1024}, 1 << 30, 0).grid, 1 << 20);  // no device count: max_blocks
  assert_int_equal(launch_dims(r, Sizes{1000, 3}, 1 << 30, 132).grid, (3000 + 511) / 512);  // small: unchanged
  r.grid.waves = 0;
  r.kind = LaunchRule::Kind::PerRow;
  r.reduced_dims = {false, true, false};
  assert_int_equal(launch_dims(r, sizes[2], 1 << 30, 132).grid, 36);
  // Rows exist but the reduced dim is empty: still launched (identity values).
  r.reduced_dims = {false, true};
  assert_int_equal(launch_dims(r, Sizes{6, 0}, 1 << 30, 132).grid, 6);
  // Inner-outer: a bounded grid (its partial rows), a finishing grid over
  // the row's elements, scratch for every outer reduction; no rows at all
  // still launches one block (the column results are identities).
  r.outer_accumulators = 2;
  r.threads_per_sm = 512;  // 4 blocks of 128 threads
  r.finish_block = 256;
  d = launch_dims(r, Sizes{100000, 1000}, 1 << 30, 132);
  assert_int_equal(d.block, 128);
  assert_int_equal(d.grid, 528);
  assert_int_equal(d.splits, 528);
  assert_int_equal(d.finish_grid, (1000 + 31) / 32);
  assert_int_equal(d.scratch_bytes, 2ull * 528 * 1000 * 8);
  assert_int_equal(launch_dims(r, Sizes{10, 1000}, 1 << 30, 132).grid, 10);
  assert_int_equal(launch_dims(r, Sizes{0, 1000}, 1 << 30, 132).grid, 1);
  // A staged row path: rows that fit the registers (row_items per thread)
  // get no shared memory; longer ones get row * row_stage_bytes when the
  // kernel may have that much, which also bounds the resident blocks.
  r.row_items = 8;
  r.block = 1024;
  r.threads_per_sm = 2048;
  r.row_stage_bytes = 12;
  const KernelLimits limits{227 * 1024, 62};
  d = launch_dims(r, Sizes{100000, 8192}, 1 << 30, 132, limits);
  assert_int_equal(d.block, 1024);
  assert_int_equal(d.shared_bytes, 0);
  assert_int_equal(d.grid, 132);  // one wave: a 1024-thread block of 62 registers resides alone
  assert_int_equal(launch_dims(r, Sizes{100000, 8192}, 1 << 30, 132).grid, 264);  // registers unknown: threads_per_sm
  // 512-thread blocks (rows of 4096): 2048 threads per SM ask for 4, 64
  // registers let 2 reside, 32 all 4.
  assert_int_equal(launch_dims(r, Sizes{100000, 4096}, 1 << 30, 132, limits).grid, 264);
  assert_int_equal(launch_dims(r, Sizes{100000, 4096}, 1 << 30, 132, KernelLimits{227 * 1024, 32}).grid, 528);
  d = launch_dims(r, Sizes{100000, 16392}, 1 << 30, 132, limits);
  assert_int_equal(d.shared_bytes, 16392 * 12);
  assert_int_equal(d.block, 1024);  // one block fits a multiprocessor, whatever its size
  assert_int_equal(d.grid, 132);
  d = launch_dims(r, Sizes{100000, 8200}, 1 << 30, 132, limits);
  assert_int_equal(d.shared_bytes, 8200 * 12);
  assert_int_equal(d.block, 512);  // 2 x 512 threads (shared memory), not 1 x 1024 (registers)
  assert_int_equal(d.grid, 264);
  d = launch_dims(r, Sizes{100000, 50000}, 1 << 30, 132, limits);
  assert_int_equal(d.shared_bytes, 0);  // too long: the kernel streams
  assert_int_equal(d.block, 256);       // 8 x 256 threads by registers
  assert_int_equal(launch_dims(r, Sizes{100000, 16392}, 1 << 30, 132).shared_bytes, 0);  // no limit given
  // Rows without outer reductions are staged only where two blocks fit: a
  // float32 row of 32768 (128 KB, one block per multiprocessor) streams.
  LaunchRule pr = r;
  pr.outer_accumulators = 0;
  pr.row_stage_bytes = 4;
  d = launch_dims(pr, Sizes{8192, 16392}, 1 << 30, 132, limits);
  assert_true(d.long_rows);
  assert_int_equal(d.shared_bytes, 16392 * 4);
  d = launch_dims(pr, Sizes{8192, 32768}, 1 << 30, 132, limits);
  assert_true(d.long_rows);
  assert_int_equal(d.shared_bytes, 0);
  // A padded stage (each row rounded up to 16 bytes; an Edges kernel's
  // rows at their shift): row_stage_pad more elements per row.
  pr.row_stage_pad = 30;
  d = launch_dims(pr, Sizes{8192, 16391}, 1 << 30, 132, limits);
  assert_int_equal(d.shared_bytes, (16391 + 30) * 4);
  pr.row_stage_pad = 0;
  // Streamed rows (one pass, RowParams::stream_rows): short rows too take
  // the LongRows kernel, with the block that keeps the most threads.
  LaunchRule sr = r;
  sr.stream_rows = true;
  sr.row_stage_bytes = 0;
  d = launch_dims(sr, Sizes{100000, 4096}, 1 << 30, 132, KernelLimits{227 * 1024, 32});
  assert_true(d.long_rows);
  assert_int_equal(d.shared_bytes, 0);
  assert_int_equal(d.block, 256);  // 8 x 256 at 32 registers: ties go to the smaller block
  assert_false(launch_dims(r, Sizes{100000, 4096}, 1 << 30, 132, limits).long_rows);
  // The tight kernel (48 registers) where its block fits 1.5x as often as
  // the main kernel's 64 registers allow: 32 bf16 per thread, rows of
  // 16392 take 544 threads (1 block at 64, 2 at 48); 11264 take 352 (2 -> 3);
  // 4096 take 128 (8 -> 10: no); 32768 take 1024 (1 -> 1: no).
  LaunchRule tr = r;
  tr.outer_accumulators = 0;
  tr.row_items = 32;
  assert_false(takes_tight_registers(tr, Sizes{100, 16392}));  // no tight kernel
  tr.tight_registers = 48;
  assert_true(takes_tight_registers(tr, Sizes{100, 16392}));
  assert_true(takes_tight_registers(tr, Sizes{100, 11264}));
  assert_false(takes_tight_registers(tr, Sizes{100, 4096}));
  assert_false(takes_tight_registers(tr, Sizes{100, 32768}));
  assert_false(takes_tight_registers(tr, Sizes{100, 40000}));  // long rows
  // The wide kernel (twice the main kernel's elements per thread): rows too
  // long for the main kernel, within the wide one's, whose stage (4 bytes
  // per element here) exceeds half the 227 KB limit: float32 rows of 16
  // per thread at 4 vectors, 32 at 8.
  LaunchRule wr = r;
  wr.outer_accumulators = 0;
  wr.row_items = 16;
  wr.row_stage_bytes = 4;
  const int64_t optin = 227 * 1024;
  assert_false(takes_wide_rows(wr, Sizes{100, 32768}, optin));  // no wide kernel
  wr.wide_row_items = 32;
  assert_true(takes_wide_rows(wr, Sizes{100, 32768}, optin));   // 128 KB: streamed
  assert_true(takes_wide_rows(wr, Sizes{100, 30000}, optin));   // 117 KB: streamed
  assert_false(takes_wide_rows(wr, Sizes{100, 24000}, optin));  // 94 KB: staged
  assert_false(takes_wide_rows(wr, Sizes{100, 16384}, optin));  // the main kernel's
  assert_false(takes_wide_rows(wr, Sizes{100, 32769}, optin));  // too long for 32 per thread
  assert_true(takes_wide_rows(wr, Sizes{100, 24000}, 160 * 1024));  // a smaller limit: streamed
  // Column reductions: tiles x splits (about 1024 blocks, at least 128
  // rows each); a normalization's per-column results after the partials
  // in the scratch, and its epilogue split finer (about 4096 blocks, at
  // least 32 rows each).
  LaunchRule col;
  col.kind = LaunchRule::Kind::ColumnReduce;
  col.domain_value = 0;
  col.reduced_dims = {true, false};
  col.tile_cols = 256;
  col.accumulators = 2;
  col.result_words = 3;
  d = launch_dims(col, Sizes{32768, 8192}, 1 << 30, 132);
  assert_int_equal(d.grid, 32);
  assert_int_equal(d.grid_y, 32);
  assert_int_equal(d.epilogue_grid_y, 128);
  assert_int_equal(d.scratch_bytes, (2ull * 32 + 3) * 8192 * 8);
  d = launch_dims(col, Sizes{100, 8192}, 1 << 30, 132);
  assert_int_equal(d.grid_y, 1);
  assert_int_equal(d.epilogue_grid_y, 3);
  {  // the plan's grid targets (Tuning::grid_*), not constants of the launch
    LaunchRule c2 = col;
    c2.grid.split_blocks = 256;
    c2.grid.epilogue_blocks = 1024;
    d = launch_dims(c2, Sizes{32768, 8192}, 1 << 30, 132);
    assert_int_equal(d.grid_y, 8);
    assert_int_equal(d.epilogue_grid_y, 32);
    c2.grid.split_rows = 8192;  // at least 8192 rows per block: 4 splits
    c2.grid.epilogue_rows = 8192;
    d = launch_dims(c2, Sizes{32768, 8192}, 1 << 30, 132);
    assert_int_equal(d.grid_y, 4);
    assert_int_equal(d.epilogue_grid_y, 4);
  }
  // More tiles than max_blocks (65535 x 32): one block per tile still (the
  // kernels have no grid-stride loop over tiles; this once gave grid 0, a
  // call that wrote nothing and succeeded); the finish kernel, which
  // strides, stays capped. Past the device's grid limit: an error.
  LaunchRule moe = col;
  moe.reduced_dims = {false, true, false};
  moe.tile_cols = 64;
  d = launch_dims(moe, Sizes{32768, 2, 4096}, 2147483647, 132);
  assert_int_equal(d.grid, 2097152);
  assert_true(d.finish_grid <= 65535u * 32);
  assert_true(d.finish_grid > 0);
  bool refused = false;
  try {
    launch_dims(moe, Sizes{32768, 2, 4096}, 65535, 132);
  } catch (const kf::Error& e) {
    refused = e.status() == KF_ERR_UNSUPPORTED;
  }
  assert_true(refused);
  // With a one-kernel twin (short_rows): up to 32 reduced rows, one block
  // per 2048-column tile, no splits, no scratch; 0 rows too (the twin
  // writes the identities); 33 rows, or a plan without the twin, split.
  moe.short_rows = 32;
  moe.short_tile_cols = 2048;
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{8}, int64_t{32}}) {
    assert_true(takes_short_columns(moe, Sizes{32768, k, 4096}));
    d = launch_dims(moe, Sizes{32768, k, 4096}, 2147483647, 132);
    assert_true(d.short_columns);
    assert_int_equal(d.grid, 65536);
    assert_int_equal(d.grid_y, 1);
    assert_int_equal(d.scratch_bytes, 0);
  }
  d = launch_dims(moe, Sizes{7, 3, 4097}, 2147483647, 132);  // a partial last tile
  assert_true(d.short_columns);
  assert_int_equal(d.grid, 15);
  d = launch_dims(moe, Sizes{0, 3, 4096}, 2147483647, 132);  // no columns: nothing to launch
  assert_int_equal(d.grid, 0);
  // Past 32 rows the twin still runs where the columns alone fill the
  // device: the split kernel would take one split (split_blocks = 1024
  // tiles or more) and the twin has at least short_columns_blocks = 512
  // blocks. With fewer columns, or that rule off, the rows split.
  moe.grid.short_columns_blocks = 512;
  assert_true(takes_short_columns(moe, Sizes{32768, 33, 4096}));  // 2^21 tiles, a twin of 65536 blocks
  assert_true(takes_short_columns(moe, Sizes{128, 129, 12288}));  // a masked mean pool: 768 twin blocks
  assert_false(takes_short_columns(moe, Sizes{128, 129, 4096}));  // 256 twin blocks
  assert_false(takes_short_columns(moe, Sizes{1, 4096, 65536}));  // 1024 tiles, 32 twin blocks
  assert_false(takes_short_columns(moe, Sizes{1, 33, 60000}));    // 938 tiles, fewer than split_blocks
  d = launch_dims(moe, Sizes{128, 129, 4096}, 2147483647, 132);
  assert_false(d.short_columns);
  assert_int_equal(d.grid, 8192);
  assert_true(d.scratch_bytes > 0);
  moe.grid.short_columns_blocks = 0;
  assert_false(takes_short_columns(moe, Sizes{32768, 33, 4096}));
  d = launch_dims(moe, Sizes{32768, 33, 4096}, 2147483647, 132);
  assert_false(d.short_columns);
  assert_int_equal(d.grid, 2097152);
  assert_true(d.scratch_bytes > 0);
  moe.short_rows = 0;
  assert_false(takes_short_columns(moe, Sizes{32768, 2, 4096}));
  // Rows split over blocks: only for rows too long for the registers and
  // fewer than two per multiprocessor; about 1024 partials blocks of at
  // least 4 vectors per thread, an epilogue of about 4096.
  LaunchRule row;
  row.kind = LaunchRule::Kind::PerRow;
  row.reduced_dims = {false, true};
  row.block = 1024;
  row.row_items = 32;
  assert_true(prefer_split_rows(row, Sizes{128, 327680}, 132));
  assert_false(prefer_split_rows(row, Sizes{264, 327680}, 132));  // enough rows
  assert_false(prefer_split_rows(row, Sizes{128, 32768}, 132));   // fits the registers
  assert_false(prefer_split_rows(row, Sizes{0, 327680}, 132));
  {  // a streamed row (no register plan): split past grid.streamed_items per thread
    LaunchRule s = row;
    s.row_items = 0;
    assert_true(prefer_split_rows(s, Sizes{128, 16385}, 132));
    assert_false(prefer_split_rows(s, Sizes{128, 16384}, 132));
    s.grid.streamed_items = 32;
    assert_false(prefer_split_rows(s, Sizes{128, 16385}, 132));
  }
  // Cluster rows (rows too long to stage in half the shared memory, or too
  // few for two per multiprocessor): the fewest blocks per row, a power of
  // two up to cluster_max, whose parts stage in a quarter of it (else half)
  // and that give every multiprocessor a block.
  LaunchRule cl = row;
  cl.row_stage_bytes = 2;  // one bfloat16 input staged
  cl.row_stage_pad = 16;
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 131072}, 132, optin), 0);  // no cluster kernel
  cl.cluster_max = 8;
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 131072}, 132, optin), 8);  // 256 KB rows: 32 KB parts (a quarter)
  assert_int_equal(cluster_blocks(cl, Sizes{128, 327680}, 132, optin), 8);   // 640 KB: 80 KB parts
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 40000}, 132, optin), 0);   // one block stages it
  assert_int_equal(cluster_blocks(cl, Sizes{64, 40000}, 132, optin), 4);     // few rows: a block per multiprocessor
  assert_int_equal(cluster_blocks(cl, Sizes{100, 40000}, 132, optin), 2);    // 80 KB rows, too few: 40 KB parts
  assert_int_equal(cluster_blocks(cl, Sizes{16, 40000}, 132, optin), 0);     // too few even in clusters of 8
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 1 << 21}, 132, optin), 0); // 4 MB: parts too large
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 32768}, 132, optin), 0);   // fits the registers
  cl.cluster_max = 2;
  assert_int_equal(cluster_blocks(cl, Sizes{128, 327680}, 132, optin), 0);   // would need 8
  // Rows one block could stage too (RowParams::cluster_stageable: an online
  // softmax pair with an output pass), as long as they are long rows.
  cl.cluster_max = 8;
  cl.cluster_stageable = true;
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 40000}, 132, optin), 2);   // 80 KB rows: 40 KB parts
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 131072}, 132, optin), 8);  // as before
  assert_int_equal(cluster_blocks(cl, Sizes{8192, 32768}, 132, optin), 0);   // fits the registers
  cl.cluster_stageable = false;
  // Its launch: whole clusters, a cluster per row, each block staging its part.
  cl.cluster_max = 8;
  KernelLimits lim;
  lim.max_dynamic_shared = optin;
  lim.registers = 32;
  d = launch_dims(cl, Sizes{8192, 131072}, 1 << 30, 132, lim, 4);
  assert_true(d.long_rows);
  assert_int_equal(d.grid, 8192 * 4);
  assert_int_equal(d.shared_bytes, 2 * (131072 / 4 + 16 + 16));
  assert_int_equal(d.block, 512);  // 64 KB parts: 3 of 256 threads would keep too few resident
  d = launch_dims(cl, Sizes{8192, 131072}, 1 << 30, 132, lim, 8);
  assert_int_equal(d.block, 256);  // 32 KB parts: 6 of RowParams::cluster_block's 256
  d = launch_dims(cl, Sizes{8192, 131072}, 32770, 132, lim, 4);
  assert_int_equal(d.grid, 32768);  // capped at whole clusters
  // A stageable row in clusters of 2 (session 23's softmax 2048 x 16392
  // float32): 33 KB parts, six blocks of 256 threads per multiprocessor.
  LaunchRule sm = cl;
  sm.row_stage_bytes = 4;
  sm.row_items = 16;
  sm.cluster_stageable = true;
  assert_int_equal(cluster_blocks(sm, Sizes{2048, 16392}, 132, optin), 2);
  d = launch_dims(sm, Sizes{2048, 16392}, 1 << 30, 132, lim, 2);
  assert_true(d.long_rows);
  assert_int_equal(d.grid, 4096);
  assert_int_equal(d.shared_bytes, 4 * ((16392 + 1) / 2 + 16 + 16));
  assert_int_equal(d.block, 256);
  sm.cluster_stageable = false;
  assert_int_equal(cluster_blocks(sm, Sizes{2048, 16392}, 132, optin), 0);  // one block stages it
  LaunchRule split;
  split.kind = LaunchRule::Kind::SplitRows;
  split.reduced_dims = {false, true};
  split.block = 256;
  split.items_per_thread = 8;
  split.accumulators = 2;
  split.result_words = 2;
  d = launch_dims(split, Sizes{128, 327680}, 1 << 30, 132);
  assert_int_equal(d.grid, 128);
  assert_int_equal(d.grid_y, 8);
  assert_int_equal(d.epilogue_grid_y, 32);
  assert_int_equal(d.finish_grid, 4);
  assert_int_equal(d.scratch_bytes, (2ull * 8 + 2) * 128 * 8);
  d = launch_dims(split, Sizes{3, 20000}, 1 << 30, 132);
  assert_int_equal(d.grid_y, 2);           // 20000 / (4 * 2048) rows per split at least
  assert_int_equal(d.epilogue_grid_y, 9);  // 20000 / 2048
  split.grid.split_blocks = 256;
  split.grid.epilogue_blocks = 512;
  d = launch_dims(split, Sizes{128, 327680}, 1 << 30, 132);
  assert_int_equal(d.grid_y, 2);
  assert_int_equal(d.epilogue_grid_y, 4);
}

// A fusion of one negation (rank `rank`, `dtype`), for the variant tests:
// its input, *x, is their plans' domain value.
std::shared_ptr<kf::Fusion> negation(int rank, DType dtype, int64_t* x) {
  Builder b;
  *x = b.tensor_input(rank, dtype);
  b.output(b.op(Op::NEG, {*x}, {})[0], {}, -1);
  return b.finalize();
}

// An H200 as kernel_variant sees it: sm_90, 132 multiprocessors, 227 KB
// of shared memory a block may opt in to.
DeviceInfo h200() {
  DeviceInfo dev;
  dev.sm = 90;
  dev.multiprocessors = 132;
  dev.max_shared_optin = 227 * 1024;
  return dev;
}

// Which kernel a row plan's call takes on an sm_90 device with clusters
// (kernel_variant): the cluster kernel for rows the long-row kernel would
// re-read or split, and for rows the wide kernel holds only when they are
// too few to fill the device; no cluster kernel before sm_90.
void test_cluster_variant(void**) {
  int64_t x = -1;
  auto f = negation(2, DType::F32, &x);
  KernelPlan plan;
  plan.name = "k";
  plan.long_row_name = "k_long";
  plan.wide_name = "k_wide";
  plan.cluster_name = "k_cluster";
  LaunchRule& r = plan.launch;
  r.kind = LaunchRule::Kind::PerRow;
  r.domain_value = x;
  r.reduced_dims = {false, true};
  r.block = 1024;
  r.row_items = 16;       // 4 vectors of 4 float32 per thread
  r.wide_row_items = 32;  // the wide kernel: 32768 elements per row
  r.row_stage_bytes = 4;
  r.row_stage_pad = 16;
  r.cluster_max = 8;
  DeviceInfo dev = h200();
  ValueSizes sizes;
  sizes.reset(*f);
  auto variant = [&](int64_t rows, int64_t row) {
    const int64_t shape[2] = {rows, row};
    sizes.set(x, shape);
    return kernel_variant(plan, sizes, dev);
  };
  assert_true(variant(4096, 65536) == KernelVariant::Cluster);   // 256 KB rows: re-read by the long-row kernel
  assert_true(variant(2048, 32768) == KernelVariant::Wide);      // held in registers, and they fill the device
  assert_true(variant(256, 32768) == KernelVariant::Cluster);    // held, but 256 blocks leave it half idle
  assert_true(variant(4096, 20000) == KernelVariant::LongRows);  // staged by one block
  assert_true(variant(4096, 8192) == KernelVariant::Main);       // the registers hold it
  r.cluster_stageable = true;  // an online softmax pair with an output pass
  assert_true(variant(4096, 20000) == KernelVariant::Cluster);   // staged in parts
  assert_true(variant(2048, 32768) == KernelVariant::Wide);      // still held in registers
  assert_true(variant(4096, 8192) == KernelVariant::Main);
  r.cluster_stageable = false;
  dev.sm = 80;
  assert_true(variant(4096, 65536) == KernelVariant::LongRows);
  dev.sm = 90;
  plan.cluster_name.clear();
  assert_true(variant(4096, 65536) == KernelVariant::LongRows);
}

// In-place windows (LaunchRule::windows): a call fits where each loop's
// window (the product of its dims' extents) is at most its span; one
// longer window is enough for the launch to copy window_inputs.
void test_windows_fit(void**) {
  int64_t x = -1;
  auto f = negation(3, DType::F32, &x);
  LaunchRule r;
  r.kind = LaunchRule::Kind::Elementwise;
  r.domain_value = x;
  ValueSizes sizes;
  sizes.reset(*f);
  const auto fits = [&](int64_t a, int64_t b, int64_t c) {
    const int64_t shape[3] = {a, b, c};
    sizes.set(x, shape);
    return windows_fit(r, sizes);
  };
  assert_true(fits(8, 4096, 100000));  // no windows
  r.windows.push_back({x, {2}, 2048});
  assert_true(fits(8, 4096, 128));
  assert_true(fits(8, 4096, 2048));
  assert_false(fits(8, 4096, 2049));
  r.windows.push_back({x, {1, 2}, 1 << 20});  // a second loop's window over two dims
  assert_true(fits(8, 4096, 128));            // 4096 x 128 = 2^19
  assert_false(fits(8, 8192, 256));           // 2^21
}

// A column plan with a one-kernel twin: calls of at most short_rows
// reduced rows launch it alone (or its scalar twin), longer ones the split
// kernels with their finish.
void test_short_column_variant(void**) {
  int64_t x = -1;
  auto f = negation(3, DType::F32, &x);
  LoadedKernel k;
  KernelPlan& plan = k.plan;
  plan.name = "k";
  plan.finish_name = "k_finish";
  plan.short_name = "k_short";
  plan.scalar_twins = {{"k", "k_scalar"}, {"k_short", "k_short_scalar"}};
  LaunchRule& r = plan.launch;
  r.kind = LaunchRule::Kind::ColumnReduce;
  r.domain_value = x;
  r.reduced_dims = {false, true, false};
  r.tile_cols = 256;
  r.short_rows = 32;
  r.short_tile_cols = 2048;
  DeviceInfo dev;
  dev.sm = 90;
  dev.multiprocessors = 132;
  ValueSizes sizes;
  sizes.reset(*f);
  auto variant = [&](int64_t rows) {
    const int64_t shape[3] = {16384, rows, 5120};
    sizes.set(x, shape);
    return kernel_variant(plan, sizes, dev);
  };
  assert_true(variant(0) == KernelVariant::ShortColumns);
  assert_true(variant(2) == KernelVariant::ShortColumns);
  assert_true(variant(32) == KernelVariant::ShortColumns);
  // 33 rows of 16384 x 5120 columns: the columns alone fill the device
  // (GridTargets::short_columns_blocks); by the row count alone, split.
  assert_true(variant(33) == KernelVariant::ShortColumns);
  r.grid.short_columns_blocks = 0;
  assert_true(variant(33) == KernelVariant::Main);
  assert_true(scalar_variant(KernelVariant::ShortColumns) == KernelVariant::ShortColumnsScalar);
  assert_true(scalar_variant(KernelVariant::Main) == KernelVariant::Scalar);
  assert_true(k.kernels_of(KernelVariant::ShortColumns) == std::vector<std::string>{"k_short"});
  assert_true(k.kernels_of(KernelVariant::ShortColumnsScalar) == std::vector<std::string>{"k_short_scalar"});
  assert_true((k.kernels_of(KernelVariant::Main) == std::vector<std::string>{"k", "k_finish"}));
  plan.short_name.clear();
  assert_true(variant(2) == KernelVariant::Main);
}

// Which kernel a tiled plan over groups of dims takes (kernel_variant,
// takes_ungrouped_tiles): the grouped main kernel while some group's inner
// dim leaves more than half a 64-wide tile empty, the ungrouped twin once
// every such dim fills half a tile alone.
void test_ungrouped_tiles_variant(void**) {
  int64_t x = -1;
  auto f = negation(3, DType::BF16, &x);
  KernelPlan plan;
  plan.name = "k";
  LaunchRule& r = plan.launch;
  r.kind = LaunchRule::Kind::Elementwise;
  r.domain_value = x;
  r.block = 256;
  r.items_per_thread = 16;
  r.tile = 64;
  r.tile_group_dims = {0};
  DeviceInfo dev;
  dev.sm = 90;
  dev.multiprocessors = 132;
  ValueSizes sizes;
  sizes.reset(*f);
  auto variant = [&](int64_t a, int64_t b1, int64_t c) {
    const int64_t shape[3] = {a, b1, c};
    sizes.set(x, shape);
    return kernel_variant(plan, sizes, dev);
  };
  assert_true(variant(8, 100, 100) == KernelVariant::Main);  // no ungrouped twin
  plan.ungrouped_name = "k_ungrouped";
  assert_true(variant(8, 100, 100) == KernelVariant::Main);
  assert_true(variant(32, 100, 100) == KernelVariant::Main);       // half a tile: grouped
  assert_true(variant(33, 100, 100) == KernelVariant::Ungrouped);
  assert_true(variant(4096, 2, 2) == KernelVariant::Ungrouped);
  r.tile_group_dims = {0, 2};  // both groups: ungrouped only where neither helps
  assert_true(variant(4096, 2, 8) == KernelVariant::Main);
  assert_true(variant(4096, 2, 40) == KernelVariant::Ungrouped);
  assert_true(variant(0, 2, 40) == KernelVariant::Main);  // (empty: no launch either way)
}

// Which kernel a row plan's call takes when the plan has a short-row
// kernel (kernel_variant): rows that need at most a warp at row_items per
// thread take it, longer ones the main, tight or long-row kernel; and its
// launch (short_row_dims): the fewest threads per row, a power of two, and
// short_row_block / that rows per block.
void test_short_rows_variant(void**) {
  int64_t x = -1;
  auto f = negation(2, DType::BF16, &x);
  KernelPlan plan;
  plan.name = "k";
  plan.long_row_name = "k_long";
  plan.tight_name = "k_tight";
  plan.edges_name = "k_edges";
  plan.long_edges_name = "k_long_edges";
  LaunchRule& r = plan.launch;
  r.kind = LaunchRule::Kind::PerRow;
  r.domain_value = x;
  r.reduced_dims = {false, true};
  r.block = 1024;
  r.row_items = 32;  // 4 vectors of 8 bfloat16 per thread
  r.tight_registers = 48;
  r.row_stage_bytes = 2;
  const DeviceInfo dev = h200();
  ValueSizes sizes;
  sizes.reset(*f);
  auto variant = [&](int64_t rows, int64_t row) {
    const int64_t shape[2] = {rows, row};
    sizes.set(x, shape);
    return kernel_variant(plan, sizes, dev);
  };
  assert_true(variant(524288, 128) == KernelVariant::Main);  // no short-row kernel
  plan.short_rows_name = "k_short";
  r.short_row_block = 256;
  assert_true(variant(524288, 128) == KernelVariant::ShortRows);  // 4 threads per row
  assert_true(variant(7, 1) == KernelVariant::ShortRows);
  assert_true(variant(1000, 0) == KernelVariant::ShortRows);  // empty rows: their identities
  assert_true(variant(4096, 1024) == KernelVariant::ShortRows);  // 32 threads: a block of one warp
  assert_true(variant(4096, 1032) == KernelVariant::Main);        // 33 threads
  assert_true(variant(100, 16392) == KernelVariant::Tight);
  assert_true(variant(100, 40000) == KernelVariant::LongRows);
  // A call whose tensors fail the vector checks: the register Edges kernel
  // for rows of a warp's threads, the short-row kernel's scalar twin for
  // rows of fewer (several per warp).
  assert_true(edges_variant(plan, KernelVariant::ShortRows, sizes, dev) == KernelVariant::Edges);
  variant(4096, 520);  // 17 threads of 32 items: 32 per row
  assert_true(edges_variant(plan, KernelVariant::ShortRows, sizes, dev) == KernelVariant::Edges);
  variant(4096, 511);  // 16 threads per row
  assert_true(edges_variant(plan, KernelVariant::ShortRows, sizes, dev) == KernelVariant::ShortRowsScalar);
  r.stream_rows = true;  // a streamed plan's short rows stay short, its others stream
  assert_true(variant(524288, 128) == KernelVariant::ShortRows);
  assert_true(variant(4096, 1032) == KernelVariant::LongRows);
  r.stream_rows = false;
  // The launch: 256 threads, blockDim.x per row, blockDim.y rows.
  LaunchDims d = short_row_dims(r, Sizes{524288, 128}, 1 << 30);
  assert_int_equal(d.block, 4);
  assert_int_equal(d.block_y, 64);
  assert_int_equal(d.grid, 524288 / 64);
  d = short_row_dims(r, Sizes{1000, 100}, 1 << 30);  // 4 threads of 32 (the last partly)
  assert_int_equal(d.block, 4);
  assert_int_equal(d.grid, (1000 + 63) / 64);
  d = short_row_dims(r, Sizes{100003, 3}, 1 << 30);
  assert_int_equal(d.block, 1);
  assert_int_equal(d.block_y, 256);
  assert_int_equal(d.grid, (100003 + 255) / 256);
  d = short_row_dims(r, Sizes{7, 1000}, 1 << 30);  // 32 threads
  assert_int_equal(d.block, 32);
  assert_int_equal(d.block_y, 8);
  assert_int_equal(d.grid, 1);
  d = short_row_dims(r, Sizes{1, 0}, 1 << 30);
  assert_int_equal(d.block, 1);
  assert_int_equal(d.grid, 1);
  assert_int_equal(short_row_dims(r, Sizes{0, 128}, 1 << 30).grid, 0);
  assert_int_equal(short_row_dims(r, Sizes{int64_t{1} << 34, 8}, 1 << 30).grid, r.max_blocks);  // capped: the rows stride
  assert_int_equal(short_row_dims(r, Sizes{1 << 20, 8}, 1000).grid, 1000);
}

// The variant a call launches once its argument words are known
// (call_variant): word 0 stands for a row's width, which the vector checks
// want a multiple of 8 and the Edges kernels' checks a multiple of 2.
// Short rows that fail the vector checks take the short-row kernel's
// scalar twin where a row has fewer than 32 threads (as here, 22 wide) or
// the plan has no Edges kernel (a streamed plan: cross-entropy over 21
// classes took the long-row kernel, a block per row, 50x slower:
// docs/perf-log.md session 40 §4), else the register Edges kernel, and
// without an Edges fit the same twin; Main takes its scalar twin, Wide
// the long-row kernel, LongRows and Cluster stay.
void test_call_variant(void**) {
  int64_t x = -1;
  auto f = negation(2, DType::BF16, &x);
  KernelPlan plan;
  plan.name = "k";
  plan.long_row_name = "k_long";
  plan.edges_name = "k_edges";
  plan.long_edges_name = "k_long_edges";
  plan.short_rows_name = "k_rows";
  plan.scalar_twins = {{"k", "k_scalar"}, {"k_rows", "k_rows_scalar"}};
  ArgCheck eight;
  eight.words = {0};
  eight.modulus = 8;
  ArgCheck two = eight;
  two.modulus = 2;
  plan.vector_checks = {eight};
  plan.edge_checks = {two};
  LaunchRule& r = plan.launch;
  r.kind = LaunchRule::Kind::PerRow;
  r.domain_value = x;
  r.reduced_dims = {false, true};
  r.block = 1024;
  r.row_items = 32;
  r.short_row_block = 256;
  const DeviceInfo dev = h200();
  ValueSizes sizes;
  sizes.reset(*f);
  const int64_t shape[2] = {524288, 22};
  sizes.set(x, shape);
  const auto run = [&](KernelVariant v, int64_t width) { return call_variant(plan, v, sizes, dev, &width); };
  assert_true(run(KernelVariant::ShortRows, 24) == KernelVariant::ShortRows);  // the checks hold
  assert_true(run(KernelVariant::ShortRows, 22) == KernelVariant::ShortRowsScalar);  // one thread per row
  assert_true(run(KernelVariant::ShortRows, 21) == KernelVariant::ShortRowsScalar);  // no Edges fit
  const int64_t warp_rows[2] = {4096, 1000};  // 32 threads per row: the Edges kernel
  sizes.set(x, warp_rows);
  assert_true(run(KernelVariant::ShortRows, 22) == KernelVariant::Edges);
  sizes.set(x, shape);
  assert_true(run(KernelVariant::Main, 21) == KernelVariant::Scalar);
  assert_true(run(KernelVariant::Wide, 21) == KernelVariant::LongRows);
  assert_true(run(KernelVariant::LongRows, 21) == KernelVariant::LongRows);
  assert_true(run(KernelVariant::Cluster, 21) == KernelVariant::Cluster);
  assert_true(run(KernelVariant::LongRows, 22) == KernelVariant::LongEdges);
  assert_true(run(KernelVariant::Ungrouped, 21) == KernelVariant::Ungrouped);  // no vector checks of its own here
  plan.edges_name.clear();  // a streamed plan: no register Edges kernel
  assert_true(run(KernelVariant::ShortRows, 22) == KernelVariant::ShortRowsScalar);
  assert_true(run(KernelVariant::Main, 22) == KernelVariant::LongEdges);
  assert_true(scalar_variant(KernelVariant::ShortRows) == KernelVariant::ShortRowsScalar);
}

// x (f32, rank 2) * s (f32 scalar) -> y
void test_fill_arguments(void**) {
  Builder b;
  int64_t x = b.tensor_input(2, DType::F32);
  int64_t s = b.scalar_input(DType::I64);
  int64_t y = b.op(Op::MUL, {x, s}, {})[0];
  b.output(y, {}, -1);
  auto f = b.finalize();
  Task task = root_task(*f);
  std::vector<ArgSlot> slots = {{ArgSlot::Kind::Data, y, 0},   {ArgSlot::Kind::Data, x, 0},
                                {ArgSlot::Kind::Stride, x, 0}, {ArgSlot::Kind::Stride, y, 1},
                                {ArgSlot::Kind::Extent, y, 1}, {ArgSlot::Kind::Scalar, s, 0},
                                {ArgSlot::Kind::Extent, f->extent_id(0, 0), 0}};
  std::vector<SlotSource> sources = resolve_slots(*f, task, slots);
  float xs[12], ys[12];
  int64_t shape[2] = {3, 4}, xstrides[2] = {1, 3};
  int64_t scalar = (int64_t(1) << 60) + 3;  // not exact as a double
  DLTensor tx{xs, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, shape, xstrides, 8};
  DLTensor ts{&scalar, {kDLCPU, 0}, 0, {kDLInt, 64, 1}, nullptr, nullptr, 0};
  DLTensor ty{ys, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  const DLTensor* ins[2] = {&tx, &ts};
  DLTensor* outs[1] = {&ty};
  ValueSizes sizes;
  sizes.reset(*f);
  sizes.set(x, shape);
  sizes.set(y, shape);
  int64_t args[7];
  fill_arguments(*f, slots, sources, sizes, ins, outs, args);
  assert_int_equal(args[0], reinterpret_cast<intptr_t>(ys));
  assert_int_equal(args[1], reinterpret_cast<intptr_t>(xs) + 8);  // byte_offset applied
  assert_int_equal(args[2], 1);
  assert_int_equal(args[3], 1);  // compact when strides are NULL
  assert_int_equal(args[4], 4);
  assert_int_equal(args[5], scalar);
  assert_int_equal(args[6], 3);  // input extent x.shape[0]
  // Pageable host memory behind a data slot is refused.
  tx.device = {kDLCPU, 0};
  try {
    fill_arguments(*f, slots, sources, sizes, ins, outs, args);
    fail_msg("expected KF_ERR_DEVICE_MISMATCH");
  } catch (const kf::Error& e) {
    assert_int_equal(e.status(), KF_ERR_DEVICE_MISMATCH);
  }
}

// Without a driver, a kDLCUDA input fails cleanly with KF_ERR_NO_DEVICE.
void test_no_driver_reports_no_device(void**) {
  if (driver_available()) {
    skip();
    return;
  }
  std::string why;
  driver_available(&why);
  assert_non_null(std::strstr(why.c_str(), "no CUDA"));
  Builder b;
  int64_t x = b.tensor_input(1, DType::F32);
  int64_t y = b.op(Op::ADD, {x, x}, {})[0];
  b.output(y, {}, -1);
  auto f = b.finalize();
  float data[4] = {};
  int64_t shape[1] = {4};
  DLTensor tx{data, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor ty = tx;
  const DLTensor* ins[1] = {&tx};
  DLTensor* outs[1] = {&ty};
  try {
    Binding binding = bind_inputs(*f, ins, 1);
    execute(*plan_for(*f, binding), binding, ins, outs, ExecOptions{});
    fail_msg("expected KF_ERR_NO_DEVICE");
  } catch (const kf::Error& e) {
    assert_int_equal(e.status(), KF_ERR_NO_DEVICE);
    assert_non_null(std::strstr(e.what(), "no CUDA"));
  }
  for (int i = 0; i < 2; ++i) {  // remembered: the same answer every time
    try {
      cuda_backend().allocate(16, 0, ExecOptions{});
      fail_msg("expected KF_ERR_NO_DEVICE");
    } catch (const kf::Error& e) {
      assert_int_equal(e.status(), KF_ERR_NO_DEVICE);
      assert_non_null(std::strstr(e.what(), "libcuda.so.1"));
    }
  }
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvrtc_loads),
      cmocka_unit_test(test_compiles_cubin_for_sm80_and_sm90),
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_half_headers),
      cmocka_unit_test(test_compile_error_has_log),
      cmocka_unit_test(test_strided_copy_kernels_compile),
      cmocka_unit_test(test_collapse_copy),
      cmocka_unit_test(test_permute_copy_kernels),
      cmocka_unit_test(test_launch_dims),
      cmocka_unit_test(test_cluster_variant),
      cmocka_unit_test(test_windows_fit),
      cmocka_unit_test(test_short_column_variant),
      cmocka_unit_test(test_short_rows_variant),
      cmocka_unit_test(test_call_variant),
      cmocka_unit_test(test_ungrouped_tiles_variant),
      cmocka_unit_test(test_fill_arguments),
      cmocka_unit_test(test_no_driver_reports_no_device),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
