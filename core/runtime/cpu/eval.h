// The CPU reference backend: evaluates one Expr at a time on TensorViews.
// It is the oracle for the GPU backend, so each op follows PyTorch's
// semantics exactly (see docs/semantics.md): floats are computed in double
// and rounded once to the output dtype; integers are exact and wrap to
// their width; reductions accumulate in double (floats) or int64 (ints).
#pragma once

#include <vector>

#include "core/ir/fusion.h"
#include "core/runtime/cpu/tensor_view.h"

namespace kf::cpu {

// Values by id. A value is ready once set; inputs and constants are set by
// the caller before evaluation.
struct Env {
  std::vector<TensorView> values;
  std::vector<bool> ready;
  Env() = default;
  explicit Env(size_t n) : values(n), ready(n, false) {}
  void unset(int64_t id) {
    values[static_cast<size_t>(id)] = TensorView{};
    ready[static_cast<size_t>(id)] = false;
  }
  void set(int64_t id, TensorView t) {
    values[static_cast<size_t>(id)] = std::move(t);
    ready[static_cast<size_t>(id)] = true;
  }
  const TensorView& get(int64_t id) const { return values[static_cast<size_t>(id)]; }
};

// Computes every output of `e` from its (ready) inputs and sets them in env.
// Outputs may be views of inputs' storage; inputs are never written.
// Throws kf::Error for run-time errors (index out of range...).
void eval_expr(const Fusion& fusion, const Expr& e, Env& env);

// Size rules' context over env: sizes of ready values; scalar values from
// constants or the scalar inputs' 0-dim views.
class EnvSizes final : public SizeContext {
 public:
  EnvSizes(const Fusion& fusion, const Env& env) : fusion_(fusion), env_(env) {}
  std::span<const int64_t> sizes_of(int64_t id) const override { return env_.get(id).sizes; }
  int64_t shape_scalar(int64_t id) const override;

 private:
  const Fusion& fusion_;
  const Env& env_;
};

// The sizes of e's outputs (size rules over env).
Sizes output_sizes(const Fusion& fusion, const Expr& e, const Env& env);

// A 0-dim tensor holding a constant's value.
TensorView constant_view(const Value& v);

// One family of ops each (ops_*.cpp).
void eval_pointwise(const Fusion& fusion, const Expr& e, Env& env);
void eval_reduction(const Fusion& fusion, const Expr& e, Env& env);
void eval_shape(const Fusion& fusion, const Expr& e, Env& env);
void eval_indexing(const Fusion& fusion, const Expr& e, Env& env);
void eval_scatter(const Fusion& fusion, const Expr& e, Env& env);  // ops_scatter.cpp
void eval_scan(const Fusion& fusion, const Expr& e, Env& env);     // ops_scan.cpp
void eval_creation(const Fusion& fusion, const Expr& e, Env& env);
void eval_library(const Fusion& fusion, const Expr& e, Env& env);

}  // namespace kf::cpu
