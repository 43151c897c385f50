// Helpers shared by the C++ tests of the CPU reference (tests/cpu/test_cpu_*.cpp):
// tensors from values, evaluating a fusion expr by expr, and exact
// comparisons. Include it after the project headers: cmocka defines a fail()
// macro that kf::fail's declaration must not see.
#pragma once

#include "core/define/builder.h"
#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {  // this cmocka's header has no C++ guard
#include <cmocka.h>
}

#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace {

using namespace kf;
using namespace kf::cpu;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Inputs = std::vector<std::pair<int64_t, TensorView>>;

inline TensorView tensor(DType t, const Sizes& sizes, const std::vector<double>& vals) {
  TensorView v = allocate(t, sizes);
  for (size_t i = 0; i < vals.size(); ++i) store_f64(t, v.data + i * dtype_size(t), vals[i]);
  return v;
}

// Evaluates every expr of the fusion with constants and `inputs` set.
inline Env run(const Fusion& f, const Inputs& inputs) {
  Env env(f.values.size());
  for (const Value& v : f.values)
    if (v.kind == ValueKind::Constant) env.set(v.id, constant_view(v));
  for (const auto& [id, t] : inputs) env.set(id, t);
  for (const Expr& e : f.exprs) eval_expr(f, e, env);
  return env;
}

inline std::vector<double> values(const TensorView& t) {
  std::vector<double> out;
  for_each_index(t.sizes, [&](const int64_t* idx) { out.push_back(load_f64(t.dtype, t.at(idx))); });
  return out;
}

// Bitwise-equal doubles, NaNs equal, signed zeros distinct.
inline bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

inline void expect_values(const TensorView& t, const std::vector<double>& expected, const char* what) {
  std::vector<double> got = values(t);
  if (got.size() != expected.size())
    fail_msg("%s: %zu values, expected %zu", what, got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], expected[i]))
      fail_msg("%s: element %zu is %.17g, expected %.17g", what, i, got[i], expected[i]);
}

inline double round_to(DType t, double x) {
  std::byte buf[8];
  store_f64(t, buf, x);
  return load_f64(t, buf);
}

}  // namespace
