// The pointwise, reduction and normalization schedulers on representative
// layouts (contiguous, transposed, broadcast stride 0, size-1 dims, 64-bit
// indexing, misaligned pointers) and fusions (layernorm, softmax, rmsnorm,
// gelu+bias, transpose+add): the scheduler chosen, the launch rule, the
// vector path where it applies, and a clean NVRTC compile for sm_80/sm_90.
// Also the kernels a matmul pattern falls back to (its bias add, casts and
// activation, when cuBLASLt has no algorithm for the epilogue).
#include "core/define/builder.h"
#include "core/concretize/extent_sets.h"
#include "core/codegen/kernel_plan.h"
#include "core/runtime/cuda/launch.h"
#include "core/text/text_parser.h"
#include "core/segment/matmul_pattern.h"
#include "core/util/error.h"

#include <regex>  // before cmocka.h, whose fail() macro it must not see

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <functional>

#include "tests/nvrtc/codegen_harness.h"

using namespace kf;
using kftest::Inputs;

namespace {

kftest::Batch& batch() {
  static kftest::Batch b;
  return b;
}

// A fusion's schedule (as one task), the kernel emitted from it, and its
// concrete fusion.
struct Generated {
  std::shared_ptr<const ConcreteFusion> concrete;
  KernelSchedule schedule;
  KernelPlan plan;
};

Generated generate(const std::function<void(Builder&)>& define, const Inputs& inputs, const Tuning& tuning = Tuning{}) {
  Builder b;
  define(b);
  auto f = b.finalize();
  auto c = kftest::concretize(f, inputs);
  Generated g{c, kftest::schedule(c, tuning), {}};
  g.plan = emit_kernel(*c, root_task(*f), g.schedule);
  batch().add(g.plan);
  return g;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }
int64_t ci(Builder& b, int64_t v) { return b.constant_i64(v, DType::I64); }

std::function<void(Builder&)> add_2d(DType t) {
  return [t](Builder& b) {
    const int64_t x = b.tensor_input(2, t), y = b.tensor_input(2, t);
    b.output(b.op(Op::ADD, {x, y}, {})[0], {}, -1);
  };
}

void test_pointwise_layouts(void** /*state*/) {
  {  // contiguous: 16-byte vectors
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}));
    in.push_back(kftest::tensor(DType::F32, {8, 64}));
    const Generated g = generate(add_2d(DType::F32), in);
    assert_int_equal(static_cast<int>(g.plan.scheduler), static_cast<int>(SchedulerKind::Pointwise));
    assert_int_equal(static_cast<int>(g.plan.launch.kind), static_cast<int>(LaunchRule::Kind::Elementwise));
    assert_int_equal(g.plan.launch.items_per_thread, 8);  // 2 vectors of 4 per step
    assert_true(contains(g.plan.source, "const kf_vec<float, 4> xv"));
    assert_true(g.concrete->index32);
  }
  {  // float16: 8 lanes, 2 vectors per step
    Inputs in;
    in.push_back(kftest::tensor(DType::F16, {8, 64}));
    in.push_back(kftest::tensor(DType::F16, {8, 64}));
    const Generated g = generate(add_2d(DType::F16), in);
    assert_int_equal(g.plan.launch.items_per_thread, 16);
  }
  {  // column-major inputs: the output follows, the loop runs in that
     // memory order (dim 0 innermost) and everything moves as vectors
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {1, 8}));
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {1, 8}));
    const Generated g = generate(add_2d(DType::F32), in);
    const PointwiseLoop& loop = std::get<PointwiseParams>(g.schedule).loops.at(0);
    assert_true(loop.order == std::vector<size_t>({1, 0}));
    assert_int_equal(loop.vectors.dim, 0);
    assert_int_equal(loop.vectors.inputs.size(), 2);
    assert_true(contains(g.plan.source, "const kf_vec<float, 4> xv"));
  }
  {  // inputs that disagree (one column-major): the output follows the
     // first, the other goes through shared-memory tiles
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}));
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {1, 8}));
    const Generated g = generate(add_2d(DType::F32), in);
    const TiledParams& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 0);
    assert_int_equal(t.dim_b, 1);
    assert_int_equal(t.inputs.size(), 1);
    assert_int_equal(t.inputs[0].value, 1);
    assert_int_equal(t.vectors.inputs.count(0), 1);
  }
  {  // broadcast stride 0 and size-1 dims
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {0, 1}));
    in.push_back(kftest::tensor(DType::F32, {1, 64}));
    const Generated g = generate(add_2d(DType::F32), in);
    assert_true(contains(g.plan.source, "kf_vec"));
  }
  {  // expanded along the lanes (one value as [1, 64], stride 0 innermost,
     // added to [8, 64]): read as a broadcast, not a vector input whose
     // unit-stride test fails every call (seed 2020773240 c0115, 2.76x)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}));
    in.push_back(kftest::tensor(DType::F32, {1, 64}, {64, 0}));
    const Generated g = generate(add_2d(DType::F32), in);
    const PointwiseLoop& loop = std::get<PointwiseParams>(g.schedule).loops.at(0);
    assert_int_equal(loop.vectors.width, 4);
    assert_int_equal(loop.vectors.inputs.count(0), 1);
    assert_int_equal(loop.vectors.inputs.count(1), 0);
    assert_int_equal(g.concrete->input_layouts[1].expanded, 2);  // bit 1: dim 1
  }
  {  // expanded along the rows (a [64] weight as [8, 64], stride 0 outer):
     // a vector input, but the flat vectors (an odd width's path) read it
     // per lane, as they read a broadcast weight (seed 2020773240 c0033,
     // 1.98x); another dim expanded is another plan
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}));
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {0, 1}));
    const Generated g = generate(add_2d(DType::F32), in);
    const PointwiseLoop& loop = std::get<PointwiseParams>(g.schedule).loops.at(0);
    assert_int_equal(loop.vectors.inputs.count(1), 1);
    assert_int_equal(loop.flat.inputs.count(0), 1);
    assert_int_equal(loop.flat.inputs.count(1), 0);
    assert_int_equal(loop.elements.inputs.size(), 2);  // (one-element loads: any layout)
    Inputs other;
    other.push_back(kftest::tensor(DType::F32, {8, 64}));
    other.push_back(kftest::tensor(DType::F32, {8, 64}, {1, 0}));
    const Generated g2 = generate(add_2d(DType::F32), other);
    assert_false(g2.concrete->key.words.empty());
    assert_false(g.concrete->key == g2.concrete->key);
  }
  {  // misaligned inputs: scalar loads, of several positions per thread step
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {}, 4));
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {}, 4));
    const Generated g = generate(add_2d(DType::F32), in);
    assert_false(contains(g.plan.source, "const kf_vec<float, 4>"));
    const auto& p = std::get<PointwiseParams>(g.schedule);
    assert_int_equal(p.loops[0].elements.inputs.size(), 2);
    assert_int_equal(p.scalar_unroll, 8);
    assert_true(contains(g.plan.source, "const kf_vec<float, 1>"));
    assert_true(contains(g.plan.source, "blockDim.x * 8 + threadIdx.x"));
  }
  {  // in place into a misaligned input beside another: no vectors at
     // all, and a grid of 8 positions per thread (the scalar loop's step)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {}, 4));
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {}, 4));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32), y = b.tensor_input(2, DType::F32);
      b.output(b.op(Op::ADD, {x, y}, {})[0], {}, 0);
    }, in);
    const auto& p = std::get<PointwiseParams>(g.schedule);
    assert_int_equal(p.loops[0].vectors.width, 0);
    assert_int_equal(p.loops[0].elements.inputs.size(), 2);
    assert_int_equal(g.plan.launch.items_per_thread, 8);
  }
  {  // more than 2^31 elements: 64-bit indices
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {3, int64_t{1} << 31}));
    in.push_back(kftest::tensor(DType::F32, {1, int64_t{1} << 31}));
    const Generated g = generate(add_2d(DType::F32), in);
    assert_false(g.concrete->index32);
    assert_true(contains(g.plan.source, "const long long e"));
  }
  {  // outputs of different sizes get loops of their own
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}));
    in.push_back(kftest::tensor(DType::F32, {64}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32), y = b.tensor_input(1, DType::F32);
      b.output(b.op(Op::MUL, {x, y}, {})[0], {}, -1);
      b.output(b.op(Op::EXP, {y}, {})[0], {}, -1);
    }, in);
    assert_int_equal(std::get<PointwiseParams>(g.schedule).loops.size(), 2);
    // Two loops: a grid of at most Tuning::grid.waves waves; one loop: one step per thread.
    assert_int_equal(g.plan.launch.grid.waves, Tuning{}.grid.waves);
    Tuning t;
    t.grid.waves = 3;
    t.grid.split_blocks = 77;
    assert_int_equal(generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32), y = b.tensor_input(1, DType::F32);
      b.output(b.op(Op::MUL, {x, y}, {})[0], {}, -1);
      b.output(b.op(Op::EXP, {y}, {})[0], {}, -1);
    }, in, t).plan.launch.grid.waves, 3);
    Inputs two;
    two.push_back(kftest::tensor(DType::F32, {8, 64}));
    two.push_back(kftest::tensor(DType::F32, {8, 64}));
    assert_int_equal(generate(add_2d(DType::F32), two, t).plan.launch.grid.waves, 0);
    Inputs one;
    one.push_back(kftest::tensor(DType::F32, {4096, 64}));
    // A column sum's partials grid follows Tuning::grid.split_blocks.
    const Generated col = generate([](Builder& b) {
      b.output(b.op(Op::SUM, {b.tensor_input(2, DType::F32)}, {1, 0})[0], {}, -1);
    }, one, t);
    assert_true(col.plan.launch.kind == LaunchRule::Kind::ColumnReduce);
    assert_int_equal(col.plan.launch.grid.split_blocks, 77);
  }
}

void test_fusions(void** /*state*/) {
  {  // gelu(x + bias)
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {16, 128}));
    in.push_back(kftest::tensor(DType::BF16, {128}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::BF16), bias = b.tensor_input(1, DType::BF16);
      b.output(b.op(Op::GELU, {b.op(Op::ADD, {x, bias}, {})[0]}, {})[0], {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.scheduler), static_cast<int>(SchedulerKind::Pointwise));
  }
  {  // transpose + add
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 32}));
    in.push_back(kftest::tensor(DType::F32, {32, 64}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32), y = b.tensor_input(2, DType::F32);
      b.output(b.op(Op::ADD, {b.op(Op::PERMUTE, {x}, {1, 0})[0], y}, {})[0], {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.scheduler), static_cast<int>(SchedulerKind::Pointwise));
  }
  {  // softmax over the last dim
    Inputs in;
    in.push_back(kftest::tensor(DType::F16, {32, 1000}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F16);
      const int64_t m = b.op(Op::MAX, {x}, {1, 1})[0];
      const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
      const int64_t s = b.op(Op::SUM, {e}, {1, 1})[0];
      b.output(b.op(Op::DIV, {e, s}, {})[0], {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.scheduler), static_cast<int>(SchedulerKind::Normalization));
    assert_int_equal(static_cast<int>(g.plan.launch.kind), static_cast<int>(LaunchRule::Kind::PerRow));
    assert_true(g.plan.launch.reduced_dims == std::vector<bool>({false, true}));
    assert_int_equal(std::get<RowParams>(g.schedule).rows.phases.size(), 2);
  }
  {  // layernorm with chained reductions: mean, then var of x - mean
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 4, 256}));
    in.push_back(kftest::tensor(DType::F32, {256}));
    in.push_back(kftest::tensor(DType::F32, {256}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(3, DType::F32), w = b.tensor_input(1, DType::F32),
                    bias = b.tensor_input(1, DType::F32);
      const int64_t mean = b.op(Op::MEAN, {x}, {1, 2})[0];
      const int64_t d = b.op(Op::SUB, {x, mean}, {})[0];
      const int64_t var = b.op(Op::MEAN, {b.op(Op::MUL, {d, d}, {})[0]}, {1, 2})[0];
      const int64_t eps = b.constant_f64(1e-5, DType::F64);
      const int64_t r = b.op(Op::RSQRT, {b.op(Op::ADD, {var, eps}, {})[0]}, {})[0];
      const int64_t y = b.op(Op::ADD, {b.op(Op::MUL, {b.op(Op::MUL, {d, r}, {})[0], w}, {})[0], bias}, {})[0];
      b.output(y, {}, -1);
      b.output(mean, {}, -1);
      b.output(r, {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.scheduler), static_cast<int>(SchedulerKind::Normalization));
    assert_int_equal(std::get<RowParams>(g.schedule).rows.phases.size(), 2);
  }
  {  // several row reductions in one phase: those of one type and op share
     // one block reduction (kf_many), the others reduce alone
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 1024}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32);
      const int64_t sq = b.op(Op::MUL, {x, x}, {})[0], nx = b.op(Op::NEG, {x}, {})[0];
      const int64_t xi = b.op(Op::CAST, {x}, {static_cast<int64_t>(DType::I32)})[0];
      const int64_t xi2 = b.op(Op::MUL, {xi, xi}, {})[0];
      for (int64_t v : {x, sq}) b.output(b.op(Op::SUM, {v}, {1, 1})[0], {}, -1);
      for (int64_t v : {x, nx}) b.output(b.op(Op::MAX, {v}, {1, 1})[0], {}, -1);
      for (int64_t v : {xi, xi2}) b.output(b.op(Op::SUM, {v}, {1, 1})[0], {}, -1);
      b.output(b.op(Op::PROD, {xi}, {1, 1})[0], {}, -1);
    }, in);
    assert_int_equal(std::get<RowParams>(g.schedule).rows.phases.size(), 1);
    assert_true(contains(g.plan.source, "(kf_many<float, 2>{{"));
    assert_true(contains(g.plan.source, "kf_each<kf_sum_op>()"));
    assert_true(contains(g.plan.source, "kf_each<kf_max_op>()"));
    assert_true(contains(g.plan.source, "(kf_many<long long, 2>{{"));
    assert_true(contains(g.plan.source, "kf_each<kf_isum_op>()"));
    assert_true(contains(g.plan.source, ", kf_iprod_op());"));  // the one product alone
  }
  {  // layernorm with var_mean (Welford), no keepdim, broadcast back
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {64, 768}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::BF16);
      auto vm = b.op(Op::VAR_MEAN, {x}, {0, 0, 1});
      auto bc = [&](int64_t v) { return b.op(Op::BROADCAST_IN_DIM, {v, ci(b, -1), ci(b, 768)}, {0})[0]; };
      const int64_t r = b.op(Op::RSQRT, {b.op(Op::ADD, {vm[0], b.constant_f64(1e-5, DType::F64)}, {})[0]}, {})[0];
      b.output(b.op(Op::MUL, {b.op(Op::SUB, {x, bc(vm[1])}, {})[0], bc(r)}, {})[0], {}, -1);
    }, in);
    assert_true(contains(g.plan.source, "kf_welford"));
  }
  {  // rmsnorm
    Inputs in;
    in.push_back(kftest::tensor(DType::F16, {128, 4096}));
    in.push_back(kftest::tensor(DType::F16, {4096}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F16), w = b.tensor_input(1, DType::F16);
      const int64_t ms = b.op(Op::MEAN, {b.op(Op::MUL, {x, x}, {})[0]}, {1, 1})[0];
      const int64_t r = b.op(Op::RSQRT, {b.op(Op::ADD, {ms, b.constant_f64(1e-6, DType::F64)}, {})[0]}, {})[0];
      b.output(b.op(Op::MUL, {b.op(Op::MUL, {x, r}, {})[0], w}, {})[0], {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.scheduler), static_cast<int>(SchedulerKind::Normalization));
    assert_int_equal(std::get<RowParams>(g.schedule).rows.phases.size(), 1);
  }
  // rmsnorm and layernorm as frameworks write them: the simplify stage
  // (core/simplify) leaves no powf, a square is one multiply of a register
  // by itself, 1/sqrt is one rsqrtf, and nothing divides by a register.
  const std::regex square(R"(const float v[0-9]+ = \((v[0-9]+) \* \1\);)");
  const std::regex division(R"(\(v[0-9]+ / v[0-9]+\))");
  for (DType t : {DType::F32, DType::BF16}) {  // rmsnorm: pow(x, 2), sqrt, reciprocal
    Inputs in;
    in.push_back(kftest::tensor(t, {64, 4096}));
    in.push_back(kftest::tensor(t, {4096}));
    const Generated g = generate([t](Builder& b) {
      const int64_t x = b.tensor_input(2, t), w = b.tensor_input(1, t);
      const int64_t xf = b.op(Op::CAST, {x}, {static_cast<int64_t>(DType::F32)})[0];
      const int64_t ms = b.op(Op::MEAN, {b.op(Op::POW, {xf, b.constant_f64(2, DType::F64)}, {})[0]}, {1, 1})[0];
      const int64_t s = b.op(Op::SQRT, {b.op(Op::ADD, {ms, b.constant_f64(1e-6, DType::F64)}, {})[0]}, {})[0];
      const int64_t y = b.op(Op::MUL, {b.op(Op::MUL, {xf, b.op(Op::RECIPROCAL, {s}, {})[0]}, {})[0], w}, {})[0];
      b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(t)})[0], {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.scheduler), static_cast<int>(SchedulerKind::Normalization));
    assert_false(contains(g.plan.source, "powf("));
    assert_false(contains(g.plan.source, "= sqrtf("));  // the sqrt left without readers is not computed
    assert_false(contains(g.plan.source, "/ sqrtf("));
    assert_true(contains(g.plan.source, "= rsqrtf(v"));
    assert_true(std::regex_search(g.plan.source, square));
    assert_false(std::regex_search(g.plan.source, division));
  }
  {  // layernorm: (x - mean) / sqrt(mean(pow(x - mean, 2)) + eps)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 1024}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32);
      const int64_t d = b.op(Op::SUB, {x, b.op(Op::MEAN, {x}, {1, 1})[0]}, {})[0];
      const int64_t var = b.op(Op::MEAN, {b.op(Op::POW, {d, b.constant_f64(2, DType::F64)}, {})[0]}, {1, 1})[0];
      const int64_t sd = b.op(Op::SQRT, {b.op(Op::ADD, {var, b.constant_f64(1e-5, DType::F64)}, {})[0]}, {})[0];
      b.output(b.op(Op::DIV, {d, sd}, {})[0], {}, -1);
    }, in);
    assert_false(contains(g.plan.source, "powf("));
    assert_false(contains(g.plan.source, "/ sqrtf("));
    assert_true(contains(g.plan.source, "= rsqrtf(v"));
    assert_true(std::regex_search(g.plan.source, square));
    assert_false(std::regex_search(g.plan.source, division));
  }
  {  // column sums with an epilogue, 64-bit indices, int input
    Inputs in;
    in.push_back(kftest::tensor(DType::I32, {int64_t{1} << 20, 4096}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::I32);
      const int64_t s = b.op(Op::SUM, {x}, {0, 0})[0];
      b.output(b.op(Op::MUL, {s, ci(b, 2)}, {})[0], {}, -1);
      b.output(b.op(Op::MAX, {x}, {1, 0})[0], {}, -1);
    }, in);
    assert_true(std::holds_alternative<ColumnParams>(g.schedule));  // both reduce dim 0, the inner dim is kept
  }
}

// The performance schedules: rows cached in registers (block chosen per
// call), column reductions (two kernels, scratch words), transposes staged
// through shared-memory tiles, broadcast inputs moved as vectors.
void test_fast_paths(void** /*state*/) {
  {  // softmax over a contiguous row: the cached path and its fallback
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {16, 8192}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::BF16);
      const int64_t m = b.op(Op::MAX, {x}, {1, 1})[0];
      const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
      b.output(b.op(Op::DIV, {e, b.op(Op::SUM, {e}, {1, 1})[0]}, {})[0], {}, -1);
    }, in);
    assert_int_equal(g.plan.launch.row_items, 32);  // 4 vectors of 8
    assert_int_equal(g.plan.launch.block, 1024);
    // The register path and its streaming fallback are twin kernels, and
    // so are the short-row kernel and its own; the host checks the width
    // (a multiple of 8) and the input's vectors.
    assert_int_equal(g.plan.scalar_twins.size(), 2);
    const std::string& twin = g.plan.scalar_of(g.plan.name);
    assert_string_equal(g.plan.scalar_twins[0].kernel.c_str(), g.plan.name.c_str());
    assert_string_equal(g.plan.scalar_twins[1].kernel.c_str(), g.plan.short_rows_name.c_str());
    assert_true(contains(g.plan.units[g.plan.unit_of(g.plan.scalar_of(g.plan.short_rows_name))].source, "kf_group_reduce"));
    assert_false(contains(g.plan.units[g.plan.unit_of(g.plan.name)].source, "j += blockDim.x"));
    assert_true(contains(g.plan.units[g.plan.unit_of(twin)].source, "j += blockDim.x"));
    assert_true(g.plan.vector_checks.size() >= 3);  // width, the input's alignment and unit stride
    // The same register path under 48 registers (tight); no wide kernel
    // (8 vectors of 8 would be 64 elements per thread).
    assert_int_equal(g.plan.launch.tight_registers, 48);
    assert_true(contains(g.plan.units[g.plan.unit_of(g.plan.tight_name)].source,
                         "KF_MAXNREG(1024, 48) " + g.plan.tight_name + "("));
    assert_int_equal(g.plan.launch.wide_row_items, 0);
    assert_true(g.plan.wide_name.empty());
  }
  {  // the same in float32: a wide kernel, 8 vectors of 4 (the long-row path stages the row)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {16, 8192}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32);
      const int64_t m = b.op(Op::MAX, {x}, {1, 1})[0];
      const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
      b.output(b.op(Op::DIV, {e, b.op(Op::SUM, {e}, {1, 1})[0]}, {})[0], {}, -1);
    }, in);
    assert_int_equal(g.plan.launch.row_items, 16);
    assert_int_equal(g.plan.launch.wide_row_items, 32);
    assert_true(g.plan.launch.row_stage_bytes > 0);
    assert_false(contains(g.plan.units[g.plan.unit_of(g.plan.wide_name)].source, "j += blockDim.x"));
  }
  {  // layernorm rows: with split-row kernels in a source of their own
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {16, 8192}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::BF16);
      const int64_t xf = b.op(Op::CAST, {x}, {static_cast<int64_t>(DType::F32)})[0];
      const auto vm = b.op(Op::VAR_MEAN, {xf}, {1, 0, 1});
      const int64_t xc = b.op(Op::SUB, {xf, vm[1]}, {})[0];
      b.output(b.op(Op::MUL, {xc, b.op(Op::RSQRT, {vm[0]}, {})[0]}, {})[0], {}, -1);
    }, in);
    assert_int_equal(g.plan.split_rows.size(), 1);
    const KernelPlan& split = g.plan.split_rows[0];
    assert_int_equal(static_cast<int>(split.launch.kind), static_cast<int>(LaunchRule::Kind::SplitRows));
    assert_int_equal(split.launch.accumulators, 2);  // a Welford triple
    assert_int_equal(split.launch.result_words, 2);  // var, mean
    assert_false(split.finish_name.empty());
    assert_int_equal(split.later.size(), 1);
    assert_true(split.later[0].grid == KernelPlan::LaterKernel::Grid::Epilogue);
    assert_true(contains(split.source, "kf_block_reduce"));
    batch().add(split);
  }
  {  // a whole-tensor mean of x * x at an odd element offset: no vectors,
     // yet split-row kernels (element loop only), so that one row is not one block
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 257, 11007}, {}, 12));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(3, DType::F32);
      const int64_t sq = b.op(Op::MUL, {x, x}, {})[0];
      b.output(b.op(Op::MEAN, {sq}, {1, 0, 1, 2})[0], {}, -1);
    }, in);
    assert_int_equal(g.plan.launch.row_items, 0);
    assert_int_equal(g.plan.split_rows.size(), 1);
    const KernelPlan& split = g.plan.split_rows[0];
    assert_false(contains(split.source, "kfvec"));  // no vector branch to take
    assert_true(contains(split.source, "q += blockDim.x"));
    // One row of 181 M elements: the split kernels, whatever the block.
    const std::vector<int64_t> domain = {64, 257, 11007};
    assert_true(kf::cuda::prefer_split_rows(g.plan.launch, domain, 132));
    const std::vector<int64_t> short_row = {1, 1, 2048};
    assert_false(kf::cuda::prefer_split_rows(g.plan.launch, short_row, 132));
    batch().add(split);
  }
  {  // softmax over dim 0: a column normalization in two phases
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {300, 1000}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::BF16);
      const int64_t m = b.op(Op::MAX, {x}, {1, 0})[0];
      const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
      b.output(b.op(Op::DIV, {e, b.op(Op::SUM, {e}, {1, 0})[0]}, {})[0], {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.launch.kind), static_cast<int>(LaunchRule::Kind::ColumnReduce));
    assert_int_equal(g.plan.launch.result_words, 2);
    assert_int_equal(g.plan.later.size(), 3);  // _p1, _f1, _epilogue
    assert_true(g.plan.later[2].grid == KernelPlan::LaterKernel::Grid::Epilogue);
    assert_true(std::get<ColumnParams>(g.schedule).online.empty());  // bfloat16 math: no online pair
    batch().add(g.plan);
  }
  {  // the same in float32 math: the max and the sum in one online phase
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {300, 1000}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.op(Op::CAST, {b.tensor_input(2, DType::BF16)}, {static_cast<int64_t>(DType::F32)})[0];
      const int64_t m = b.op(Op::MAX, {x}, {1, 0})[0];
      const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
      const int64_t y = b.op(Op::DIV, {e, b.op(Op::SUM, {e}, {1, 0})[0]}, {})[0];
      b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(DType::BF16)})[0], {}, -1);
    }, in);
    const ColumnParams& col = std::get<ColumnParams>(g.schedule);
    assert_int_equal(col.online.size(), 1);
    assert_int_equal(col.rows.phases.size(), 1);
    assert_int_equal(col.rows.phases[0].size(), 2);
    assert_int_equal(g.plan.launch.accumulators, 2);  // the max's and the sum's partials
    assert_int_equal(g.plan.launch.result_words, 2);
    assert_int_equal(g.plan.later.size(), 1);  // the epilogue only
    const std::string& partials = g.plan.units[g.plan.unit_of(g.plan.name)].source;
    assert_true(contains(partials, "kf_online_rescale("));
    assert_true(contains(partials, "expf("));  // the sum steps, after the step's rescale
    assert_true(contains(partials, "kf_online_op()"));
    assert_true(contains(g.plan.units[g.plan.unit_of(g.plan.finish_name)].source, "kf_online_sum("));
    batch().add(g.plan);
  }
  {  // sum over dim 0: column reduction
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {300, 1000}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::BF16);
      b.output(b.op(Op::SUM, {x}, {0, 0})[0], {}, -1);
    }, in);
    assert_int_equal(static_cast<int>(g.plan.launch.kind), static_cast<int>(LaunchRule::Kind::ColumnReduce));
    assert_int_equal(g.plan.launch.extra_args, 2);
    assert_int_equal(g.plan.launch.tile_cols, 256);
    assert_true(contains(g.plan.source, g.plan.finish_name));
  }
  {  // x^T + z: one tiled input
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 128}));
    in.push_back(kftest::tensor(DType::F32, {128, 64}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32), z = b.tensor_input(2, DType::F32);
      const int64_t t = b.op(Op::PERMUTE, {x}, {1, 0})[0];
      b.output(b.op(Op::ADD, {t, z}, {})[0], {}, -1);
    }, in);
    assert_int_equal(std::get<TiledParams>(g.schedule).inputs.size(), 1);
    assert_true(contains(g.plan.source, "__shared__ float kf_tile"));
  }
  {  // x * (1 + scale) + shift with shift [2, 4096] transposed, broadcast
     // over the rows: no tiles (they would be 64 wide over a dim of 2); the
     // plain loop reads shift through the caches.
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {2, 63, 256}));
    in.push_back(kftest::tensor(DType::F32, {2, 256}, {1, 2}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(3, DType::F32), shift = b.tensor_input(2, DType::F32);
      const int64_t sh = b.op(Op::UNSQUEEZE, {shift}, {1})[0];
      b.output(b.op(Op::ADD, {x, sh}, {})[0], {}, -1);
    }, in);
    assert_false(std::holds_alternative<TiledParams>(g.schedule));
    assert_false(contains(g.plan.source, "kf_tile"));
  }
  {  // swiglu of a column-major gate_up: gate and up are slices (no plain
     // index of gate_up), so the tiles hold the two slices, filled with
     // threads along the rows; the contiguous dy is read as usual. (The
     // output is pinned row-major, as a caller's would be.)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {256, 512}, {1, 256}));
    in.push_back(kftest::tensor(DType::F32, {256, 256}));
    int64_t gate = -1, up = -1, dy = -1;
    const Generated g = generate([&](Builder& b) {
      const int64_t gu = b.tensor_input(2, DType::F32);
      dy = b.tensor_input(2, DType::F32);
      gate = b.op(Op::SLICE, {gu}, {1, 0, 256, 1})[0];
      up = b.op(Op::SLICE, {gu}, {1, 256, INT64_MAX, 1})[0];
      const int64_t h = b.op(Op::MUL, {b.op(Op::SILU, {gate}, {})[0], up}, {})[0];
      b.output(b.op(Op::MUL, {h, dy}, {})[0], {0, 1}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.inputs.size(), 2);
    assert_int_equal(t.dim_a, 0);
    assert_int_equal(t.dim_b, 1);
    for (const TiledInput& ti : t.inputs) assert_true(ti.value == gate || ti.value == up);
    assert_int_equal(t.vectors.inputs.count(dy), 1);
    assert_true(contains(g.plan.source, "__shared__ float kf_tile"));
  }
  {  // merge heads: [B, H, S, D] laid out along S, permuted to [B, S, H, D]
     // and reshaped to [B, S, H*D]: the reshape's output is tiled (its
     // input has no plain index), with dims a = S and b = H*D.
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {2, 4, 100, 32}, {12800, 3200, 1, 100}));
    int64_t merged = -1;
    const Generated g = generate([&](Builder& b) {
      const int64_t x = b.tensor_input(4, DType::BF16);
      const int64_t xs = b.op(Op::MUL, {b.op(Op::CAST, {x}, {static_cast<int64_t>(DType::F32)})[0], b.constant_f64(0.5, DType::F32)}, {})[0];
      const int64_t p = b.op(Op::PERMUTE, {xs}, {0, 2, 1, 3})[0];
      merged = b.op(Op::RESHAPE, {p, ci(b, 2), ci(b, 100), ci(b, -1)}, {})[0];
      b.output(b.op(Op::CAST, {merged}, {static_cast<int64_t>(DType::BF16)})[0], {}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.inputs.size(), 1);
    assert_int_equal(t.inputs[0].value, merged);
    assert_int_equal(t.dim_a, 1);
    assert_int_equal(t.dim_b, 2);
  }
  {  // an embedding stored column-major (tokens fastest): the gathered
     // rows are a computed tile (the index does not count as a second
     // input), filled along the hidden dim a, stored along the tokens b
     // (seed 1940430775 c0008: a plain loop read one element a table row)
    Inputs in;
    in.push_back(kftest::tensor(DType::F16, {500, 256}));
    in.push_back(kftest::tensor(DType::I64, {300}));
    int64_t rows = -1;
    const Generated g = generate([&](Builder& b) {
      const int64_t table = b.tensor_input(2, DType::F16), tokens = b.tensor_input(1, DType::I64);
      rows = b.op(Op::INDEX_SELECT, {table, tokens}, {0})[0];
      b.output(rows, {1, 0}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.inputs.size(), 1);
    assert_int_equal(t.inputs[0].value, rows);
    assert_int_equal(t.dim_a, 1);
    assert_int_equal(t.dim_b, 0);
  }
  for (const int from_inputs : {0, 1, 2, 3}) {
     // a dropout-residual stored with the sequence innermost (seed
     // 1056028048 c0000, c0049). Phase 2 along the outputs' fast dim
     // (Tuning::tiled_b_from_inputs 0, and 1 and 3: the tiles serve every read):
     // the 1- and 2-byte inputs' tiles hold their storage elements (4
     // tiles in 26 KB; as floats 3 did not fit the 40 KB), and u [S, H],
     // broadcast over the batch by the add, joins the tiles (last: its map
     // has no batch index). At 2 (fewer tiles win), phase 2 along the
     // inputs' fast dim, the output through one staged tile, the inputs
     // read as vectors (one tile, not four).
    Tuning tuning;
    tuning.tiled_b_from_inputs = from_inputs;
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {4, 256, 192}));
    in.push_back(kftest::tensor(DType::Bool, {4, 256, 192}));
    in.push_back(kftest::tensor(DType::BF16, {256, 192}));
    in.push_back(kftest::tensor(DType::I8, {4, 256, 192}));
    int64_t u = -1;
    const Generated g = generate([&](Builder& b) {
      const auto f32 = static_cast<int64_t>(DType::F32);
      const int64_t x = b.op(Op::CAST, {b.tensor_input(3, DType::BF16)}, {f32})[0];
      const int64_t keep = b.tensor_input(3, DType::Bool);
      u = b.tensor_input(2, DType::BF16);
      const int64_t q = b.op(Op::CAST, {b.tensor_input(3, DType::I8)}, {f32})[0];
      const int64_t z = b.op(Op::WHERE, {keep, x, b.constant_f64(0.0, DType::F32)}, {})[0];
      const int64_t h = b.op(Op::ADD, {z, b.op(Op::CAST, {u}, {f32})[0]}, {})[0];
      b.output(b.op(Op::ADD, {h, q}, {})[0], {0, 2, 1}, -1);
    }, in, tuning);
    const auto& t = std::get<TiledParams>(g.schedule);
    if (from_inputs == 2) {
      assert_int_equal(t.dim_a, 1);
      assert_int_equal(t.dim_b, 2);
      assert_true(t.inputs.empty());
      assert_true(t.outputs_staged == t.outputs);
      assert_true(t.outputs_b().empty());
      assert_int_equal(t.vectors.width, 8);
      assert_int_equal(t.vectors.inputs.size(), 4);  // (u too: along b, broadcast over the batch)
      assert_true(t.vectors.outputs.empty());
      assert_true(contains(g.plan.source, "__shared__ float kf_otile"));
      assert_false(contains(g.plan.source, "kf_tile"));
      continue;
    }
    assert_int_equal(t.dim_a, 2);
    assert_int_equal(t.dim_b, 1);
    assert_int_equal(t.inputs.size(), 4);
    assert_int_equal(t.inputs.back().value, u);  // (joins last)
    int bytes = 0;
    for (const TiledInput& ti : t.inputs) {
      assert_true(ti.element_bytes == dtype_size(g.concrete->fusion->value(ti.value).dtype));
      bytes += ti.bytes(t.tile);
    }
    assert_int_equal(bytes, 2 * 64 * 66 * 2 + 2 * 64 * 68);
    assert_true(contains(g.plan.source, "__shared__ unsigned short kf_tile"));
    assert_true(contains(g.plan.source, "[64][66];"));
    assert_true(contains(g.plan.source, "__shared__ unsigned char kf_tile"));
    assert_true(contains(g.plan.source, "__shared__ signed char kf_tile"));
    assert_true(contains(g.plan.source, "[64][68];"));
    assert_true(contains(g.plan.source, "kf_bf2f(kf_tile"));
  }
  {  // a shift [2, H] stored transposed (the 2 innermost), broadcast by
     // broadcast_in_dim over the rows of x [2, S, H] row-major: the
     // broadcast value is a computed tile filled from the shift, so the
     // shift itself does not join the tiles as well (its tile would be
     // filled and never read: NVRTC warned of an unused tile)
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {2, 100, 64}));
    in.push_back(kftest::tensor(DType::BF16, {2, 64}, {1, 2}));
    int64_t sb_value = -1;
    const Generated g = generate([&](Builder& b) {
      const int64_t x = b.tensor_input(3, DType::BF16), shift = b.tensor_input(2, DType::BF16);
      const int64_t sb = b.op(Op::BROADCAST_IN_DIM, {shift, ci(b, 2), ci(b, 100), ci(b, 64)}, {0, 2})[0];
      sb_value = sb;
      b.output(b.op(Op::ADD, {x, sb}, {})[0], {}, -1);
    }, in);
    (void)sb_value;
    assert_true(std::get_if<TiledParams>(&g.schedule) == nullptr);
  }
  for (const int from_inputs : {0, 1, 3}) {
     // a cat whose first operand is computed from a slice at an offset of
     // a column-major input. Along the output's fast dim
     // (Tuning::tiled_b_from_inputs 0): the tile holds the slice, filled
     // only inside its part of the cat, its load inside the bound (the
     // statement of a computed value's load would otherwise run past the
     // input). By default: the gate half, read across the input's memory
     // beside that tile, makes the plan along the input's fast dim cheaper
     // (the output staged, no input tile); at 3 too (a computed tile).
    Tuning tuning;
    tuning.tiled_b_from_inputs = from_inputs;
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {200, 256}, {1, 200}));
    int64_t up = -1;
    const Generated g = generate([&](Builder& b) {
      const int64_t gu = b.tensor_input(2, DType::F32);
      up = b.op(Op::SLICE, {gu}, {1, 128, INT64_MAX, 1})[0];
      const int64_t gate = b.op(Op::SLICE, {gu}, {1, 0, 128, 1})[0];
      const int64_t su = b.op(Op::SILU, {up}, {})[0];
      b.output(b.op(Op::CAT, {su, gate}, {1})[0], {0, 1}, -1);
    }, in, tuning);
    const auto& t = std::get<TiledParams>(g.schedule);
    if (from_inputs != 0) {
      assert_int_equal(t.dim_b, 0);
      assert_true(t.inputs.empty());
      assert_true(t.outputs_staged == t.outputs);
      continue;
    }
    assert_int_equal(t.inputs.size(), 1);
    assert_int_equal(t.inputs[0].value, up);
    assert_true(contains(g.plan.source, "[k][lx] = 0;"));
  }
  for (const int from_inputs : {0, 1, 2, 3}) {
     // swiglu of a contiguous fused gate_up [B, S, 2H] into outputs stored
     // (H, B, S) outermost first (corpus seed 1177032527 c0141). Phase 2
     // along the output's fast dim (Tuning::tiled_b_from_inputs 0, and 1 and 3:
     // the tiles serve every read): the halves are slices along the
     // input's innermost dim, so the tiles hold them (a = H, the slices'
     // dim; b = S), filled coalesced at their shifts. At 2, phase 2 along
     // the input's fast dim (b = H), the halves read as vectors at their
     // shifts, the output staged (a = S).
    Tuning tuning;
    tuning.tiled_b_from_inputs = from_inputs;
    Inputs in;
    in.push_back(kftest::tensor(DType::F16, {2, 100, 192}));
    int64_t gate = -1, up = -1;
    const Generated g = generate([&](Builder& b) {
      const int64_t gu = b.op(Op::CAST, {b.tensor_input(3, DType::F16)}, {static_cast<int64_t>(DType::F32)})[0];
      gate = b.op(Op::SLICE, {gu}, {2, 0, 96, 1})[0];
      up = b.op(Op::SLICE, {gu}, {2, 96, INT64_MAX, 1})[0];
      const int64_t y = b.op(Op::MUL, {b.op(Op::SILU, {gate}, {})[0], up}, {})[0];
      b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(DType::F16)})[0], {2, 0, 1}, -1);
    }, in, tuning);
    const auto& t = std::get<TiledParams>(g.schedule);
    if (from_inputs == 2) {
      assert_true(t.inputs.empty());
      assert_int_equal(t.dim_a, 1);
      assert_int_equal(t.dim_b, 2);
      assert_true(t.outputs_staged == t.outputs);
      assert_int_equal(t.vectors.width, 8);
      assert_int_equal(t.vectors.inputs.size(), 1);  // gate_up, at the halves' shifts
      assert_true(std::any_of(t.vectors.inputs.begin()->second.begin(), t.vectors.inputs.begin()->second.end(), is_shifted));
      continue;
    }
    assert_int_equal(t.inputs.size(), 2);
    assert_int_equal(t.dim_a, 2);
    assert_int_equal(t.dim_b, 1);
    for (const TiledInput& ti : t.inputs) assert_true(ti.value == gate || ti.value == up);
  }
  for (const int from_inputs : {0, 1, 3}) {
     // a gated activation's backward, its two gradients concatenated into
     // a [T, 2F] result stored column-major (corpus seed 1414814702 c0067):
     // phase 2 along the result's fast dim (0) reads dy through the cat's
     // second part and gate_up through the gate half across their memory
     // (the tiles hold dy and the up half at one map each); along the
     // inputs' fast dim (1, and 3: the outputs' plan tiles a slice) it
     // reads every input along its memory, the result through a staged tile
    Tuning tuning;
    tuning.tiled_b_from_inputs = from_inputs;
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {256, 512}));
    in.push_back(kftest::tensor(DType::F32, {256, 256}));
    const Generated g = generate([&](Builder& b) {
      const int64_t gu = b.tensor_input(2, DType::F32), dy = b.tensor_input(2, DType::F32);
      const int64_t gate = b.op(Op::SLICE, {gu}, {1, 0, 256, 1})[0], up = b.op(Op::SLICE, {gu}, {1, 256, INT64_MAX, 1})[0];
      const int64_t dgate = b.op(Op::MUL, {b.op(Op::MUL, {dy, up}, {})[0], b.op(Op::SIGMOID, {gate}, {})[0]}, {})[0];
      const int64_t dup = b.op(Op::MUL, {dy, b.op(Op::SILU, {gate}, {})[0]}, {})[0];
      b.output(b.op(Op::CAT, {dgate, dup}, {1})[0], {1, 0}, -1);
    }, in, tuning);
    const auto& t = std::get<TiledParams>(g.schedule);
    if (from_inputs == 0) {
      assert_int_equal(t.dim_b, 0);
      assert_false(t.inputs.empty());
      assert_true(t.outputs_staged.empty());
      continue;
    }
    assert_int_equal(t.dim_a, 0);
    assert_int_equal(t.dim_b, 1);
    assert_true(t.inputs.empty());
    assert_true(t.outputs_staged == t.outputs);
    assert_int_equal(t.vectors.width, 4);
    assert_int_equal(t.vectors.inputs.size(), 2);  // gate_up and dy, at the cat's and the slices' shifts
    assert_true(contains(g.plan.source, "__shared__ float kf_otile"));
  }
  {
    // a half rotation (rope) of x [S, H, D] (D innermost) into a result
    // stored with S innermost, c and s [S, D] broadcast over the heads:
    // x * c + cat(-x2, x1) * s. Along the result's fast dim (S) the tile
    // holds x itself; x's rotated halves are read beside it. Mode 1 runs
    // phase 2 along x's fast dim (D: fewer bytes across memory by its
    // count), the result staged; mode 3 keeps the tile of x, which strains
    // nothing (half-rotations lost 0.58-0.89x under mode 1, perf-log.md
    // session 49 §3).
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {64, 4, 128}));
    in.push_back(kftest::tensor(DType::F32, {64, 128}));
    in.push_back(kftest::tensor(DType::F32, {64, 128}));
    const auto rope = [](Builder& b) {
      const auto f32 = static_cast<int64_t>(DType::F32);
      const int64_t x = b.op(Op::CAST, {b.tensor_input(3, DType::BF16)}, {f32})[0];
      const int64_t c = b.op(Op::UNSQUEEZE, {b.tensor_input(2, DType::F32)}, {1})[0];
      const int64_t sn = b.op(Op::UNSQUEEZE, {b.tensor_input(2, DType::F32)}, {1})[0];
      const int64_t x1 = b.op(Op::SLICE, {x}, {2, 0, 64, 1})[0], x2 = b.op(Op::SLICE, {x}, {2, 64, INT64_MAX, 1})[0];
      const int64_t r = b.op(Op::CAT, {b.op(Op::NEG, {x2}, {})[0], x1}, {2})[0];
      const int64_t y = b.op(Op::ADD, {b.op(Op::MUL, {x, c}, {})[0], b.op(Op::MUL, {r, sn}, {})[0]}, {})[0];
      b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(DType::BF16)})[0], {1, 2, 0}, -1);
    };
    std::vector<TiledParams> plans;
    for (const int from_inputs : {0, 1, 3}) {
      Tuning tuning;
      tuning.tiled_b_from_inputs = from_inputs;
      plans.push_back(std::get<TiledParams>(generate(rope, in, tuning).schedule));
    }
    assert_int_equal(plans[0].dim_a, 2);
    assert_int_equal(plans[0].dim_b, 0);
    assert_int_equal(plans[0].inputs[0].value, 0);  // x (the second tile: c, not full-size)
    assert_int_equal(plans[1].dim_b, 2);
    assert_true(plans[1].inputs.empty());
    assert_true(plans[1].outputs_staged == plans[1].outputs);
    assert_true(plans[2] == plans[0]);
  }
  {  // sigmoid(x + bias) and its pre-activation into outputs in two orders
     // (corpus seed 1177032527 c0086): x column-major, y row-major (b = 1),
     // pre column-major like x: phase 1 writes pre along a (outputs_a),
     // phase 2 writes y only, in vectors
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {256, 192}, {1, 256}));
    in.push_back(kftest::tensor(DType::BF16, {192}));
    int64_t y = -1, pre = -1;
    const Generated g = generate([&](Builder& b) {
      const auto f32 = static_cast<int64_t>(DType::F32), bf16 = static_cast<int64_t>(DType::BF16);
      const int64_t x = b.op(Op::CAST, {b.tensor_input(2, DType::BF16)}, {f32})[0];
      const int64_t bias = b.op(Op::CAST, {b.tensor_input(1, DType::BF16)}, {f32})[0];
      const int64_t h = b.op(Op::ADD, {x, bias}, {})[0];
      y = b.op(Op::CAST, {b.op(Op::SIGMOID, {h}, {})[0]}, {bf16})[0];
      pre = b.op(Op::CAST, {h}, {bf16})[0];
      b.output(y, {0, 1}, -1);
      b.output(pre, {1, 0}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 0);
    assert_int_equal(t.dim_b, 1);
    assert_true(t.outputs == std::vector<int64_t>({y, pre}));
    assert_true(t.outputs_a == std::vector<int64_t>({pre}));
    assert_true(t.vectors.outputs == std::vector<int64_t>({y}));
    assert_true(contains(describe(g.schedule), "outputs_a=[" + std::to_string(pre) + "]"));
    // the phase-1 loop, threads along a: (a0 + lx, b0 + k)
    assert_true(contains(g.plan.source, "const int i0 = a0 + lx;"));
    assert_true(contains(g.plan.source, "const int i1 = b0 + k;"));
  }
  {  // the same with both outputs row-major: phase 2 writes both
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {256, 192}, {1, 256}));
    in.push_back(kftest::tensor(DType::BF16, {192}));
    const Generated g = generate([&](Builder& b) {
      const auto f32 = static_cast<int64_t>(DType::F32), bf16 = static_cast<int64_t>(DType::BF16);
      const int64_t x = b.op(Op::CAST, {b.tensor_input(2, DType::BF16)}, {f32})[0];
      const int64_t bias = b.op(Op::CAST, {b.tensor_input(1, DType::BF16)}, {f32})[0];
      const int64_t h = b.op(Op::ADD, {x, bias}, {})[0];
      b.output(b.op(Op::CAST, {b.op(Op::SIGMOID, {h}, {})[0]}, {bf16})[0], {0, 1}, -1);
      b.output(b.op(Op::CAST, {h}, {bf16})[0], {0, 1}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_true(t.outputs_a.empty());
    assert_int_equal(t.vectors.outputs.size(), 2);
  }
  {  // a slice of a contiguous input is read as usual: no tiles
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {256, 512}));
    const Generated g = generate([](Builder& b) {
      const int64_t gu = b.tensor_input(2, DType::F32);
      const int64_t gate = b.op(Op::SLICE, {gu}, {1, 0, 256, 1})[0], up = b.op(Op::SLICE, {gu}, {1, 256, INT64_MAX, 1})[0];
      b.output(b.op(Op::MUL, {gate, up}, {})[0], {}, -1);
    }, in);
    assert_false(std::holds_alternative<TiledParams>(g.schedule));
  }
}

// Short rows (a head_dim of 128, rows of up to a warp's row_items): the
// register path again with several rows per block, each row's group of
// blockDim.x threads reducing by shuffles (kf_group_reduce) and storing
// only when it has a row of its own (kf_live), for softmax, rmsnorm with a
// weight, var_mean (layernorm) and a plain sum; the same vector checks as
// the main kernel; taken for short rows only. Inner-outer and streamed
// plans have none. (test_compile compiles them for sm_80 and sm_90.)
void test_short_rows(void** /*state*/) {
  const int64_t f32 = static_cast<int64_t>(DType::F32), bf16 = static_cast<int64_t>(DType::BF16);
  auto softmax = [&](Builder& b) {
    const int64_t x = b.tensor_input(2, DType::BF16);
    const int64_t xf = b.op(Op::CAST, {x}, {f32})[0];
    const int64_t m = b.op(Op::MAX, {xf}, {1, 1})[0];
    const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {xf, m}, {})[0]}, {})[0];
    b.output(b.op(Op::CAST, {b.op(Op::DIV, {e, b.op(Op::SUM, {e}, {1, 1})[0]}, {})[0]}, {bf16})[0], {}, -1);
  };
  auto rmsnorm = [&](Builder& b) {
    const int64_t x = b.tensor_input(2, DType::BF16), w = b.tensor_input(1, DType::BF16);
    const int64_t xf = b.op(Op::CAST, {x}, {f32})[0], wf = b.op(Op::CAST, {w}, {f32})[0];
    const int64_t ms = b.op(Op::MEAN, {b.op(Op::MUL, {xf, xf}, {})[0]}, {1, 1})[0];
    const int64_t r = b.op(Op::RSQRT, {b.op(Op::ADD, {ms, b.constant_f64(1e-6, DType::F64)}, {})[0]}, {})[0];
    b.output(b.op(Op::CAST, {b.op(Op::MUL, {b.op(Op::MUL, {xf, r}, {})[0], wf}, {})[0]}, {bf16})[0], {}, -1);
  };
  auto layernorm = [&](Builder& b) {
    const int64_t x = b.tensor_input(2, DType::BF16);
    const int64_t xf = b.op(Op::CAST, {x}, {f32})[0];
    const auto vm = b.op(Op::VAR_MEAN, {xf}, {1, 0, 1});
    const int64_t xc = b.op(Op::SUB, {xf, vm[1]}, {})[0];
    const int64_t r = b.op(Op::RSQRT, {b.op(Op::ADD, {vm[0], b.constant_f64(1e-5, DType::F64)}, {})[0]}, {})[0];
    b.output(b.op(Op::CAST, {b.op(Op::MUL, {xc, r}, {})[0]}, {bf16})[0], {}, -1);
  };
  auto var = [&](Builder& b) {  // a row-shaped output only
    const int64_t x = b.tensor_input(2, DType::BF16);
    b.output(b.op(Op::VAR, {b.op(Op::CAST, {x}, {f32})[0]}, {0, 1, 1})[0], {}, -1);
  };
  auto sum_exp = [&](Builder& b) {  // c0188's class: sum(exp(min(x, cap)))
    const int64_t x = b.tensor_input(2, DType::F16);
    const int64_t xf = b.op(Op::CAST, {x}, {f32})[0];
    const int64_t e = b.op(Op::EXP, {b.op(Op::MINIMUM, {xf, b.constant_f64(10, DType::F64)}, {})[0]}, {})[0];
    b.output(b.op(Op::SUM, {e}, {0, 1})[0], {}, -1);
  };
  struct Case {
    const char* name;
    std::function<void(Builder&)> define;
    bool weight;
    DType dtype;
    bool row_output_only;
  };
  const Case cases[] = {{"softmax", softmax, false, DType::BF16, false},
                        {"rmsnorm", rmsnorm, true, DType::BF16, false},
                        {"layernorm", layernorm, false, DType::BF16, false},
                        {"var", var, false, DType::BF16, true},
                        {"sum_exp", sum_exp, false, DType::F16, true}};
  for (const Case& c : cases) {
    Inputs in;
    in.push_back(kftest::tensor(c.dtype, {4096, 128}));
    if (c.weight) in.push_back(kftest::tensor(DType::BF16, {128}));
    const Generated g = generate(c.define, in);
    const KernelPlan& plan = g.plan;
    assert_true(std::holds_alternative<RowParams>(g.schedule));
    if (plan.short_rows_name.empty()) fail_msg("%s: no short-row kernel", c.name);
    assert_int_equal(plan.launch.short_row_block, 256);
    const std::string& unit = plan.units[plan.unit_of(plan.short_rows_name)].source;
    const std::string kernel = unit.substr(unit.find("__global__"));
    assert_true(contains(kernel, "__launch_bounds__(256, 4) " + plan.short_rows_name + "(const KfArgs args)"));
    assert_true(contains(kernel, "kf_group_reduce("));
    assert_false(contains(kernel, "kf_block_reduce("));
    assert_false(contains(kernel, "__syncthreads"));
    assert_true(contains(kernel, "kf_rb += (long long)gridDim.x * blockDim.y"));
    assert_true(contains(kernel, c.row_output_only ? "if (threadIdx.x == 0 && kf_live)" : "if (kf_live)"));
    assert_false(contains(kernel, "j += blockDim.x"));  // the register path alone
    // The main kernel is unchanged: one row per block, block reductions.
    const std::string& main = plan.units[plan.unit_of(plan.name)].source;
    assert_true(contains(main, "kf_block_reduce("));
    assert_false(contains(main.substr(main.find("__global__")), "kf_live"));
    // Taken for rows of at most a warp at row_items each.
    const int64_t items = plan.launch.row_items;
    assert_true(cuda::takes_short_rows(plan.launch, std::vector<int64_t>{4096, 128}));
    assert_true(cuda::takes_short_rows(plan.launch, std::vector<int64_t>{7, 32 * items}));
    assert_false(cuda::takes_short_rows(plan.launch, std::vector<int64_t>{4096, 32 * items + 8}));
    assert_false(cuda::takes_short_rows(plan.launch, std::vector<int64_t>{64, 8192}));
  }
  {  // rows streamed in one pass (log-sum-exp: online max and sum): long
     // rows stream, short ones take the short-row kernel
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {4096, 128}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32);
      const int64_t m = b.op(Op::MAX, {x}, {1, 1})[0];
      const int64_t s = b.op(Op::SUM, {b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0]}, {1, 1})[0];
      b.output(b.op(Op::ADD, {b.op(Op::LOG, {s}, {})[0], m}, {})[0], {}, -1);
    }, in);
    const RowParams& row = std::get<RowParams>(g.schedule);
    assert_true(row.stream_rows);
    assert_false(g.plan.short_rows_name.empty());
    assert_true(g.plan.launch.short_row_block > 0);
    assert_true(cuda::takes_short_rows(g.plan.launch, std::vector<int64_t>{4096, 128}));
    assert_false(cuda::takes_short_rows(g.plan.launch, std::vector<int64_t>{64, 8192}));
    assert_true(cuda::takes_long_rows(g.plan.launch, std::vector<int64_t>{64, 8192}));
  }
}

// A row plan's kernels are the schedule's (RowParams::kernels, from
// Tuning): codegen emits exactly those, with the planned budgets and
// blocks, and no other.
void test_row_kernels_follow_the_plan(void** /*state*/) {
  auto softmax = [&](Builder& b) {  // float32 rows: staged, 16 elements per thread
    const int64_t x = b.tensor_input(2, DType::F32);
    const int64_t m = b.op(Op::MAX, {x}, {1, 1})[0];
    const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
    b.output(b.op(Op::DIV, {e, b.op(Op::SUM, {e}, {1, 1})[0]}, {})[0], {}, -1);
  };
  const auto kernel_head = [](const KernelPlan& plan, const std::string& name) {
    const std::string& unit = plan.units[plan.unit_of(name)].source;
    const size_t at = unit.find("__global__");
    return unit.substr(at, unit.find('(', unit.find(name, at)) - at);
  };
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {4096, 1000}));
  {  // the defaults
    const Generated g = generate(softmax, in);
    const RowParams& row = std::get<RowParams>(g.schedule);
    const RowKernels& k = row.kernels;
    assert_true(k.scalar_twin && k.long_rows && k.edges && k.long_edges && k.cluster);
    assert_int_equal(k.tight_registers, Tuning{}.row_tight_registers);
    assert_int_equal(k.wide_vectors_per_thread, 2 * row.vectors_per_thread);
    assert_int_equal(k.short_rows_block, 256);
    assert_int_equal(k.short_rows_min_blocks, 4);
    assert_int_equal(k.split_block, 256);
    assert_int_equal(k.split_col_threads, ColumnParams{}.col_threads);
    assert_true(contains(kernel_head(g.plan, g.plan.tight_name), "KF_MAXNREG(" + std::to_string(row.block) + ", 48)"));
    assert_int_equal(g.plan.launch.tight_registers, 48);
    assert_int_equal(g.plan.launch.wide_row_items, row.vectors.width * k.wide_vectors_per_thread);
    assert_true(contains(kernel_head(g.plan, g.plan.short_rows_name), "__launch_bounds__(256, 4)"));
    for (const std::string* name : {&g.plan.long_row_name, &g.plan.wide_name, &g.plan.edges_name,
                                    &g.plan.long_edges_name, &g.plan.cluster_name})
      assert_false(name->empty());
    assert_int_equal(g.plan.split_rows.size(), 1);
    assert_int_equal(g.plan.split_rows[0].launch.block, 256);
    assert_true(contains(kernel_head(g.plan.split_rows[0], g.plan.split_rows[0].name), "__launch_bounds__(256)"));
  }
  {  // other settings: the kernels follow; those set to 0 are not emitted
    Tuning t;
    t.row_tight_registers = 0;
    t.row_wide_items = 8;  // (fewer than the wide kernel would hold)
    t.row_short_block = 130;  // (a multiple of a warp is taken: 128)
    t.row_short_min_blocks = 2;
    t.split_row_block = 512;
    t.row_cluster_max = 0;
    const Generated g = generate(softmax, in, t);
    const RowKernels& k = std::get<RowParams>(g.schedule).kernels;
    assert_int_equal(k.tight_registers, 0);
    assert_int_equal(k.wide_vectors_per_thread, 0);
    assert_false(k.cluster);
    assert_true(g.plan.tight_name.empty() && g.plan.wide_name.empty() && g.plan.cluster_name.empty());
    assert_int_equal(g.plan.launch.tight_registers, 0);
    assert_int_equal(g.plan.launch.wide_row_items, 0);
    assert_int_equal(k.short_rows_block, 128);
    assert_int_equal(g.plan.launch.short_row_block, 128);
    assert_true(contains(kernel_head(g.plan, g.plan.short_rows_name), "__launch_bounds__(128, 2)"));
    assert_int_equal(g.plan.split_rows.at(0).launch.block, 512);
  }
  {  // a sum over every dim: the split rows' finish takes one row per block
    Inputs all;
    all.push_back(kftest::tensor(DType::F32, {64, 1000}));
    const Generated g = generate([&](Builder& b) {
      b.output(b.op(Op::SUM, {b.tensor_input(2, DType::F32)}, {0, 1, 0})[0], {}, -1);
    }, all);
    if (const RowParams* row = std::get_if<RowParams>(&g.schedule)) {
      assert_int_equal(row->kernels.split_col_threads, 1);
      assert_int_equal(g.plan.split_rows.at(0).launch.finish_cols, 1);
    } else {
      fail_msg("a sum over every dim: expected a row plan");
    }
  }
  {  // inner-outer (layernorm backward's weight gradient): none of the
     // register path's twins, no split rows
    Inputs io;
    io.push_back(kftest::tensor(DType::F32, {256, 1024}));
    io.push_back(kftest::tensor(DType::F32, {256, 1024}));
    const Generated g = generate([&](Builder& b) {
      const int64_t dy = b.tensor_input(2, DType::F32), x = b.tensor_input(2, DType::F32);
      b.output(b.op(Op::SUM, {dy}, {1, 1})[0], {}, -1);
      b.output(b.op(Op::SUM, {b.op(Op::MUL, {dy, x}, {})[0]}, {0, 0})[0], {}, -1);
    }, io);
    const RowParams* row = std::get_if<RowParams>(&g.schedule);
    if (row == nullptr || !row->has_outer()) fail_msg("expected an inner-outer plan");
    const RowKernels& k = row->kernels;
    assert_false(k.scalar_twin || k.cluster || k.tight_registers > 0 || k.short_rows_block > 0 || k.split_block > 0);
    assert_true(g.plan.tight_name.empty() && g.plan.short_rows_name.empty() && g.plan.split_rows.empty());
    assert_true(g.plan.scalar_twins.empty());
  }
}

// Layernorm backward: row sums for grad input and column sums for grad
// weight and bias in one inner-outer kernel plus its finishing kernel.
// Rows of any width (the Edges kernel): the row-varying tensors move as
// vectors from each row's first aligned element for y, x and the weight
// (read by every row, so misaligned by a row's shift) each at its own
// shift (kf_vload_any); the host checks neither x's rows against y's nor
// that the width is a multiple of the vector.
void test_edge_kernel(void** /*state*/) {
  Inputs in;
  in.push_back(kftest::tensor(DType::BF16, {16, 1001}));
  in.push_back(kftest::tensor(DType::BF16, {1001}));
  int64_t x = -1, w = -1, y = -1;
  const Generated g = generate([&](Builder& b) {
    x = b.tensor_input(2, DType::BF16);
    w = b.tensor_input(1, DType::BF16);
    const int64_t xf = b.op(Op::CAST, {x}, {static_cast<int64_t>(DType::F32)})[0];
    const int64_t wf = b.op(Op::CAST, {w}, {static_cast<int64_t>(DType::F32)})[0];
    const int64_t m = b.op(Op::MAX, {xf}, {1, 1})[0];
    const int64_t yf = b.op(Op::MUL, {b.op(Op::SUB, {xf, m}, {})[0], wf}, {})[0];
    y = b.op(Op::CAST, {yf}, {static_cast<int64_t>(DType::BF16)})[0];
    b.output(y, {}, -1);
  }, in);
  const RowParams& row = std::get<RowParams>(g.schedule);
  assert_int_equal(row.vectors.inputs.size(), 2);  // x and w
  assert_int_equal(row.edge_vectors.width, 8);
  assert_int_equal(row.edge_vectors.inputs.size(), 2);
  assert_true(row.edge_vectors.inputs.contains(x) && row.edge_vectors.inputs.contains(w));
  assert_int_equal(row.edge_vectors.outputs.size(), 1);
  assert_int_equal(g.plan.edge_row_pad, 16 + 14);  // 16-byte stage rows, and the shift
  // The register path: whole vectors of the aligned middle, and threads
  // below the head + tail count holding one element of them each.
  const std::string& held = g.plan.units[g.plan.unit_of(g.plan.edges_name)].source;
  assert_true(contains(held, "__launch_bounds__(1024, 1) " + g.plan.edges_name + "(const KfArgs args)"));
  assert_true(contains(held, " + 8 <= n"));
  assert_true(contains(held, "const bool eok"));
  assert_false(contains(held, "blockDim.x)"));  // no loop over the row
  assert_true(contains(held, "? kf_vload_any<kf_vec<unsigned short, 8>>("));  // x and w at their shifts
  assert_false(contains(held, "? *(const kf_vec<unsigned short, 8>*)("));
  // The long-row kernel: vector steps over the middle, then element steps.
  const std::string& long_rows = g.plan.units[g.plan.unit_of(g.plan.long_edges_name)].source;
  assert_true(contains(long_rows, "jv < kfnv"));
  assert_true(contains(long_rows, "je < kfne"));
  // The checks: no extent multiple, no Congruent pair (y, the one output,
  // is the reference), and of x and w only element alignment and a unit
  // stride along the row.
  for (const ArgCheck& c : g.plan.edge_checks) {
    assert_true(c.kind != ArgCheck::Kind::Congruent);
    for (int word : c.words) {
      const ArgSlot& a = g.plan.args[static_cast<size_t>(word)];
      assert_true(a.kind != ArgSlot::Kind::Extent || c.kind == ArgCheck::Kind::Equal);
      if (a.value == x || a.value == w)
        assert_true((a.kind == ArgSlot::Kind::Data && c.kind == ArgCheck::Kind::Multiple && c.modulus == 2) ||
                    (a.kind == ArgSlot::Kind::Stride && c.kind == ArgCheck::Kind::Equal));
    }
  }
  // Congruent: two words alike up to the modulus.
  const ArgCheck same_remainder{ArgCheck::Kind::Congruent, {0, 1}, 0, 8};
  const int64_t alike[2] = {1001, 1009}, unlike[2] = {1001, 1002};
  assert_true(holds(same_remainder, alike));
  assert_false(holds(same_remainder, unlike));
}

// Softmax over rows of a misaligned x (an element offset: x is no vector
// input, read per element): the reductions' computed inputs are evaluated
// for every lane before the lane guard, so each per-element read is bounded
// by the row's length. Unbounded, the lanes past the last row's end read
// past x's allocation (compute-sanitizer on the GPU differential test's
// unaligned rows, session 30).
void test_lanes_past_the_row(void** /*state*/) {
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {300, 1000}, {1001, 1}, 4));  // one element in
  const Generated g = generate([&](Builder& b) {
    const int64_t x = b.tensor_input(2, DType::F32);
    const int64_t m = b.op(Op::MAX, {x}, {1, 1})[0];
    const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
    const int64_t s = b.op(Op::SUM, {e}, {1, 1})[0];
    b.output(b.op(Op::DIV, {e, s}, {})[0], {}, -1);
  }, in);
  const RowParams& row = std::get<RowParams>(g.schedule);
  assert_true(row.vectors.inputs.empty());
  const std::string& main = g.plan.units[g.plan.unit_of(g.plan.name)].source;
  assert_true(contains(main, "(i1_0 + 3) < n"));
  assert_true(contains(main, " : (float)0)"));
}

// The pointwise scalar twin (calls that fail the vector checks: an odd
// width) moves x and y as flat vectors of consecutive positions where both
// are dense, the bias per lane; the vector kernel is unchanged.
void test_flat_vectors(void** /*state*/) {
  Inputs in;
  in.push_back(kftest::tensor(DType::BF16, {16, 1001}));
  in.push_back(kftest::tensor(DType::BF16, {1001}));
  int64_t x = -1, bias = -1;
  const Generated g = generate([&](Builder& b) {
    x = b.tensor_input(2, DType::BF16);
    bias = b.tensor_input(1, DType::BF16);
    b.output(b.op(Op::GELU, {b.op(Op::ADD, {x, bias}, {})[0]}, {})[0], {}, -1);
  }, in);
  // The schedule's flat plan: x (read at every position), not the bias
  // (read per lane); both in the vector plan of the aligned kernel.
  const PointwiseLoop& loop = std::get<PointwiseParams>(g.schedule).loops.at(0);
  assert_int_equal(loop.vectors.inputs.size(), 2);
  assert_int_equal(loop.flat.inputs.size(), 1);
  assert_true(loop.flat.inputs.contains(x) && !loop.flat.inputs.contains(bias));
  assert_int_equal(loop.flat.width, loop.vectors.width);
  assert_int_equal(g.plan.scalar_twins.size(), 1);
  const std::string& twin = g.plan.units[g.plan.unit_of(g.plan.scalar_twins[0].scalar)].source;
  const std::string& main = g.plan.units[g.plan.unit_of(g.plan.name)].source;
  assert_true(contains(twin, "const bool kfflat"));
  assert_true(contains(twin, "for (long long q = kffirst"));  // the positions the vectors leave
  assert_true(contains(twin, "kf_vec<unsigned short, 8>"));
  assert_false(contains(main, "kfflat"));

  // A bool mask broadcast over dim 1 sets the vector plan's width (16
  // lanes: 16 bytes of bool, 32 of float16); the flat vectors read it per
  // lane, so their width is the float16 tensors' 8 (seed 243917705 c0177:
  // 112 registers at 16 lanes, 1.20x at 8; docs/perf-log.md session 44).
  Inputs masked;
  masked.push_back(kftest::tensor(DType::F16, {2, 3, 5, 7}));
  masked.push_back(kftest::tensor(DType::Bool, {2, 1, 5, 7}));
  int64_t scores = -1, mask = -1;
  const Generated gm = generate([&](Builder& b) {
    scores = b.tensor_input(4, DType::F16);
    mask = b.tensor_input(4, DType::Bool);
    const int64_t neg = b.op(Op::NEG, {scores}, {})[0];
    b.output(b.op(Op::WHERE, {mask, scores, neg}, {})[0], {}, -1);
  }, masked);
  const PointwiseLoop& ml = std::get<PointwiseParams>(gm.schedule).loops.at(0);
  assert_int_equal(ml.vectors.width, 16);
  assert_true(ml.vectors.inputs.contains(mask));
  assert_true(ml.flat.inputs.contains(scores) && !ml.flat.inputs.contains(mask));
  assert_int_equal(ml.flat.width, 8);

  // Every tensor misaligned alike: y = gelu(x) + r written in place into
  // x, x and r at an element offset of 3 (6 bytes), rows of 1001. No
  // vector plan (drop_misaligned), but flat vectors of x, r and y, which
  // start past a head where y is aligned (Tuning::pointwise_flat_head),
  // in the loop's one kernel (seed 1857099843 c0154: a cross-entropy
  // backward in place into logits at offset 3). With the rule off, none.
  for (const int head : {1, 0}) {
    Inputs off;
    off.push_back(kftest::tensor(DType::BF16, {16, 1001}, {}, 6));
    off.push_back(kftest::tensor(DType::BF16, {16, 1001}, {}, 6));
    Tuning tuning;
    tuning.pointwise_flat_head = head;
    int64_t xi = -1, ri = -1;
    const Generated go = generate([&](Builder& b) {
      xi = b.tensor_input(2, DType::BF16);
      ri = b.tensor_input(2, DType::BF16);
      b.output(b.op(Op::ADD, {b.op(Op::GELU, {xi}, {})[0], ri}, {})[0], {}, 0);
    }, off, tuning);
    const PointwiseLoop& ol = std::get<PointwiseParams>(go.schedule).loops.at(0);
    assert_int_equal(ol.vectors.width, 0);
    assert_true(go.plan.scalar_twins.empty());
    const std::string& src = go.plan.units[go.plan.unit_of(go.plan.name)].source;
    if (head == 0) {
      assert_int_equal(ol.flat.width, 0);
      assert_false(contains(src, "kfhead"));
      continue;
    }
    assert_int_equal(ol.flat.width, 8);
    assert_true(ol.flat.inputs.contains(xi) && ol.flat.inputs.contains(ri));
    assert_int_equal(ol.flat.outputs.size(), 1);
    assert_true(contains(src, "const long long kfhead"));
    assert_true(contains(src, "kf_vec<unsigned short, 8>"));
    assert_true(contains(src, "q < kfhead"));  // the head's positions, one per thread step
  }
}

// The atomic path's updates per thread and step (ScatterParams::
// update_unroll, decided in scatter.cpp): index_reduce's slice updates
// take Tuning::scatter_update_unroll (their targets and values loaded
// before any is applied), a scatter's element updates one; the launch's
// grid follows (KernelPlan::ScatterKernels::update_unroll).
void test_scatter_update_unroll(void** /*state*/) {
  for (const bool slices : {true, false}) {
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {40, 64}));
    in.push_back(kftest::tensor(DType::I64, slices ? std::vector<int64_t>{300} : std::vector<int64_t>{300, 64}));
    in.push_back(kftest::tensor(DType::F32, {300, 64}));
    const Generated g = generate([&](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32);
      const int64_t index = b.tensor_input(slices ? 1 : 2, DType::I64);
      const int64_t src = b.tensor_input(2, DType::F32);
      const std::vector<int64_t> attrs = {0, static_cast<int64_t>(ScatterReduce::Sum), 1, 0};
      b.output(b.op(slices ? Op::INDEX_REDUCE : Op::SCATTER, {x, index, src}, attrs)[0], {}, -1);
    }, in);
    const ScatterParams& p = std::get<ScatterParams>(g.schedule);
    assert_false(p.sorted);
    assert_int_equal(p.update_unroll, slices ? Tuning{}.scatter_update_unroll : 1);
    assert_int_equal(g.plan.scatter.update_unroll, p.update_unroll);
    const std::string& update = g.plan.units[g.plan.unit_of(g.plan.scatter.update)].source;
    assert_true(contains(update, "qb += " + std::to_string(p.update_unroll) + " * "));
  }
}

// Tensors whose rows cannot start a vector (a padded row stride, an odd
// offset: InputLayout's row_alignment and alignment, in the key) are read
// or written per lane inside the vector loop (drop_misaligned), so the
// others keep their vectors; where they move more bytes than the vector
// tensors, the plan has no vectors at all.
void test_misaligned_vectors(void** /*state*/) {
  {  // z = x + y + w, y's rows padded by one: y per lane, x and w in vectors
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 1024}));
    in.push_back(kftest::tensor(DType::F32, {64, 1024}, {1025, 1}));
    in.push_back(kftest::tensor(DType::F32, {64, 1024}));
    int64_t x = -1, y = -1, w = -1;
    const Generated g = generate([&](Builder& b) {
      x = b.tensor_input(2, DType::F32);
      y = b.tensor_input(2, DType::F32);
      w = b.tensor_input(2, DType::F32);
      b.output(b.op(Op::ADD, {b.op(Op::ADD, {x, y}, {})[0], w}, {})[0], {}, -1);
    }, in);
    assert_int_equal(g.concrete->input_layouts[1].row_alignment, 1);
    assert_int_equal(g.concrete->input_layouts[0].row_alignment, 16);
    const PointwiseLoop& loop = std::get<PointwiseParams>(g.schedule).loops.at(0);
    assert_int_equal(loop.vectors.width, 4);
    assert_true(loop.vectors.inputs.contains(x) && loop.vectors.inputs.contains(w) && !loop.vectors.inputs.contains(y));
    assert_int_equal(loop.vectors.outputs.size(), 1);
  }
  {  // dense rows of any width: 16 (odd and even extents share a key); rows padded by 8: 8
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 1023}));
    in.push_back(kftest::tensor(DType::F32, {64, 1023}, {1032, 1}));
    const Generated g = generate(add_2d(DType::F32), in);
    assert_int_equal(g.concrete->input_layouts[0].row_alignment, 16);
    assert_int_equal(g.concrete->input_layouts[1].row_alignment, 8);
  }
  // p2 = p - (g + m) written in place into p at an offset of two floats
  // (8-byte aligned: no 16-byte vector starts there): p is read and
  // written per lane, g and m (8 bytes per element) stay vectors.
  const auto step = [](bool with_m) {
    return [with_m](Builder& b) {
      const int64_t p = b.tensor_input(2, DType::F32), g = b.tensor_input(2, DType::F32);
      int64_t u = g;
      if (with_m) u = b.op(Op::ADD, {g, b.tensor_input(2, DType::F32)}, {})[0];
      b.output(b.op(Op::SUB, {p, u}, {})[0], {}, 0);
    };
  };
  {
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 1024}, {}, 8));
    in.push_back(kftest::tensor(DType::F32, {64, 1024}));
    in.push_back(kftest::tensor(DType::F32, {64, 1024}));
    const Generated g = generate(step(true), in);
    const PointwiseLoop& loop = std::get<PointwiseParams>(g.schedule).loops.at(0);
    assert_int_equal(loop.vectors.width, 4);
    assert_int_equal(loop.vectors.inputs.size(), 2);
    assert_true(loop.vectors.outputs.empty());
  }
  {  // without m: p's 8 bytes per element against g's 4: the scalar loop
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 1024}, {}, 8));
    in.push_back(kftest::tensor(DType::F32, {64, 1024}));
    const Generated g = generate(step(false), in);
    assert_int_equal(std::get<PointwiseParams>(g.schedule).loops.at(0).vectors.width, 0);
  }
  // An rmsnorm's float32 weight broadcast over the rows, at an offset of
  // one or two floats (4 or 8 bytes): a vector input loaded at any
  // alignment (VectorPlan::any_aligned, kf_vload_any), its run-time check
  // element-aligned, and the width x's, bfloat16, whose loads stay plain:
  // the weight moves 32 bytes per lane group (size_past_weights). At
  // offset 0 a plain vector input at x's width too: x alone would load 32
  // bytes a thread at the weight's 4 lanes (Tuning::row_thread_bytes, 64);
  // with that rule off (0), 4 lanes.
  // y = x * rsqrt(mean(x^2)) * w from bfloat16 x and float32 w, stored as
  // `out`; x and w: the inputs' value ids.
  const auto rmsnorm = [](DType out, int64_t* x, int64_t* w) {
    return [=](Builder& b) {
      *x = b.tensor_input(2, DType::BF16);
      *w = b.tensor_input(1, DType::F32);
      const int64_t xf = b.op(Op::CAST, {*x}, {static_cast<int64_t>(DType::F32)})[0];
      const int64_t ms = b.op(Op::MEAN, {b.op(Op::MUL, {xf, xf}, {})[0]}, {1, 1})[0];
      const int64_t y = b.op(Op::MUL, {b.op(Op::MUL, {xf, b.op(Op::RSQRT, {ms}, {})[0]}, {})[0], *w}, {})[0];
      b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(out)})[0], {}, -1);
    };
  };
  std::vector<size_t> any_loads;
  const auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  for (const size_t offset : {size_t{0}, size_t{4}, size_t{8}}) {
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {64, 1024}));
    in.push_back(kftest::tensor(DType::F32, {1024}, {}, offset));
    int64_t x = -1, w = -1;
    const Generated g = generate(rmsnorm(DType::BF16, &x, &w), in);
    const VectorPlan& vp = std::get<RowParams>(g.schedule).vectors;
    assert_int_equal(vp.width, 8);
    assert_true(vp.inputs.contains(x) && vp.inputs.contains(w));
    assert_true(vp.any_aligned == (offset == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{w}));
    any_loads.push_back(count(g.plan.source, "kf_vload_any<kf_vec<float, 8>>"));
    batch().add(g.plan);
    Tuning off;
    off.row_thread_bytes = 0;
    const Generated narrow = generate(rmsnorm(DType::BF16, &x, &w), in, off);
    assert_int_equal(std::get<RowParams>(narrow.schedule).vectors.width, offset == 0 ? 4 : 8);
  }
  // (at offset 0 only the Edges kernels load the weight at any alignment,
  // each row at its own shift)
  assert_true(any_loads[1] > any_loads[0] && any_loads[2] == any_loads[1]);
  {  // x + residual, both bfloat16 rows, beside the aligned float32 weight:
     // 64 bytes a thread at 4 lanes already, so 4 (at 8 the add+rmsnorm
     // kernels spilled: 0.85x, perf-log.md session 46)
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {64, 1024}));
    in.push_back(kftest::tensor(DType::BF16, {64, 1024}));
    in.push_back(kftest::tensor(DType::F32, {1024}));
    const Generated g = generate(
        [](Builder& b) {
          const int64_t x = b.tensor_input(2, DType::BF16), res = b.tensor_input(2, DType::BF16);
          const int64_t w = b.tensor_input(1, DType::F32);
          const int64_t h = b.op(Op::ADD, {b.op(Op::CAST, {x}, {static_cast<int64_t>(DType::F32)})[0],
                                           b.op(Op::CAST, {res}, {static_cast<int64_t>(DType::F32)})[0]},
                                 {})[0];
          const int64_t ms = b.op(Op::MEAN, {b.op(Op::MUL, {h, h}, {})[0]}, {1, 1})[0];
          const int64_t y = b.op(Op::MUL, {b.op(Op::MUL, {h, b.op(Op::RSQRT, {ms}, {})[0]}, {})[0], w}, {})[0];
          b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(DType::BF16)})[0], {}, -1);
        },
        in);
    const RowParams& rp = std::get<RowParams>(g.schedule);
    assert_int_equal(rp.vectors_per_thread, 4);
    assert_int_equal(rp.vectors.width, 4);
    assert_int_equal(rp.vectors.inputs.size(), 3);
  }
  {  // x at an odd offset too (no row input among the vectors) and an fp8
     // output: the width stays the weight's (4), not the 1-byte output's 16
     // (which ran two fp8 norms at half speed: perf-log.md session 45 §3)
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {64, 1024}, {}, 2));
    in.push_back(kftest::tensor(DType::F32, {1024}, {}, 4));
    int64_t x = -1, w = -1;
    const Generated g = generate(rmsnorm(DType::F8E4M3, &x, &w), in);
    const VectorPlan& vp = std::get<RowParams>(g.schedule).vectors;
    assert_int_equal(vp.width, 4);
    assert_true(!vp.inputs.contains(x) && vp.any_aligned == std::vector<int64_t>{w});
    batch().add(g.plan);
  }
}

// Row inputs at an odd storage offset (every row misaligned by the same
// amount) join the vector plan where nothing else moves as vectors, and
// the Edges kernels peel each row: a log-sum-exp of float32 rows at offset
// 4097 (seed 1414814702 c0130: without vectors no online pass, each phase
// read the row from memory again), a plain row sum (short rows then take
// the short-row kernel's scalar twin). A softmax, whose output moves as
// vectors, reads x per element in the main kernel.
void test_unaligned_row_inputs(void** /*state*/) {
  const auto lse = [](Builder& b) {
    const int64_t x = b.tensor_input(2, DType::F32);
    const int64_t m = b.op(Op::MAX, {x}, {1, 1})[0];
    const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, m}, {})[0]}, {})[0];
    const int64_t ls = b.op(Op::LOG, {b.op(Op::SUM, {e}, {1, 1})[0]}, {})[0];
    b.output(b.op(Op::ADD, {ls, m}, {})[0], {}, -1);
  };
  const auto sum = [](Builder& b) { b.output(b.op(Op::SUM, {b.tensor_input(2, DType::F32)}, {0, 1})[0], {}, -1); };
  std::string aligned_source;
  for (const uintptr_t misalign : {uintptr_t{0}, uintptr_t{4}}) {
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {512, 14336}, {}, misalign));
    const Generated g = generate(lse, in);
    const RowParams& rp = std::get<RowParams>(g.schedule);
    assert_int_equal(rp.vectors.width, 4);
    assert_int_equal(rp.vectors.inputs.size(), 1);
    assert_false(rp.online.empty());
    assert_int_equal(rp.edge_vectors.inputs.size(), 1);
    assert_true(rp.kernels.long_edges);
    // (the misaligned plan is the aligned one's: its calls fail the vector
    // checks and reuse the Edges kernels compiled for odd widths)
    if (misalign == 0) aligned_source = g.plan.source;
    else assert_true(g.plan.source == aligned_source);
    const RowParams sp = std::get<RowParams>(generate(sum, in).schedule);
    assert_int_equal(sp.vectors.width, 4);
    assert_int_equal(sp.edge_vectors.inputs.size(), 1);
    assert_true(sp.kernels.short_rows_block > 0);
    const auto softmax = [](Builder& b) {
      const int64_t x = b.tensor_input(2, DType::F32);
      const int64_t e = b.op(Op::EXP, {b.op(Op::SUB, {x, b.op(Op::MAX, {x}, {1, 1})[0]}, {})[0]}, {})[0];
      b.output(b.op(Op::DIV, {e, b.op(Op::SUM, {e}, {1, 1})[0]}, {})[0], {}, -1);
    };
    const VectorPlan smv = std::get<RowParams>(generate(softmax, in).schedule).vectors;
    assert_int_equal(smv.width, 4);
    assert_int_equal(smv.inputs.size(), misalign == 0 ? 1 : 0);
    assert_int_equal(smv.outputs.size(), 1);
  }
}

// Reads at a shift (VectorPlan entries kShiftedIndex): a cat's operands and
// a pad's input are vector inputs of the pointwise plan where the shift
// keeps a vector whole, each load guarded by its bound; the host checks a
// bound along the lanes (a cat's, a pad's input width) to be a multiple of
// the width. A pad of the last dim by other than a multiple of the width
// keeps its input out of the plan (read per element).
namespace shifted {

// Whether the host checks that extent `dim` of value `v` is a multiple of `m`.
bool checks_multiple(const KernelPlan& p, int64_t v, int dim, int m) {
  for (const ArgCheck& c : p.vector_checks)
    if (c.kind == ArgCheck::Kind::Multiple && c.modulus == m && c.offset == 0 && c.words.size() == 1) {
      const ArgSlot& s = p.args.at(static_cast<size_t>(c.words[0]));
      if (s.kind == ArgSlot::Kind::Extent && s.value == v && s.dim == dim) return true;
    }
  return false;
}

// The vector kernel's loads of 16-byte vectors, counted.
size_t vector_loads(const KernelPlan& p) {
  const std::string& src = p.units[p.unit_of(p.name)].source;
  size_t n = 0;
  for (size_t at = src.find("*(const kf_vec<"); at != std::string::npos; at = src.find("*(const kf_vec<", at + 1)) ++n;
  return n;
}

struct Case {
  KernelPlan plan;
  VectorPlan vectors;
};

Case run(const char* text, const std::vector<std::pair<DType, std::vector<int64_t>>>& shapes) {
  auto f = parse_fusion(text);
  Inputs in;
  for (const auto& [t, shape] : shapes) in.push_back(kftest::tensor(t, shape));
  auto c = kftest::concretize(f, in);
  const KernelSchedule schedule = kftest::schedule(c);
  Case r{emit_kernel(*c, root_task(*f), schedule), std::get<PointwiseParams>(schedule).loops.at(0).vectors};
  batch().add(r.plan);
  return r;
}

bool shifted_at(const VectorPlan& vp, int64_t v, size_t j) {
  auto it = vp.inputs.find(v);
  return it != vp.inputs.end() && j < it->second.size() && is_shifted(it->second[j]);
}

}  // namespace shifted

// Reshape targets as extents (ExtentSets' reshape_targets,
// KFUSE_RESHAPE_EXTENTS): q and k, separate inputs, each scaled and
// reshaped back by constants of equal values, give outputs of provably
// equal sizes (one pointwise loop, not two); a target given by an extent
// query joins that extent; a target inferred (-1) joins nothing.
void test_reshape_target_extents(void** /*state*/) {
  // t * 2 reshaped back to [2, 64, 4, 32] by constants of its own
  const auto scaled_back = [](Builder& b, int64_t t) {
    const int64_t m = b.op(Op::MUL, {t, b.constant_f64(2.0, DType::F32)}, {})[0];
    return b.op(Op::RESHAPE, {m, ci(b, 2), ci(b, 64), ci(b, 4), ci(b, 32)}, {})[0];
  };
  const auto q_and_k = [] {
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {2, 64, 4, 32}));
    in.push_back(kftest::tensor(DType::BF16, {2, 64, 4, 32}));
    return in;
  };
  Builder b;
  const int64_t q = b.tensor_input(4, DType::BF16), k = b.tensor_input(4, DType::BF16);
  const int64_t x = b.tensor_input(2, DType::F32), y = b.tensor_input(2, DType::F32);
  const int64_t qo = scaled_back(b, q), ko = scaled_back(b, k);
  // [size(q, 0), -1, 4, 32] from k: dim 0 is q's dim 0
  const int64_t so = b.op(Op::RESHAPE, {k, b.op(Op::SIZE, {q}, {0})[0], ci(b, -1), ci(b, 4), ci(b, 32)}, {})[0];
  const int64_t i1 = b.op(Op::RESHAPE, {x, ci(b, 4), ci(b, -1)}, {})[0];
  const int64_t i2 = b.op(Op::RESHAPE, {y, ci(b, 4), ci(b, -1)}, {})[0];
  for (int64_t o : {qo, ko, so, i1, i2}) b.output(o, {}, -1);
  Inputs in = q_and_k();
  in.push_back(kftest::tensor(DType::F32, {8, 6}));
  in.push_back(kftest::tensor(DType::F32, {6, 8}));
  const std::shared_ptr<const ConcreteFusion> c = kftest::concretize(b.finalize(), in);
  const ExtentSets off(*c, false), on(*c, true);
  assert_false(off.same_sizes(qo, ko));
  assert_true(on.same_sizes(qo, ko));
  assert_true(on.same(so, 0, q, 0) && !off.same(so, 0, q, 0));
  assert_true(on.same(i1, 0, i2, 0));
  assert_false(on.same(i1, 1, i2, 1));  // both inferred (12 and 12 here, not in every call)
  // The schedule of q's and k's outputs alone: one loop with the sets on.
  Builder b2;
  for (int64_t t : {b2.tensor_input(4, DType::BF16), b2.tensor_input(4, DType::BF16)})
    b2.output(scaled_back(b2, t), {}, -1);
  const std::shared_ptr<const ConcreteFusion> c2 = kftest::concretize(b2.finalize(), q_and_k());
  auto with_targets = std::make_shared<ConcreteFusion>(*c2);
  auto sets = std::make_shared<ExtentSets>(*with_targets, true);
  sets->freeze();
  with_targets->extent_sets = sets;
  const size_t loops_default = std::get<PointwiseParams>(kftest::schedule(c2)).loops.size();
  const KernelSchedule merged = kftest::schedule(with_targets);
  assert_int_equal(loops_default, reshape_target_extents() ? 1 : 2);
  assert_int_equal(std::get<PointwiseParams>(merged).loops.size(), 1);
  batch().add(emit_kernel(*with_targets, root_task(*with_targets->fusion), merged));
}

void test_shifted_vectors(void** /*state*/) {
  using shifted::run;
  {  // the KV-cache append along the sequence (an outer dim): both operands
     // as whole vectors, guarded by their part of the sequence; no bound
     // check (the lanes run along the head dim)
    const shifted::Case k = run("input past: tensor<bfloat16, 4>\ninput new: tensor<bfloat16, 4>\n"
                                "kv = cat(past, new) {dim=2}\noutput kv\n",
                                {{DType::BF16, {4, 8, 1024, 128}}, {DType::BF16, {4, 8, 128, 128}}});
    assert_int_equal(k.vectors.width, 8);
    assert_int_equal(k.vectors.dim, 3);
    assert_true(shifted::shifted_at(k.vectors, 0, 2) && shifted::shifted_at(k.vectors, 1, 2));
    assert_int_equal(shifted::vector_loads(k.plan), 4);  // 2 operands x 2 vectors per step
    const std::string& src = k.plan.units[k.plan.unit_of(k.plan.name)].source;
    assert_true(contains(src, "(i2_0 < e"));
    assert_true(contains(src, "(i2_0 >= e"));
    assert_false(shifted::checks_multiple(k.plan, 0, 2, 8));
    assert_int_equal(k.plan.scalar_twins.size(), 1);
  }
  {  // a cat along the last dim (float32): the first operand's width is a
     // bound every vector stays on one side of, checked by the host
    const shifted::Case k = run("input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\n"
                                "y = cat(a, b) {dim=1}\noutput y\n",
                                {{DType::F32, {64, 64}}, {DType::F32, {64, 128}}});
    assert_int_equal(k.vectors.width, 4);
    assert_true(shifted::shifted_at(k.vectors, 0, 1) && shifted::shifted_at(k.vectors, 1, 1));
    assert_int_equal(shifted::vector_loads(k.plan), 4);
    assert_true(shifted::checks_multiple(k.plan, 0, 1, 4));
  }
  {  // a pad along the sequence only: guarded vectors, no check
    const shifted::Case k = run("input x: tensor<bfloat16, 3>\nconst zero: bfloat16 = 0.0\n"
                                "y = pad(x, zero) {pads=[0, 0, 3, 5, 0, 0]}\noutput y\n",
                                {{DType::BF16, {4, 100, 256}}});
    assert_true(shifted::shifted_at(k.vectors, 0, 1));
    assert_int_equal(shifted::vector_loads(k.plan), 2);
    assert_true(contains(k.plan.units[k.plan.unit_of(k.plan.name)].source, "(i1_0 - 3) >= 0 && (i1_0 - 3) < e"));
    assert_false(shifted::checks_multiple(k.plan, 0, 2, 8));
  }
  {  // a pad of the last dim by 8 (bfloat16, 8 lanes): vectors, the input's width checked
    const shifted::Case k = run("input x: tensor<bfloat16, 2>\nconst zero: bfloat16 = 0.0\n"
                                "y = pad(x, zero) {pads=[0, 0, 8, 8]}\noutput y\n",
                                {{DType::BF16, {64, 128}}});
    assert_true(shifted::shifted_at(k.vectors, 0, 1));
    assert_int_equal(shifted::vector_loads(k.plan), 2);
    assert_true(shifted::checks_multiple(k.plan, 0, 1, 8));
  }
  {  // by 4: whole float32 vectors (4 lanes), not bfloat16 ones (8 lanes)
    const shifted::Case f32 = run("input x: tensor<float32, 2>\nconst zero: float32 = 0.0\n"
                                  "y = pad(x, zero) {pads=[1, 1, 4, 4]}\noutput y\n",
                                  {{DType::F32, {64, 128}}});
    assert_true(shifted::shifted_at(f32.vectors, 0, 1));
    assert_int_equal(shifted::vector_loads(f32.plan), 2);
    const shifted::Case bf16 = run("input x: tensor<bfloat16, 2>\nconst zero: bfloat16 = 0.0\n"
                                   "y = pad(x, zero) {pads=[1, 1, 4, 4]}\noutput y\n",
                                   {{DType::BF16, {64, 128}}});
    assert_int_equal(bf16.vectors.width, 8);
    assert_true(bf16.vectors.inputs.empty());  // read per element
    assert_int_equal(shifted::vector_loads(bf16.plan), 0);
    assert_int_equal(bf16.vectors.outputs.size(), 1);  // the output still moves as vectors
  }
  {  // rotary embedding, half rotated (seed 1978985695 c0088's class): q is
     // read through slices at 0, 32 and 64 and a cat: whole vectors at each
     // shift, the starts checked by the host (kf_slice_start)
    const shifted::Case k = run(
        "input q: tensor<bfloat16, 4>\ninput cos: tensor<bfloat16, 2>\ninput sin: tensor<bfloat16, 2>\n"
        "c = unsqueeze(cos) {dim=1}\ns = unsqueeze(sin) {dim=1}\nqf = cast(q) {dtype=float32}\n"
        "q_rot = slice(qf) {dim=3, start=0, stop=64}\nq_pass = slice(qf) {dim=3, start=64, stop=end}\n"
        "q1 = slice(q_rot) {dim=3, start=0, stop=32}\nq2 = slice(q_rot) {dim=3, start=32, stop=end}\n"
        "nq2 = neg(q2)\nqr = cat(nq2, q1) {dim=3}\nqc = mul(q_rot, c)\nqs = mul(qr, s)\nqo = add(qc, qs)\n"
        "q_cat = cat(qo, q_pass) {dim=3}\nq_out = cast(q_cat) {dtype=bfloat16}\noutput q_out\n",
        {{DType::BF16, {2, 16, 4, 128}}, {DType::BF16, {16, 64}}, {DType::BF16, {16, 64}}});
    assert_int_equal(k.vectors.width, 8);
    assert_true(shifted::shifted_at(k.vectors, 0, 3));
    assert_true(contains(k.plan.units[k.plan.unit_of(k.plan.name)].source, "kf_slice_start"));
    // q at its four shifts (q_rot at 0, q2 at 32, q1 at 0 under the cat's
    // second part, q_pass at 64): every one a whole vector
    assert_true(shifted::vector_loads(k.plan) >= 4);
    bool start_checked = false;
    for (const ArgCheck& c : k.plan.vector_checks) start_checked = start_checked || c.kind == ArgCheck::Kind::SliceMultiple;
    assert_true(start_checked);
  }
  {  // a slice starting at 1 (a difference of neighbours): x at 0 as
     // vectors, x at 1 per lane, no check that would always fail
    const shifted::Case k = run("input x: tensor<float32, 2>\n"
                                "a = slice(x) {dim=1, start=1, stop=end}\nb = slice(x) {dim=1, start=0, stop=-1}\n"
                                "d = sub(a, b)\noutput d\n",
                                {{DType::F32, {64, 129}}});
    assert_true(shifted::shifted_at(k.vectors, 0, 1));  // (at b's shift, the better aligned)
    for (const ArgCheck& c : k.plan.vector_checks) assert_true(c.kind != ArgCheck::Kind::SliceMultiple || c.offset != 1);
  }
  {  // a cat along the lanes whose first part is read per lane (a slice at
     // 50: not a multiple of 4) and whose second part as vectors: the
     // second part's start (the first's extent) is checked to be a
     // multiple of the width, else its vectors would straddle the bound
     // (the GPU group test_shifted_lanes, [37, 3, 100] float32)
    const char* text =
        "input x: tensor<float32, 3>\ninput c: tensor<float32, 2>\n"
        "cu = unsqueeze(c) {dim=1}\nx1 = slice(x) {dim=2, start=0, stop=50}\n"
        "x2 = slice(x) {dim=2, start=50, stop=end}\nn2 = neg(x2)\nr = cat(n2, x1) {dim=2}\n"
        "a = mul(x, cu)\nb = mul(r, cu)\ny = add(a, b)\noutput y\n";
    const shifted::Case k = run(text, {{DType::F32, {37, 3, 100}}, {DType::F32, {37, 100}}});
    int64_t first_part = -1;
    for (const Expr& e : parse_fusion(text)->exprs)
      if (e.op == Op::CAT) first_part = e.inputs[0];
    assert_true(shifted::checks_multiple(k.plan, first_part, 2, 4));
  }
  {  // one step per iteration where a shifted-only input loads at two or
     // more extra places (Tuning::pointwise_shifted_loads_one_step): a
     // swiglu backward's fused gate_up (gate and up in the first half, gate
     // again in the second: 3 loads), in both loops of the kernel; the
     // forward (gate and up: 1 extra) keeps two steps
    const auto unrolls = [](const char* text, std::vector<int64_t> shape, const Tuning& tuning = Tuning{}) {
      auto f = parse_fusion(text);
      Inputs in;
      in.push_back(kftest::tensor(DType::BF16, shape));
      in.push_back(kftest::tensor(DType::BF16, {shape[0], shape[1] / 2}));
      auto c = kftest::concretize(f, in);
      std::vector<int> u;
      const KernelSchedule schedule = kftest::schedule(c, tuning);
      for (const PointwiseLoop& l : std::get<PointwiseParams>(schedule).loops) u.push_back(l.unroll);
      return u;
    };
    const char* bwd =
        "input gate_up: tensor<bfloat16, 2>\ninput dy: tensor<bfloat16, 2>\nconst one: float32 = 1.0\n"
        "x = cast(gate_up) {dtype=float32}\ngate = slice(x) {dim=1, start=0, stop=512}\n"
        "up = slice(x) {dim=1, start=512, stop=end}\ndyf = cast(dy) {dtype=float32}\nsi = silu(gate)\n"
        "dup = mul(dyf, si)\ndh = mul(dyf, up)\ns = sigmoid(gate)\nom = sub(one, s)\nhs = mul(gate, om)\n"
        "t = add(one, hs)\nda = mul(s, t)\ndgate = mul(dh, da)\ndgu = cat(dgate, dup) {dim=1}\n"
        "o = cast(dgu) {dtype=bfloat16}\ny = mul(si, up)\nyo = cast(y) {dtype=bfloat16}\noutput o\noutput yo\n";
    assert_true(unrolls(bwd, {64, 1024}) == (std::vector<int>{1, 1}));
    Tuning off;
    off.pointwise_shifted_loads_one_step = 100;
    assert_true(unrolls(bwd, {64, 1024}, off) == (std::vector<int>{2, 2}));
    const char* fwd =
        "input gate_up: tensor<bfloat16, 2>\ninput dy: tensor<bfloat16, 2>\n"
        "x = cast(gate_up) {dtype=float32}\ngate = slice(x) {dim=1, start=0, stop=512}\n"
        "up = slice(x) {dim=1, start=512, stop=end}\nsi = silu(gate)\ny = mul(si, up)\ndyf = cast(dy) {dtype=float32}\n"
        "z = add(y, dyf)\nyo = cast(z) {dtype=bfloat16}\noutput yo\n";
    assert_true(unrolls(fwd, {64, 1024}) == (std::vector<int>{2}));
  }
  {  // the corpus's NCHW pad by 1 (c0147): the input per element, stores as vectors
    const shifted::Case k = run("input x: tensor<bfloat16, 4>\nconst zero: bfloat16 = 0.0\n"
                                "xf = cast(x) {dtype=float32}\na = silu(xf)\nact = cast(a) {dtype=bfloat16}\n"
                                "y = pad(act, zero) {pads=[0, 0, 0, 0, 1, 1, 1, 1]}\noutput y\n",
                                {{DType::BF16, {2, 4, 14, 14}}});
    assert_true(k.vectors.inputs.empty());
    assert_int_equal(shifted::vector_loads(k.plan), 0);
    assert_int_equal(k.vectors.outputs.size(), 1);
  }
}

// Column reductions of one phase carry a one-kernel twin for short
// columns (ColumnParams::short_rows): `_short` and its scalar twin, 256
// threads along the columns, one row group, every thread finishing and
// storing its columns; no scratch, no shared memory. The MoE combine
// (rows gathered by index_select, weighted per token and slot): its index
// and weights are read at one index for all of a thread's columns, so the
// vectors are the float16 input's 8 lanes. Normalizations keep the split
// kernels alone.
void test_short_columns(void** /*state*/) {
  auto moe = parse_fusion(
      "input expert_out: tensor<float16, 2>\n"
      "input unpermute: tensor<int64, 1>\n"
      "input routing_weights: tensor<float32, 2>\n"
      "const t: int64 = 16368\n"
      "const k: int64 = 4\n"
      "const h: int64 = 5120\n"
      "gathered = index_select(expert_out, unpermute) {dim=0}\n"
      "gatheredf = cast(gathered) {dtype=float32}\n"
      "per_token = reshape(gatheredf, [t, k, h])\n"
      "w3 = unsqueeze(routing_weights) {dim=2}\n"
      "weighted = mul(per_token, w3)\n"
      "y = sum(weighted) {axes=[1], keepdim=false}\n"
      "out = cast(y) {dtype=bfloat16}\n"
      "output out\n");
  {
    Inputs in;
    in.push_back(kftest::tensor(DType::F16, {65472, 5120}));
    in.push_back(kftest::tensor(DType::I64, {65472}, {}, 8));  // 8-byte aligned: not a vector input anyway
    in.push_back(kftest::tensor(DType::F32, {16368, 4}));
    auto c = kftest::concretize(moe, in);
    const KernelSchedule schedule = kftest::schedule(c);
    const ColumnParams& p = std::get<ColumnParams>(schedule);
    assert_int_equal(p.vectors.width, 8);
    assert_int_equal(p.vectors.inputs.size(), 1);
    assert_int_equal(p.short_rows, 32);
    const KernelPlan plan = emit_kernel(*c, root_task(*moe), schedule);
    batch().add(plan);
    assert_int_equal(plan.launch.short_rows, 32);
    assert_int_equal(plan.launch.short_tile_cols, 256 * 8);
    assert_false(plan.short_name.empty());
    const std::string& scalar = plan.scalar_of(plan.short_name);
    assert_string_not_equal(scalar.c_str(), plan.short_name.c_str());
    for (const std::string* k : {&plan.short_name, &scalar}) {
      const std::string& unit = plan.units[plan.unit_of(*k)].source;
      const std::string src = unit.substr(unit.find(" " + *k + "("));  // the kernel, not the prelude
      assert_false(contains(src, "args.scratch"));
      assert_false(contains(src, "__shared__"));
      assert_false(contains(src, "args.splits"));
      assert_true(contains(unit, "__launch_bounds__(256) " + *k + "("));
      assert_true(contains(src, "const int tx = threadIdx.x % 256, ty = threadIdx.x / 256;"));
      // The output stored by the kernel: on the vector path its lanes
      // together, 16 bytes where the output is contiguous and aligned.
      if (k == &plan.short_name) {
        assert_true(contains(src, "= kf_f2bf(ro"));
        assert_true(contains(src, "*(kf_vec<unsigned short, 8>*)("));
      } else {
        assert_true(contains(src, "= kf_f2bf(u"));
      }
    }
    // The split kernels are still there for longer columns.
    assert_false(plan.finish_name.empty());
    assert_true(contains(plan.units[plan.unit_of(plan.name)].source, "args.scratch"));
  }
  // sum, mean, max and var_mean over the middle dim: each finishes its
  // accumulators as the finishing kernel does (a mean divides by the row
  // count, a variance finishes its Welford triple).
  for (const char* text : {"input x: tensor<bfloat16, 3>\ny = sum(x) {axes=[1], keepdim=false}\noutput y\n",
                           "input x: tensor<float32, 3>\ny = mean(x) {axes=[1], keepdim=true}\noutput y\n",
                           "input x: tensor<float16, 3>\ny = max(x) {axes=[1], keepdim=false}\noutput y\n",
                           "input x: tensor<bfloat16, 3>\nxf = cast(x) {dtype=float32}\n"
                           "v, m = var_mean(xf) {axes=[1], keepdim=false, correction=1}\noutput v\noutput m\n"}) {
    auto f = parse_fusion(text);
    for (int64_t h : {int64_t{5120}, int64_t{4097}}) {
      Inputs in;
      in.push_back(kftest::tensor(f->value(f->inputs[0]).dtype, {16384, 2, h}));
      auto c = kftest::concretize(f, in);
      const KernelSchedule schedule = kftest::schedule(c);
      assert_int_equal(std::get<ColumnParams>(schedule).short_rows, 32);
      const KernelPlan plan = emit_kernel(*c, root_task(*f), schedule);
      batch().add(plan);
      assert_false(plan.short_name.empty());
      const std::string& src = plan.units[plan.unit_of(plan.short_name)].source;
      assert_false(contains(src, "args.scratch"));
      if (contains(text, "= mean(")) assert_true(contains(src, " / (float)n"));
      if (contains(text, "var_mean")) assert_true(contains(src, ".m2 / (float)("));
    }
  }
  {  // a normalization (softmax over dim 1): no twin
    auto f = parse_fusion(
        "input x: tensor<float32, 3>\n"
        "m = max(x) {axes=[1], keepdim=true}\n"
        "d = sub(x, m)\n"
        "e = exp(d)\n"
        "s = sum(e) {axes=[1], keepdim=true}\n"
        "y = div(e, s)\n"
        "output y\n");
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 4, 1024}));
    auto c = kftest::concretize(f, in);
    const KernelSchedule schedule = kftest::schedule(c);
    assert_int_equal(std::get<ColumnParams>(schedule).short_rows, 0);
    const KernelPlan plan = emit_kernel(*c, root_task(*f), schedule);
    assert_true(plan.short_name.empty());
    assert_int_equal(plan.launch.short_rows, 0);
  }
}

void test_inner_outer(void** /*state*/) {
  auto f = parse_fusion(
      "input dy: tensor<bfloat16, 2>\n"
      "input x: tensor<bfloat16, 2>\n"
      "input mean: tensor<float32, 2>\n"
      "input rstd: tensor<float32, 2>\n"
      "input w: tensor<bfloat16, 1>\n"
      "dyf = cast(dy) {dtype=float32}\n"
      "xf = cast(x) {dtype=float32}\n"
      "wf = cast(w) {dtype=float32}\n"
      "xc = sub(xf, mean)\n"
      "xhat = mul(xc, rstd)\n"
      "g = mul(dyf, wf)\n"
      "gx = mul(g, xhat)\n"
      "s1 = mean(g) {axes=[1], keepdim=true}\n"
      "s2 = mean(gx) {axes=[1], keepdim=true}\n"
      "a = sub(g, s1)\n"
      "b = mul(xhat, s2)\n"
      "c = sub(a, b)\n"
      "dx = mul(c, rstd)\n"
      "dxo = cast(dx) {dtype=bfloat16}\n"
      "dyx = mul(dyf, xhat)\n"
      "dw = sum(dyx) {axes=[0], keepdim=false}\n"
      "db = sum(dyf) {axes=[0], keepdim=false}\n"
      "output dxo\n"
      "output dw\n"
      "output db\n");
  for (int64_t cols : {int64_t{1024}, int64_t{77}}) {
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {256, cols}));
    in.push_back(kftest::tensor(DType::BF16, {256, cols}));
    in.push_back(kftest::tensor(DType::F32, {256, 1}));
    in.push_back(kftest::tensor(DType::F32, {256, 1}));
    in.push_back(kftest::tensor(DType::BF16, {cols}));
    auto c = kftest::concretize(f, in);
    const KernelSchedule schedule = kftest::schedule(c);
    const RowParams& p = std::get<RowParams>(schedule);
    assert_true(p.has_outer());
    assert_true(p.rows.reduced == std::vector<bool>({false, true}));
    assert_true(p.outer.reduced == std::vector<bool>({true, false}));
    assert_int_equal(p.outer.phases.at(0).size(), 2);
    assert_int_equal(p.outer.row_outputs.size(), 2);
    assert_int_equal(p.rows.domain_outputs.size(), 1);
    assert_int_equal(p.vectors.width, 8);
    // (8-element vectors times dw's and db's partials pass Tuning::
    // inner_outer_partials: one vector a thread)
    assert_true(p.vectors.width * Tuning{}.inner_outer_vectors / 2 * 2 > Tuning{}.inner_outer_partials);
    assert_int_equal(p.vectors_per_thread, 1);
    assert_string_equal(std::string(family_of(schedule)).c_str(), "inner_outer");
    // The whole fusion is one segment with this schedule.
    auto seg = segment_fusion(*c);
    assert_int_equal(seg.segments.size(), 1);
    assert_true(seg.segments[0].schedule == schedule);
    KernelPlan plan = emit_kernel(*c, root_task(*f), schedule);
    assert_int_equal(static_cast<int>(plan.launch.kind), static_cast<int>(LaunchRule::Kind::PerRow));
    assert_int_equal(plan.launch.outer_accumulators, 2);
    assert_int_equal(plan.launch.extra_args, 2);
    assert_false(plan.finish_name.empty());
    assert_true(contains(plan.source, "args.scratch"));
    assert_true(plan.short_rows_name.empty());  // (its grid is one wave of partial rows)
    // Rows of any width: the Edges kernels, the register one with its
    // column partials in shared memory (a row's shift moves which columns
    // a thread holds), lane-major, written out once per block.
    assert_false(plan.edges_name.empty() || plan.long_edges_name.empty());
    assert_true(p.edge_vectors.inputs.size() == 3 && p.edge_vectors.inputs.contains(4));  // dy, x and w
    assert_int_equal(plan.edge_partial_bytes, 8);  // two float sums per column
    const std::string& held = plan.units[plan.unit_of(plan.edges_name)].source;
    assert_true(contains(held, "extern __shared__"));
    assert_true(contains(held, "% 8u) * kfls"));  // lane-major slots
    assert_true(contains(held, "const bool eok"));
    assert_false(contains(held, "oacc"));  // no column registers
    const std::string& long_rows = plan.units[plan.unit_of(plan.long_edges_name)].source;
    assert_true(contains(long_rows, "(j + kfsh"));  // the stage at each row's shift
    batch().add(plan);
  }
}

// Reductions over permuted inputs: the row or column family follows the
// innermost dim in memory (RowDomain::order), the vectors run along it,
// and the kernels (with their split-row, finishing and inner-outer
// kernels) compile.
void test_memory_order(void** /*state*/) {
  auto plan_of = [](const std::string& text, Inputs in) {
    auto f = parse_fusion(text);
    auto c = kftest::concretize(f, in);
    Generated g{c, kftest::schedule(c), {}};
    g.plan = emit_kernel(*c, root_task(*f), g.schedule);
    batch().add(g.plan);
    for (const KernelPlan& split : g.plan.split_rows) batch().add(split);
    return g;
  };
  const std::string softmax0 =
      "input x: tensor<bfloat16, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "m = max(xf) {axes=[0], keepdim=true}\n"
      "d = sub(xf, m)\n"
      "e = exp(d)\n"
      "s = sum(e) {axes=[0], keepdim=true}\n"
      "p = div(e, s)\n"
      "y = cast(p) {dtype=bfloat16}\n"
      "output y\n";
  {  // softmax over dim 0 of a transposed input: rows along dim 0
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {1000, 300}, {1, 1000}));
    const Generated g = plan_of(softmax0, std::move(in));
    const RowParams& p = std::get<RowParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({1, 0}));
    assert_int_equal(p.vectors.dim, 0);
    assert_int_equal(p.vectors.width, 8);
    assert_int_equal(p.vectors.inputs.size(), 1);
    assert_int_equal(p.vectors.outputs.size(), 1);  // y follows x's layout
  }
  {  // the same softmax, row-major: the column family, as before
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {1000, 300}));
    const Generated g = plan_of(softmax0, std::move(in));
    const ColumnParams& p = std::get<ColumnParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({0, 1}));
    assert_int_equal(p.vectors.dim, 1);
  }
  {  // few long transposed rows: the split-row kernels, vectors along dim 0
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {300000, 3}, {1, 300000}));
    const Generated g = plan_of(softmax0, std::move(in));
    assert_int_equal(std::get<RowParams>(g.schedule).vectors.dim, 0);
    assert_int_equal(g.plan.split_rows.size(), 1);
  }
  {  // max over dims 2, 3 laid out outermost: a column reduction whose
     // columns run over dims (1, 0), dim 0 fastest
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {4, 8, 64, 128}, {1, 4, 32 * 128, 32}));
    const Generated g = plan_of(
        "input x: tensor<float32, 4>\n"
        "m = max(x) {axes=[2, 3], keepdim=false}\n"
        "output m\n",
        std::move(in));
    const ColumnParams& p = std::get<ColumnParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({2, 3, 1, 0}));
    assert_true(p.rows.dims_in_order(false) == std::vector<size_t>({1, 0}));
    assert_true(p.rows.dims_in_order(true) == std::vector<size_t>({2, 3}));
    assert_int_equal(p.vectors.dim, 0);
    assert_int_equal(p.vectors.width, 4);
  }
  {  // channels-first sum: [B, C, N] with C outermost, B innermost
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {32, 64, 96}, {1, 96 * 32, 32}));
    const Generated g = plan_of(
        "input x: tensor<float32, 3>\n"
        "s = sum(x) {axes=[1], keepdim=false}\n"
        "output s\n",
        std::move(in));
    const ColumnParams& p = std::get<ColumnParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({1, 2, 0}));
    assert_int_equal(p.vectors.dim, 0);
  }
  {  // layer norm over the last logical dim of a transposed input: a column
     // normalization in several phases (its later kernels read the
     // per-column results, ravelled in memory order)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {300, 1001}, {1, 300}));
    const Generated g = plan_of(
        "input x: tensor<float32, 2>\n"
        "const eps: float32 = 1e-5\n"
        "mu = mean(x) {axes=[1], keepdim=true}\n"
        "xc = sub(x, mu)\n"
        "sq = mul(xc, xc)\n"
        "v = mean(sq) {axes=[1], keepdim=true}\n"
        "ve = add(v, eps)\n"
        "r = rsqrt(ve)\n"
        "y = mul(xc, r)\n"
        "output y\n"
        "output mu\n",
        std::move(in));
    const ColumnParams& p = std::get<ColumnParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({1, 0}));
    assert_int_equal(p.rows.phases.size(), 2);
    assert_int_equal(p.vectors.dim, 0);
  }
  {  // a broadcast weight [N, 1] beside a transposed x: x is the reference
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {1003, 77}, {1, 1003}));
    in.push_back(kftest::tensor(DType::F32, {1003, 1}));
    const Generated g = plan_of(
        "input x: tensor<float32, 2>\n"
        "input w: tensor<float32, 2>\n"
        "p = mul(x, w)\n"
        "s = sum(p) {axes=[0], keepdim=false}\n"
        "output s\n",
        std::move(in));
    const RowParams& p = std::get<RowParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({1, 0}));
    assert_int_equal(p.vectors.dim, 0);
  }
  {  // a stride-0 broadcast is no reference: its dim 0 sorts innermost by
     // stride, but is not contiguous; the logical order stays
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {64, 128}, {0, 1}));
    const Generated g = plan_of(
        "input x: tensor<float32, 2>\n"
        "s = sum(x) {axes=[1], keepdim=false}\n"
        "output s\n",
        std::move(in));
    const RowParams& p = std::get<RowParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({0, 1}));
  }
  {  // softmax backward of a row-major dy and a column-major y: y is
     // copied into dy's layout first (relayout_inputs), so the row kernel
     // loads both as vectors along the row
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {512, 4096}));
    in.push_back(kftest::tensor(DType::BF16, {512, 4096}, {1, 512}));
    const Generated g = plan_of(
        "input dy: tensor<bfloat16, 2>\n"
        "input y: tensor<bfloat16, 2>\n"
        "dyf = cast(dy) {dtype=float32}\n"
        "yf = cast(y) {dtype=float32}\n"
        "p = mul(dyf, yf)\n"
        "s = sum(p) {axes=[1], keepdim=true}\n"
        "d = sub(dyf, s)\n"
        "dx = mul(yf, d)\n"
        "dxo = cast(dx) {dtype=bfloat16}\n"
        "output dxo\n",
        std::move(in));
    assert_true(g.concrete->relayout_inputs == std::vector<bool>({false, true}));
    const RowParams& p = std::get<RowParams>(g.schedule);
    assert_true(p.rows.order == std::vector<size_t>({0, 1}));
    assert_int_equal(p.vectors.dim, 1);
    assert_int_equal(p.vectors.inputs.size(), 2);
  }
  {  // norm backward (inner-outer) on transposed inputs: its pattern stays
     // logical; the rows take no vectors, the column partials are walked
     // and finished in memory order
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {256, 77}, {1, 256}));
    in.push_back(kftest::tensor(DType::F32, {256, 77}, {1, 256}));
    const Generated g = plan_of(
        "input dy: tensor<float32, 2>\n"
        "input x: tensor<float32, 2>\n"
        "g = mul(dy, x)\n"
        "s1 = mean(g) {axes=[1], keepdim=true}\n"
        "dx = sub(g, s1)\n"
        "dw = sum(g) {axes=[0], keepdim=false}\n"
        "output dx\n"
        "output dw\n",
        std::move(in));
    if (const RowParams* p = std::get_if<RowParams>(&g.schedule); p != nullptr && p->has_outer())
      assert_true(p->outer.order == p->rows.order);
  }
}

void test_rejections(void** /*state*/) {
  {  // a row sum and a column sum of one matrix: one inner-outer kernel
    Builder b;
    const int64_t x = b.tensor_input(2, DType::F32);
    b.output(b.op(Op::SUM, {x}, {0, 0})[0], {}, -1);
    b.output(b.op(Op::SUM, {x}, {0, 1})[0], {}, -1);
    auto f = b.finalize();
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 16}));
    const ScheduleProposal p = propose_schedule(*kftest::concretize(f, in), root_task(*f), Tuning{});
    assert_true(p.schedule.has_value() && family_of(*p.schedule) == "inner_outer");
  }
  // Sums over dims 0 and 2 of a rank-3 tensor: neither one domain's rows
  // nor rows and exactly their columns.
  Builder b;
  const int64_t x = b.tensor_input(3, DType::F32);
  b.output(b.op(Op::SUM, {x}, {0, 0})[0], {}, -1);
  b.output(b.op(Op::SUM, {x}, {0, 2})[0], {}, -1);
  auto f = b.finalize();
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {8, 4, 16}));
  auto c = kftest::concretize(f, in);
  ScheduleProposal p = propose_schedule(*c, root_task(*f), Tuning{});
  assert_false(p.schedule.has_value());
  assert_true(contains(p.why, "reductions over different domains"));

  // A reduction result read at another row's index (here: transposed).
  Builder b2;
  const int64_t y = b2.tensor_input(2, DType::F32);
  const int64_t s = b2.op(Op::SUM, {y}, {1, 1})[0];  // [8, 1]
  const int64_t t = b2.op(Op::RESHAPE, {s, ci(b2, 1), ci(b2, 8)}, {})[0];
  b2.output(b2.op(Op::ADD, {y, b2.op(Op::EXPAND, {t, ci(b2, 8), ci(b2, 8)}, {})[0]}, {})[0], {}, -1);
  auto f2 = b2.finalize();
  Inputs in2;
  in2.push_back(kftest::tensor(DType::F32, {8, 8}));
  auto c2 = kftest::concretize(f2, in2);
  p = propose_schedule(*c2, root_task(*f2), Tuning{});
  assert_false(p.schedule.has_value());
  assert_true(contains(p.why, "is read at an index other than its own row"));
}

// Each fusion is one library segment holding a matmul pattern; its
// epilogue task becomes a pointwise kernel (the fallback).
void test_matmul_epilogue_kernels(void** /*state*/) {
  struct Case {
    DType t;
    bool cast;  // through float32 and back
    Op act;
    const char* pattern;
  };
  const Case cases[] = {{DType::F32, false, Op::GELU_TANH, "linear+bias+gelu_tanh"},
                        {DType::F16, false, Op::RELU, "linear+bias+relu"},
                        {DType::BF16, true, Op::GELU_TANH, "linear+bias+gelu_tanh"},
                        {DType::F64, false, Op::RELU, "linear+bias+relu"}};
  for (const Case& k : cases) {
    Builder b;
    const int64_t x = b.tensor_input(2, k.t), w = b.tensor_input(2, k.t), bias = b.tensor_input(1, k.t);
    int64_t h = b.op(Op::LINEAR, {x, w}, {})[0];
    int64_t c = bias;
    if (k.cast) {
      h = b.op(Op::CAST, {h}, {static_cast<int64_t>(DType::F32)})[0];
      c = b.op(Op::CAST, {bias}, {static_cast<int64_t>(DType::F32)})[0];
    }
    int64_t y = b.op(k.act, {b.op(Op::ADD, {h, c}, {})[0]}, {})[0];
    if (k.cast) y = b.op(Op::CAST, {y}, {static_cast<int64_t>(k.t)})[0];
    b.output(y, {}, -1);
    auto f = b.finalize();
    Inputs in;
    in.push_back(kftest::tensor(k.t, {33, 64}));
    in.push_back(kftest::tensor(k.t, {48, 64}));
    in.push_back(kftest::tensor(k.t, {48}));
    auto concrete = kftest::concretize(f, in);
    auto seg = segment_fusion(*concrete);
    assert_int_equal(seg.segments.size(), 1);
    const Task& pattern = seg.segments[0].task.children.at(0);
    const auto p = describe_matmul_pattern(*concrete, pattern);
    assert_true(p.has_value());
    assert_string_equal(std::string(matmul_pattern_name(*f, *p)).c_str(), k.pattern);
    const Task epilogue = matmul_epilogue_task(*f, pattern, *p);
    assert_true(epilogue.inputs == std::vector<int64_t>({p->product, p->bias}) ||
                epilogue.inputs == std::vector<int64_t>({p->bias, p->product}));
    assert_true(seg.segments[0].schedule.has_value());  // the epilogue's, chosen at segmentation
    KernelPlan plan = emit_kernel(*concrete, epilogue, *seg.segments[0].schedule);
    assert_int_equal(static_cast<int>(plan.scheduler), static_cast<int>(SchedulerKind::Pointwise));
    batch().add(plan);
  }
}

// n / d as the kernel's kf_fastdiv_div computes it from the host's word.
int64_t fast_quotient(int64_t n, int64_t d) { return fastdiv_divide(fastdiv_word(d), static_cast<uint32_t>(n)); }

// The tiled kernel's loop over groups of dims, replayed on the host as
// emit_tiled writes it (tile order 3, tile_element's unravelling from the
// tile's base): every domain index of `ext` is computed by exactly one
// (tile, row, lane), the groups' indices in range, and the scalar loops'
// stepped unravelling agrees with it. Returns the count.
int64_t walk_tiles(const TiledParams& p, const std::vector<int64_t>& ext) {
  const int64_t T = p.tile;
  std::vector<size_t> ga{p.dim_a}, gb{p.dim_b};
  ga.insert(ga.end(), p.group_a.begin(), p.group_a.end());
  gb.insert(gb.end(), p.group_b.begin(), p.group_b.end());
  assert_true(ga.size() <= 2 && gb.size() <= 2);
  const auto in = [](const std::vector<size_t>& g, size_t d) { return std::find(g.begin(), g.end(), d) != g.end(); };
  int64_t ea = 1, eb = 1, outer = 1;
  for (size_t d : ga) ea *= ext[d];
  for (size_t d : gb) eb *= ext[d];
  std::vector<size_t> outer_dims;
  for (size_t d = 0; d < ext.size(); ++d)
    if (!in(ga, d) && !in(gb, d)) {
      outer_dims.push_back(d);
      outer *= ext[d];
    }
  const int64_t ta = (ea + T - 1) / T, tb = (eb + T - 1) / T, tiles = outer * ta * tb;
  int64_t total = 1;
  for (int64_t e : ext) total *= e;
  std::vector<int> seen(static_cast<size_t>(total), 0);
  // (i inner, i outer) at offset `off` from the tile's base, as emitted.
  const auto unravel = [](const std::vector<size_t>& g, const std::vector<int64_t>& ext, int64_t base, int64_t off,
                          std::vector<int64_t>& idx) {
    if (g.size() == 1) {
      idx[g[0]] = base + off;
      return;
    }
    const int64_t e = ext[g[0]];
    const int64_t bq = fast_quotient(base, e);
    int64_t i = base - bq * e + off, o = bq;
    if (i >= e) {
      const int64_t q = fast_quotient(i, e);
      o += q;
      i -= q * e;
    }
    idx[g[0]] = i;
    idx[g[1]] = o;
  };
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t in_ = tile % (ta * tb), tb_ = in_ % tb, ta_ = in_ / tb;
    int64_t rest = tile / (ta * tb);
    std::vector<int64_t> idx(ext.size(), 0);
    for (size_t k = outer_dims.size(); k-- > 0;) {  // (any order covers them once)
      idx[outer_dims[k]] = rest % ext[outer_dims[k]];
      rest /= ext[outer_dims[k]];
    }
    const int64_t a0 = ta_ * T, b0 = tb_ * T;
    for (int64_t k = 0; k < T; ++k)
      for (int64_t lx = 0; lx < T; ++lx) {
        if (a0 + k >= ea || b0 + lx >= eb) continue;
        unravel(ga, ext, a0, k, idx);
        unravel(gb, ext, b0, lx, idx);
        int64_t lin = 0;
        for (size_t d = 0; d < ext.size(); ++d) {
          assert_true(idx[d] >= 0 && idx[d] < ext[d]);
          lin = lin * ext[d] + idx[d];
        }
        ++seen[static_cast<size_t>(lin)];
      }
    // The scalar loops (tile_loop): a row's group is unravelled at the
    // thread's first row and stepped by the rows per step, wrapping; each
    // step must land where the direct unravelling does, along a and along b.
    const int64_t step = p.block / T;
    for (const auto& [g, base, e] : {std::tuple{&ga, a0, ea}, std::tuple{&gb, b0, eb}}) {
      if (g->size() == 1) continue;
      const int64_t inner_e = ext[(*g)[0]];
      for (int64_t k0 = 0; k0 < step; ++k0) {
        const int64_t bq = fast_quotient(base, inner_e);
        int64_t i = base - bq * inner_e + k0, o = bq;
        if (i >= inner_e) {
          const int64_t q = fast_quotient(i, inner_e);
          o += q;
          i -= q * inner_e;
        }
        for (int64_t kk = 0; kk < T; kk += step) {
          if (base + kk + k0 < e) {
            std::vector<int64_t> direct(ext.size(), 0);
            unravel(*g, ext, base, kk + k0, direct);
            assert_int_equal(i, direct[(*g)[0]]);
            assert_int_equal(o, direct[(*g)[1]]);
          }
          i += step;
          while (i >= inner_e) {
            i -= inner_e;
            ++o;
          }
        }
      }
    }
  }
  for (int c : seen) assert_int_equal(c, 1);
  return total;
}

void check_walks(const TiledParams& p, std::vector<int64_t> ext) {
  walk_tiles(p, ext);
  // Odd extents of every dim in turn, and the tiny ones the groups are for.
  for (size_t d = 0; d < ext.size(); ++d)
    for (int64_t e : {1, 2, 3, 7, 65, 130}) {
      std::vector<int64_t> x = ext;
      x[d] = e;
      walk_tiles(p, x);
    }
}

// Tiles over groups of dims (TiledParams::group_a / group_b) for the corpus
// cases with a batch dim of 2-8 innermost (seed 1631654200 c0011, c0074,
// c0170, c0171): the groups chosen, the kernel's unravelling, the host walk
// of its tiles covering every index once for odd extents.
// A pointwise kernel of two loops whose first is the smaller: the grid is
// made for the larger (launch_domain). GPT-2's cross-entropy put a
// [8192] loop first and a [8192, 50257] one second and ran on 4 blocks
// (28 ms, H200, perf-log session 37).
void test_loops_of_different_sizes(void** /*state*/) {
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {8}));
  in.push_back(kftest::tensor(DType::F32, {8, 64}));
  int64_t a = -1, x = -1, small = -1, big = -1;
  const Generated g = generate(
      [&](Builder& b) {
        a = b.tensor_input(1, DType::F32);
        x = b.tensor_input(2, DType::F32);
        small = b.op(Op::MUL, {a, b.constant_f64(2.0, DType::F32)}, {})[0];
        big = b.op(Op::ADD, {x, b.constant_f64(1.0, DType::F32)}, {})[0];
        b.output(small, {}, -1);
        b.output(big, {}, -1);
      },
      in);
  const PointwiseParams& pw = std::get<PointwiseParams>(g.schedule);
  assert_int_equal(pw.loops.size(), 2);
  assert_true(g.plan.launch.loop_domains.size() == 2);
  ValueSizes sizes;
  sizes.reset(*g.concrete->fusion);
  for (int64_t v : g.plan.launch.loop_domains)
    sizes.set(v, v == big ? std::vector<int64_t>{100000, 1000} : std::vector<int64_t>{100000});
  for (bool big_first : {false, true}) {
    LaunchRule r = g.plan.launch;
    r.domain_value = big_first ? big : small;
    const std::span<const int64_t> d = cuda::launch_domain(r, sizes);
    assert_int_equal(d.size(), 2);
    assert_int_equal(d[1], 1000);
  }
  // Only Elementwise rules look at the loops.
  LaunchRule row = g.plan.launch;
  row.kind = LaunchRule::Kind::PerRow;
  row.domain_value = small;
  assert_int_equal(cuda::launch_domain(row, sizes).size(), 1);
}

// A geglu of a fused gate_up [B, T, 2F] into an output the caller stores
// as (T, F, B), the batch innermost (seed 1657399774 c0137): B's group is
// {0, 1}, dim a is 2, the output's next memory dim after 0. With
// Tuning::tiled_walk_b_with_a the scalar phase 2 walks the tile in the
// output's order where B's inner extent is a power of two below the tile
// (a run-time branch beside the lanes along B); off by default, and never
// for an output whose next dim after b is not a.
void test_tiles_walk_b_with_a(void** /*state*/) {
  const auto geglu = [](Builder& b) {
    const int64_t gu = b.op(Op::CAST, {b.tensor_input(3, DType::BF16)}, {static_cast<int64_t>(DType::F32)})[0];
    const int64_t gate = b.op(Op::SLICE, {gu}, {2, 0, 256, 1})[0], up = b.op(Op::SLICE, {gu}, {2, 256, 512, 1})[0];
    const int64_t y = b.op(Op::MUL, {b.op(Op::GELU, {gate}, {})[0], up}, {})[0];
    b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(DType::BF16)})[0], {1, 2, 0}, -1);
  };
  Inputs in;
  in.push_back(kftest::tensor(DType::BF16, {4, 96, 512}));
  for (const int walk : {0, 1}) {
    Tuning tuning;
    tuning.tiled_walk_b_with_a = walk;
    const Generated g = generate(geglu, in, tuning);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 2);
    assert_int_equal(t.dim_b, 0);
    assert_true(t.group_a.empty() && t.group_b == std::vector<size_t>{1});
    assert_int_equal(t.walk_b_with_a, walk == 1);
    const std::string& grouped = g.plan.units[g.plan.unit_of(g.plan.name)].source;
    assert_int_equal(contains(grouped, "wf_ >> (wsh_ + 6)"), walk == 1);
    assert_false(contains(g.plan.units[g.plan.unit_of(g.plan.ungrouped_name)].source, "wsh_"));
  }
}

// A geglu whose up input is transposed, at an odd sequence length (seed
// 1657399774 c0055: [4098, 13824], up stored [1, 0]): its columns start
// 4098 elements apart, so no 16-byte fill of its tile, and one vector
// condition for both phases sent phase 2 to its scalar path too. With
// Tuning::tiled_vectors_without_fill the vector path's condition leaves
// the fill out, which takes the input's widest vectors at run time; off
// by default.
void test_tiles_vectors_without_fill(void** /*state*/) {
  const auto geglu = [](Builder& b) {
    const int64_t gate = b.op(Op::CAST, {b.tensor_input(2, DType::BF16)}, {static_cast<int64_t>(DType::F32)})[0];
    const int64_t up = b.op(Op::CAST, {b.tensor_input(2, DType::BF16)}, {static_cast<int64_t>(DType::F32)})[0];
    const int64_t y = b.op(Op::MUL, {b.op(Op::GELU, {gate}, {})[0], up}, {})[0];
    b.output(b.op(Op::CAST, {y}, {static_cast<int64_t>(DType::BF16)})[0], {}, -1);
  };
  for (const int64_t rows : {int64_t{130}, int64_t{1024}})
    for (const int apart : {0, 1}) {
      Inputs in;
      in.push_back(kftest::tensor(DType::BF16, {rows, 1024}));
      in.push_back(kftest::tensor(DType::BF16, {rows, 1024}, {1, rows}));
      Tuning tuning;
      tuning.tiled_vectors_without_fill = apart;
      const Generated g = generate(geglu, in, tuning);
      const auto& t = std::get<TiledParams>(g.schedule);
      assert_int_equal(t.dim_a, 0);
      assert_int_equal(t.dim_b, 1);
      assert_int_equal(t.vectors.width, 8);
      const bool on = apart == 1;
      assert_int_equal(t.vectors_without_fill, on);
      // (the first vector branch's condition has the fill's 16-byte check;
      // with the knob a second branch's has none)
      const std::string& src = g.plan.units[g.plan.unit_of(g.plan.name)].source;
      const auto condition = [&](size_t from) {
        const size_t at = src.find("const bool kfvec", from);
        return at == std::string::npos ? std::string() : src.substr(at, src.find(';', at) - at);
      };
      const std::string first = condition(0);
      assert_true(first.find("kffill") != std::string::npos);
      const std::string second = condition(src.find(first) + first.size());
      assert_int_equal(!second.empty(), on);
      if (on) assert_true(second.find("kffill") == std::string::npos);
      assert_int_equal(src.find("else if (kfvec") != std::string::npos, on);
    }
}

void test_tile_groups(void** /*state*/) {
  {  // channel cat (c0011): x0 stored with N innermost, then C (memory
     // order W, H, C, N), the output (W, C, N, H): A = {N, C}, B = {H, W}
     // (the output's next dims, N and C, are A's: B takes the one after)
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {2, 12, 9, 7}, {1, 2, 24, 216}));
    in.push_back(kftest::tensor(DType::BF16, {2, 12, 9, 7}));
    // (phase 2 along the output's fast dim: Tuning::tiled_b_from_inputs 0;
    // with 1, x1, read across its memory at the cat's shift beside x0's
    // tile, makes a plan along x1's fast dim cheaper)
    Tuning tuning;
    tuning.tiled_b_from_inputs = 0;
    const Generated g = generate([](Builder& b) {
      const int64_t x0 = b.tensor_input(4, DType::BF16), x1 = b.tensor_input(4, DType::BF16);
      b.output(b.op(Op::CAT, {x0, x1}, {1})[0], {3, 1, 0, 2}, -1);
    }, in, tuning);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 0);
    assert_true(t.group_a == std::vector<size_t>({1}));
    assert_int_equal(t.dim_b, 2);
    assert_true(t.group_b == std::vector<size_t>({3}));
    // (the unravelling walk_tiles replays: by the host's fastdiv words)
    assert_true(contains(g.plan.source, "const int aq_ = kf_fastdiv_div(fd"));
    assert_true(contains(g.plan.source, ", ar_ = a0 - aq_ * "));
    assert_true(contains(g.plan.source, "int i0 = ar_ + lx, i1 = aq_;"));
    assert_true(contains(g.plan.source, "if (i0 >= "));
    assert_true(contains(g.plan.source, "{ const int q_ = kf_fastdiv_div(fd"));
    assert_true(contains(g.plan.source, "; i1 += q_; i0 -= q_ * "));
    // the scalar loops step the rows' group (phase 2 along a, phase 1 along b)
    assert_true(contains(g.plan.source, "i0 += 4; while (i0 >= "));
    assert_true(contains(g.plan.source, "i2 += 4; while (i2 >= "));
    assert_true(contains(g.plan.source, "br_"));
    // x0's vectors may cross N's rows where N and C are one dense run
    assert_true(contains(g.plan.source, " % 8 == 0) || (st"));
    assert_true(contains(describe(g.schedule), "dim_a=0+1 dim_b=2+3 "));
    // its twin over single dims, for calls whose N and H fill half a tile
    assert_true(g.plan.launch.tile_group_dims == std::vector<int>({0, 2}));
    assert_int_equal(g.plan.launch.tile, 64);
    assert_false(g.plan.ungrouped_name.empty());
    const std::string& single = g.plan.units[g.plan.unit_of(g.plan.ungrouped_name)].source;
    assert_false(contains(single, "ar_"));
    assert_true(contains(single, g.plan.ungrouped_name + "(const KfArgs args)"));
    check_walks(t, {2, 24, 9, 7});
  }
  {  // pointwise into outputs stored batch innermost (c0171): x contiguous
     // (a = 2), the output (H, S, B) outermost first: B = {B, S}, A = {H}
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 33, 130}));
    in.push_back(kftest::tensor(DType::F32, {130}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(3, DType::F32), u = b.tensor_input(1, DType::F32);
      b.output(b.op(Op::MUL, {x, u}, {})[0], {2, 1, 0}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 2);
    assert_true(t.group_a.empty());
    assert_int_equal(t.dim_b, 0);
    assert_true(t.group_b == std::vector<size_t>({1}));
    check_walks(t, {8, 33, 130});
  }
  {  // channel cat of three (c0074): x1 with its last two dims swapped, the
     // output (C, W, H, N): b = N logically outer, so B = {N, H} chooses
     // first; A = {W} alone (x0's next dim, H, is in B)
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {8, 20, 16, 16}));
    in.push_back(kftest::tensor(DType::BF16, {8, 20, 16, 16}, {5120, 256, 1, 16}));
    in.push_back(kftest::tensor(DType::BF16, {8, 20, 16, 16}));
    Tuning tuning;  // (along the output's fast dim, as in the channel cat above)
    tuning.tiled_b_from_inputs = 0;
    const Generated g = generate([](Builder& b) {
      const int64_t x0 = b.tensor_input(4, DType::BF16), x1 = b.tensor_input(4, DType::BF16), x2 = b.tensor_input(4, DType::BF16);
      b.output(b.op(Op::CAT, {x0, x1, x2}, {1})[0], {1, 3, 2, 0}, -1);
    }, in, tuning);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 3);
    assert_true(t.group_a.empty());
    assert_int_equal(t.dim_b, 0);
    assert_true(t.group_b == std::vector<size_t>({2}));
    check_walks(t, {8, 60, 16, 16});
  }
  {  // qkv split with qkv stored batch innermost, then S (c0170): the tile
     // of the computed slice, A = {B, S} (a = B logically outer chooses
     // first), B = {D} (the outputs' next dim, S, is in A)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 17, 48}, {1, 8, 136}));
    const Generated g = generate([](Builder& b) {
      const int64_t qkv = b.tensor_input(3, DType::F32);
      const int64_t k = b.op(Op::SLICE, {qkv}, {2, 16, 32, 1})[0];
      const int64_t k4 = b.op(Op::RESHAPE, {k, ci(b, 8), ci(b, 17), ci(b, 2), ci(b, 8)}, {})[0];
      b.output(b.op(Op::PERMUTE, {k4}, {0, 2, 1, 3})[0], {0, 1, 2, 3}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 0);
    assert_true(t.group_a == std::vector<size_t>({2}));
    assert_int_equal(t.dim_b, 3);
    assert_true(t.group_b.empty());
    assert_true(contains(g.plan.source, "aq_"));
    check_walks(t, {8, 2, 17, 8});
  }
  {  // dropout + residual (corpus 1631654200 c0127): x stored B innermost,
     // then H; the outputs contiguous. b = H, the last dim, stays alone
     // (a feature dim fills tiles; the unravel cost 28% there), A = {B, S}
     // (x's next dim, H, is b: A takes the one after it)
    Inputs in;
    in.push_back(kftest::tensor(DType::BF16, {4, 6, 70}, {1, 280, 4}));
    in.push_back(kftest::tensor(DType::BF16, {4, 6, 70}));
    const Generated g = generate([](Builder& b) {
      const int64_t x = b.tensor_input(3, DType::BF16), r = b.tensor_input(3, DType::BF16);
      b.output(b.op(Op::ADD, {x, r}, {})[0], {0, 1, 2}, -1);
    }, in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_int_equal(t.dim_a, 0);
    assert_int_equal(t.dim_b, 2);
    assert_true(t.group_a == std::vector<size_t>({1}) && t.group_b.empty());
    assert_false(contains(g.plan.source, "br_"));
    check_walks(t, {4, 6, 70});
  }
  {  // a plain 2-d transpose: one-dim groups, today's kernel (no unravelling)
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {8, 64}));
    in.push_back(kftest::tensor(DType::F32, {8, 64}, {1, 8}));
    const Generated g = generate(add_2d(DType::F32), in);
    const auto& t = std::get<TiledParams>(g.schedule);
    assert_true(t.group_a.empty() && t.group_b.empty());
    assert_false(contains(g.plan.source, "ar_"));
    assert_true(g.plan.ungrouped_name.empty() && g.plan.launch.tile_group_dims.empty());
    check_walks(t, {8, 64});
  }
}

// A rotary embedding written in place (rotate-half along the last dim)
// under Tuning::pointwise_in_place_windows: the loop's window is its last
// dim; both kernels (vectors, and the scalar twin) run block iterations
// of whole windows with a barrier before their stores (compiled by
// test_compile); the launch rule carries the window for the call's check
// and q as the input a call whose window is too long copies.
void test_in_place_windows(void** /*state*/) {
  auto rope = parse_fusion(
      "input q: tensor<float32, 2>\ninput c: tensor<float32, 2>\ninput s: tensor<float32, 2>\n"
      "q1 = slice(q) {dim=1, start=0, stop=64}\nq2 = slice(q) {dim=1, start=64, stop=end}\nn2 = neg(q2)\n"
      "r = cat(n2, q1) {dim=1}\nqc = mul(q, c)\nrs = mul(r, s)\ny = add(qc, rs)\noutput y {alias=0}\n");
  Inputs in;
  for (int k = 0; k < 3; ++k) in.push_back(kftest::tensor(DType::F32, {4096, 128}));
  auto c = kftest::concretize(rope, in);
  Tuning tuning;
  tuning.pointwise_in_place_windows = 1;
  const KernelSchedule schedule = kftest::schedule(c, tuning);
  const PointwiseParams& p = std::get<PointwiseParams>(schedule);
  assert_int_equal(p.loops.size(), 1);
  const PointwiseLoop& loop = p.loops[0];
  assert_int_equal(loop.window, 1);
  assert_true(loop.vectors.width > 0);
  assert_int_equal(loop.flat.width, 0);  // (flat vectors cross windows)
  const KernelPlan plan = emit_kernel(*c, root_task(*rope), schedule);
  batch().add(plan);
  assert_int_equal(plan.launch.windows.size(), 1);
  assert_true(plan.launch.windows[0].dims == std::vector<int>{1});
  const int64_t steps = std::min<int64_t>(int64_t{loop.vectors.width} * loop.unroll, std::max(p.scalar_unroll, 1));
  assert_int_equal(plan.launch.windows[0].span, int64_t{p.block} * steps);
  assert_true(plan.launch.window_inputs == std::vector<int64_t>{0});
  assert_int_equal(plan.scalar_twins.size(), 1);
  for (const std::string& name : {plan.name, plan.scalar_twins[0].scalar}) {
    const std::string& src = plan.units[plan.unit_of(name)].source;
    assert_true(contains(src, "kfwin"));
    assert_true(contains(src, "__syncthreads();"));
  }
  tuning.pointwise_in_place_windows = 0;
  const KernelSchedule off = kftest::schedule(c, tuning);
  assert_int_equal(std::get<PointwiseParams>(off).loops[0].window, 0);
  assert_true(emit_kernel(*c, root_task(*rope), off).launch.windows.empty());
}

// Row norms into outputs laid out across the rows (RowParams::across):
// the concrete fusion's order for the output set to the caller's (what
// layout.cpp keeps under KFUSE_TUNE_ROW_ACROSS_OUTPUTS), the row scheduler
// plans the across kernel alone, its launch a warp per row and 16 rows per
// block, and the kernel (compiled by test_compile) fills a shared tile per
// chunk between barriers.
void test_rows_across(void** /*state*/) {
  struct Case {
    const char* text;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<int> order;
  };
  const Case cases[] = {
      {"input x: tensor<float32, 2>\nconst eps: float32 = 1e-5\n"
       "var, mean = var_mean(x) {axes=[1], keepdim=true, correction=0}\nve = add(var, eps)\nr = rsqrt(ve)\n"
       "xc = sub(x, mean)\ny = mul(xc, r)\noutput y\n",
       DType::F32, {4096, 1000}, {1, 0}},
      {"input x: tensor<bfloat16, 3>\nxf = cast(x) {dtype=float32}\nm = max(xf) {axes=[2], keepdim=true}\n"
       "d = sub(xf, m)\ne = exp(d)\ns = sum(e) {axes=[2], keepdim=true}\np = div(e, s)\n"
       "y = cast(p) {dtype=bfloat16}\nl = log(s)\nlse = add(l, m)\noutput y\noutput lse\n",
       DType::BF16, {2, 100, 4096}, {0, 2, 1}},
  };
  for (const Case& k : cases) {
    auto f = parse_fusion(k.text);
    Inputs in;
    in.push_back(kftest::tensor(k.dtype, k.shape));
    auto across = std::make_shared<ConcreteFusion>(*kftest::concretize(f, in));
    const int64_t y = f->outputs[0].value;
    across->stride_orders[static_cast<size_t>(y)] = k.order;
    const KernelSchedule schedule = kftest::schedule(across);
    const RowParams& p = std::get<RowParams>(schedule);
    assert_true(p.across == std::vector<int64_t>{y});
    assert_int_equal(p.across_rows, 16);
    assert_true(p.vectors.width > 0);
    assert_true(std::find(p.vectors.outputs.begin(), p.vectors.outputs.end(), y) == p.vectors.outputs.end());
    const KernelPlan plan = emit_kernel(*across, root_task(*f), schedule);
    batch().add(plan);
    assert_true(plan.scalar_twins.empty() && plan.long_row_name.empty() && plan.split_rows.empty() &&
                plan.short_rows_name.empty() && plan.cluster_name.empty() && plan.long_edges_name.empty());
    assert_int_equal(plan.launch.across_rows, 16);
    const std::string& src = plan.units[plan.unit_of(plan.name)].source;
    assert_true(contains(src, "kf_tile"));
    assert_true(contains(src, "__syncthreads();  // the chunk's tiles are written"));
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < k.shape.size(); ++d) rows *= k.shape[d];
    const cuda::LaunchDims dims = cuda::launch_dims(plan.launch, k.shape, 65535, 132);
    assert_int_equal(dims.block, 32);
    assert_int_equal(dims.block_y, 16);
    assert_int_equal(dims.grid, (rows + 15) / 16);
    assert_false(dims.long_rows);
    // In the inputs' own order the same fusion keeps its usual kernels.
    const KernelSchedule own_schedule = kftest::schedule(kftest::concretize(f, in));
    const RowParams& own = std::get<RowParams>(own_schedule);
    assert_true(own.across.empty());
    assert_true(own.kernels.long_rows);
  }
}

// A log-sum-exp over dim 0 of a row-major [4096, 1024] (a column
// reduction without domain outputs, as cross-entropy forward over
// column-major logits is once its gather recomputes the logits): two
// phases, or, under Tuning::column_online_statistics, one online pass of
// kf_online pairs, combined in the finish kernel (compiled by
// test_compile).
void test_column_online_statistics(void** /*state*/) {
  auto lse = parse_fusion(
      "input x: tensor<float32, 2>\n"
      "m = max(x) {axes=[0], keepdim=true}\n"
      "d = sub(x, m)\n"
      "e = exp(d)\n"
      "s = sum(e) {axes=[0], keepdim=true}\n"
      "l = log(s)\n"
      "y = add(l, m)\n"
      "output y\n");
  for (const int online : {0, 1}) {
    Inputs in;
    in.push_back(kftest::tensor(DType::F32, {4096, 1024}));
    auto c = kftest::concretize(lse, in);
    Tuning tuning;
    tuning.column_online_statistics = online;
    const KernelSchedule schedule = kftest::schedule(c, tuning);
    const ColumnParams& p = std::get<ColumnParams>(schedule);
    assert_false(p.rows.normalizes);
    assert_int_equal(p.online.size(), static_cast<size_t>(online));
    assert_int_equal(p.rows.phases.size(), online != 0 ? 1 : 2);
    const KernelPlan plan = emit_kernel(*c, root_task(*lse), schedule);
    batch().add(plan);
    const std::string& src = plan.units[plan.unit_of(plan.name)].source;
    assert_int_equal(contains(src, "kf_online_op()("), online != 0);
  }
}

void test_compile(void** /*state*/) {
  const std::string err = batch().compile_all();
  if (!err.empty()) fail_msg("%zu kernels: %s", batch().size(), err.substr(0, 4000).c_str());
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pointwise_layouts),
      cmocka_unit_test(test_fusions),
      cmocka_unit_test(test_fast_paths),
      cmocka_unit_test(test_short_rows),
      cmocka_unit_test(test_edge_kernel),
      cmocka_unit_test(test_lanes_past_the_row),
      cmocka_unit_test(test_flat_vectors),
      cmocka_unit_test(test_scatter_update_unroll),
      cmocka_unit_test(test_misaligned_vectors),
      cmocka_unit_test(test_unaligned_row_inputs),
      cmocka_unit_test(test_reshape_target_extents),
      cmocka_unit_test(test_shifted_vectors),
      cmocka_unit_test(test_inner_outer),
      cmocka_unit_test(test_memory_order),
      cmocka_unit_test(test_short_columns),
      cmocka_unit_test(test_column_online_statistics),
      cmocka_unit_test(test_in_place_windows),
      cmocka_unit_test(test_rows_across),
      cmocka_unit_test(test_row_kernels_follow_the_plan),
      cmocka_unit_test(test_rejections),
      cmocka_unit_test(test_matmul_epilogue_kernels),
      cmocka_unit_test(test_tile_groups),
      cmocka_unit_test(test_tiles_walk_b_with_a),
      cmocka_unit_test(test_tiles_vectors_without_fill),
      cmocka_unit_test(test_loops_of_different_sizes),
      cmocka_unit_test(test_compile),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
