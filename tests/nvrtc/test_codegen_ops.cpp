// Every op of ops.def on every dtype its type rule accepts, each in a small
// fusion, generated and compiled with NVRTC for sm_80 and sm_90 with an
// empty log (no warnings). Kernels are batched into one program per arch.
#include "core/define/builder.h"
#include "core/codegen/kernel_plan.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <array>
#include <cstring>
#include <functional>

#include "tests/nvrtc/codegen_harness.h"

using namespace kf;
using kftest::Inputs;

namespace {

const DType kAll[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool, DType::F8E4M3, DType::F8E5M2, DType::I8, DType::U8};

int64_t ci(Builder& b, int64_t v) { return b.constant_i64(v, DType::I64); }

// Builds with `define`; returns false when the builder rejects the dtypes.
bool add_case(kftest::Batch& batch, const std::function<void(Builder&)>& define, const Inputs& inputs,
              const char* what) {
  std::shared_ptr<Fusion> f;
  try {
    Builder b;
    define(b);
    f = b.finalize();
  } catch (const Error&) {
    return false;
  }
  try {
    batch.add(kftest::plan(kftest::concretize(f, inputs)));
  } catch (const Error& e) {
    fail_msg("%s: %s", what, e.what());
  }
  return true;
}

void compile_batch(const kftest::Batch& batch, const char* what) {
  const std::string err = batch.compile_all();
  if (!err.empty()) {
    std::fprintf(stderr, "%s\n", batch.body().substr(0, 20000).c_str());
    fail_msg("%s (%zu kernels): %s", what, batch.size(), err.substr(0, 4000).c_str());
  }
}

// Whether the builder accepts `op` on these operand kinds for dtype t.
bool accepts(Op op, DType t, bool scalar_operand) {
  try {
    Builder b;
    const int64_t x = b.tensor_input(2, t);
    const int64_t y = scalar_operand ? b.scalar_input(t) : b.tensor_input(2, t);
    std::vector<int64_t> args = {x, y, x};
    if (op == Op::WHERE) args[0] = b.op(Op::ISNAN, {x}, {})[0];
    args.resize(static_cast<size_t>(op_info(op).num_inputs));
    b.op(op, args, {});
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Per dtype, one fusion holds every pointwise op the dtype accepts: on
// tensors broadcast against each other, and with a scalar input and a
// constant as operands. The last dim has size 1, so these kernels take the
// scalar path (the vector path is covered by test_codegen_schedulers).
void test_pointwise_ops(void** /*state*/) {
  kftest::Batch batch;
  int ops = 0;
  for (DType t : kAll) {
    Inputs in;
    in.push_back(kftest::tensor(t, {6, 5, 1}));
    in.push_back(kftest::tensor(t, {5, 1}));
    in.push_back(kftest::tensor(t, {6, 1, 1}));
    in.push_back(kftest::scalar(t, 2));
    const std::string what = "pointwise ops on " + std::string(dtype_name(t));
    assert_true(add_case(batch, [&](Builder& b) {
      const int64_t x = b.tensor_input(3, t), y = b.tensor_input(2, t), z = b.tensor_input(3, t);
      const int64_t s = b.scalar_input(t);
      // A float8 scalar promotes with no other float (where's two scalar
      // branches): its constant has its own dtype.
      const int64_t k = is_fp8(t)     ? b.constant_f64(0.5, t)
                        : is_float(t) ? b.constant_f64(0.5, DType::F64)
                                      : b.constant_i64(3, DType::I64);
      for (int o = 0; o < static_cast<int>(Op::COUNT); ++o) {
        const Op op = static_cast<Op>(o);
        if (!is_pointwise(op) || op == Op::CAST) continue;
        const size_t n = static_cast<size_t>(op_info(op).num_inputs);
        const int64_t cond = op == Op::WHERE ? b.op(Op::ISNAN, {x}, {})[0] : -1;
        if (accepts(op, t, false)) {
          std::vector<int64_t> args = {x, y, z};
          if (op == Op::WHERE) args = {cond, y, z};
          args.resize(n);
          b.output(b.op(op, args, {})[0], {}, -1);
          ++ops;
        }
        if (n >= 2 && accepts(op, t, true)) {
          std::vector<int64_t> args = {x, s, k};
          if (op == Op::WHERE) args = {cond, s, k};
          args.resize(n);
          b.output(b.op(op, args, {})[0], {}, -1);
          args[0] = k;  // constant first, tensor second
          args[1] = op == Op::WHERE ? x : y;
          if (op == Op::WHERE) args[0] = cond;
          b.output(b.op(op, args, {})[0], {}, -1);
        }
      }
    }, in, what.c_str()));
  }
  assert_true(ops > 250);
  compile_batch(batch, "pointwise ops");
}

void test_cast_and_creation(void** /*state*/) {
  kftest::Batch batch;
  for (DType from : kAll) {
    Inputs in;
    in.push_back(kftest::tensor(from, {6, 4}));
    assert_true(add_case(batch, [&](Builder& b) {
      const int64_t x = b.tensor_input(2, from);
      for (DType to : kAll) b.output(b.op(Op::CAST, {x}, {static_cast<int64_t>(to)})[0], {}, -1);
    }, in, "cast"));
  }
  for (DType t : kAll) {
    Inputs none;
    assert_true(add_case(batch, [&](Builder& b) {
      const int64_t fill = is_float(t) ? b.constant_f64(1.5, DType::F64) : b.constant_i64(7, DType::I64);
      b.output(b.op(Op::FULL, {ci(b, 3), ci(b, 5), fill}, {static_cast<int64_t>(t)})[0], {}, -1);
    }, none, "full"));
    if (!is_bool(t)) {
      for (bool float_step : {false, true})
        assert_true(add_case(batch, [&](Builder& b) {
          const int64_t step = float_step ? b.constant_f64(0.25, DType::F64) : ci(b, 2);
          b.output(b.op(Op::IOTA, {ci(b, 10), ci(b, 1), step}, {static_cast<int64_t>(t)})[0], {}, -1);
        }, none, "iota"));
    }
    if (is_float(t)) {
      for (Op op : {Op::UNIFORM, Op::NORMAL}) {
        Inputs in;
        in.push_back(kftest::scalar(DType::I64, 42));
        in.push_back(kftest::scalar(DType::I64, 7));
        assert_true(add_case(batch, [&](Builder& b) {
          const int64_t seed = b.scalar_input(DType::I64), offset = b.scalar_input(DType::I64);
          b.output(b.op(op, {ci(b, 4), ci(b, 6), b.constant_f64(0, DType::F64), b.constant_f64(1, DType::F64), seed, offset},
                        {static_cast<int64_t>(t)})[0], {}, -1);
        }, in, "random"));
      }
    }
  }
  compile_batch(batch, "cast and creation");
}

void test_reductions(void** /*state*/) {
  kftest::Batch batch;
  int cases = 0;
  for (Op op : {Op::SUM, Op::PROD, Op::MAX, Op::MIN, Op::MEAN, Op::VAR, Op::VAR_MEAN})
    for (DType t : kAll)
      for (int keepdim : {0, 1}) {
        Inputs in;
        in.push_back(kftest::tensor(t, {7, 33}));
        const bool is_var = op == Op::VAR || op == Op::VAR_MEAN;
        cases += add_case(batch, [&](Builder& b) {
          const int64_t x = b.tensor_input(2, t);
          std::vector<int64_t> attrs = {keepdim};
          if (is_var) attrs.push_back(1);
          attrs.push_back(1);
          for (int64_t o : b.op(op, {x}, attrs)) b.output(o, {}, -1);
        }, in, op_info(op).name.data());
      }
  assert_true(cases >= 50);
  compile_batch(batch, "reductions");
}

// Each shape op in a fusion of its own: one fusion holding all of them
// generates a kernel with a loop per output shape, which NVRTC takes
// seconds to compile (its time grows faster than the kernel's length).
void test_shape_and_indexing(void** /*state*/) {
  kftest::Batch batch;
  using Define = std::function<int64_t(Builder&, int64_t x, int64_t y, int64_t idx, int64_t gidx, int64_t pv)>;
  const std::vector<Define> ops = {
      [](Builder& b, int64_t x, int64_t, int64_t, int64_t, int64_t) {
        return b.op(Op::BROADCAST_IN_DIM, {x, ci(b, 2), ci(b, 4), ci(b, 3), ci(b, 6)}, {1, 2, 3})[0]; },
      [](Builder& b, int64_t x, int64_t, int64_t, int64_t, int64_t) {
        return b.op(Op::EXPAND, {x, ci(b, 4), ci(b, 3), ci(b, -1)}, {})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::RESHAPE, {y, ci(b, 12), ci(b, -1)}, {})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::RESHAPE, {y, ci(b, 2), ci(b, 36)}, {})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::PERMUTE, {y}, {2, 0, 1})[0]; },
      [](Builder& b, int64_t x, int64_t, int64_t, int64_t, int64_t) { return b.op(Op::SQUEEZE, {x}, {1})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::UNSQUEEZE, {y}, {3})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::SLICE, {y}, {2, 1, -1, 2})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::SLICE, {y}, {0, -3, 100, 1})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t pv) { return b.op(Op::PAD, {y, pv}, {0, 0, 1, 2, 3, 0})[0]; },
      [](Builder& b, int64_t x, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::CAT, {x, y, x}, {1})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t idx, int64_t, int64_t) { return b.op(Op::INDEX_SELECT, {y, idx}, {0})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t gidx, int64_t) { return b.op(Op::GATHER, {y, gidx}, {2})[0]; },
      [](Builder& b, int64_t, int64_t y, int64_t, int64_t, int64_t) { return b.op(Op::SEGMENT_SET, {y}, {})[0]; },
  };
  for (DType t : kAll)
    for (const Define& define : ops) {
      Inputs in;
      // Dim 0 innermost in memory: outputs follow, so no vector loop (the
      // sweep checks index arithmetic; vectors are tested elsewhere).
      in.push_back(kftest::tensor(t, {4, 1, 6}, {1, 4, 4}));
      in.push_back(kftest::tensor(t, {4, 3, 6}, {1, 4, 12}));
      in.push_back(kftest::tensor(DType::I64, {5}));
      in.push_back(kftest::tensor(DType::I32, {4, 1, 2}));
      in.push_back(kftest::scalar(t, 0));
      assert_true(add_case(batch, [&](Builder& b) {
        const int64_t x = b.tensor_input(3, t), y = b.tensor_input(3, t);
        const int64_t idx = b.tensor_input(1, DType::I64), gidx = b.tensor_input(3, DType::I32);
        const int64_t pv = b.scalar_input(t);
        b.output(define(b, x, y, idx, gidx, pv), {}, -1);
      }, in, "shape op"));
    }
  compile_batch(batch, "shape and indexing");
}

// scatter and index_reduce: every dtype, reduction, include_self and
// path (atomic, sorted), with a strided input.
void test_scatter(void** /*state*/) {
  kftest::Batch batch;
  int cases = 0;
  for (DType t : kAll)
    for (Op op : {Op::SCATTER, Op::INDEX_REDUCE})
      // Each path once per dtype: sorted (none, sum without self), atomic
      // (sum; prod and amax through the clear kernel and a CAS loop; mean
      // with its counts).
      // (an array, not a structured binding: clang 14, the sanitizer and
      // fuzzer build's compiler, cannot capture bindings in a lambda)
      for (const std::array<int64_t, 3> mode : {std::array<int64_t, 3>{0, 1, 1}, {1, 1, 0}, {1, 0, 1}, {2, 0, 0},
                                                {3, 1, 0}, {4, 0, 0}}) {
            Inputs in;
            in.push_back(kftest::tensor(t, {4, 6}, {1, 4}));
            in.push_back(kftest::tensor(op == Op::SCATTER ? DType::I64 : DType::I32, op == Op::SCATTER ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{5}));
            in.push_back(kftest::tensor(t, op == Op::SCATTER ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{4, 5}));
            cases += add_case(batch, [&](Builder& b) {
              const int64_t x = b.tensor_input(2, t);
              const int64_t idx = b.tensor_input(op == Op::SCATTER ? 2 : 1, op == Op::SCATTER ? DType::I64 : DType::I32);
              const int64_t src = b.tensor_input(2, t);
              b.output(b.op(op, {x, idx, src}, {1, mode[0], mode[1], mode[2]})[0], {}, -1);
            }, in, op_info(op).name.data());
          }
  assert_true(cases >= 100);
  compile_batch(batch, "scatter");
}

// cumsum, cumprod, cummax: every dtype, inclusive and exclusive, a line
// per block (the scanned dim innermost) and a line per thread.
void test_scans(void** /*state*/) {
  kftest::Batch batch;
  int cases = 0;
  for (DType t : kAll)
    for (Op op : {Op::CUMSUM, Op::CUMPROD, Op::CUMMAX})
      for (int64_t dim : {0, 1})
        for (int64_t exclusive : {0, 1}) {
          if (dim == 0 && exclusive == 0 && t != DType::F32 && t != DType::BF16 && t != DType::I64) continue;
          Inputs in;
          in.push_back(kftest::tensor(t, {5, 33}));
          cases += add_case(batch, [&](Builder& b) {
            b.output(b.op(op, {b.tensor_input(2, t)}, {dim, exclusive})[0], {}, -1);
          }, in, op_info(op).name.data());
        }
  assert_true(cases >= 80);
  compile_batch(batch, "scans");
}

void test_library_rejected(void** /*state*/) {
  Builder b;
  const int64_t a = b.tensor_input(2, DType::F32), w = b.tensor_input(2, DType::F32);
  b.output(b.op(Op::MATMUL, {a, w}, {})[0], {}, -1);
  auto f = b.finalize();
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {4, 8}));
  in.push_back(kftest::tensor(DType::F32, {8, 3}));
  auto c = kftest::concretize(f, in);
  const ScheduleProposal p = propose_schedule(*c, root_task(*f), Tuning{});
  assert_false(p.schedule.has_value());
  assert_true(p.why.find("library segment (cuBLASLt)") != std::string::npos);
}

}  // namespace

int main(int argc, char** argv) {
  kftest::skip_without_nvrtc();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pointwise_ops),
      cmocka_unit_test(test_cast_and_creation),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_scatter),
      cmocka_unit_test(test_scans),
      cmocka_unit_test(test_shape_and_indexing),
      cmocka_unit_test(test_library_rejected),
  };
  return kftest::run_selected_tests(tests, argc, argv);
}
