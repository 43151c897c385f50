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

// The deferral threshold in bytes (KFUSE_CPU_STREAM_BYTES, read once).
uint64_t stream_bytes();

// Values by id. A value is ready once set; inputs and constants are set by
// the caller before evaluation.
//
// Memory. A value is held at the size of its distinct elements: a
// pointwise op whose operands are all broadcast along a dim (stride 0)
// computes one line of that dim and gives its result stride 0 there, a
// reduction does the same along a kept dim its input is broadcast in, and
// full is one element broadcast. So a broadcast costs no more downstream
// than its source.
//
// A value that one op reads, once (not a result of the segment), and whose
// distinct elements take at least stream_bytes() may be deferred instead
// (TensorView::source): computed element by element as that op reads it,
// never stored. Pointwise ops, casts, iota and random ops defer, except
// those that can fail (integer fmod, remainder, pow: their errors come when
// they run) and past Source::kMaxDepth deferred values in a chain (a read
// recurses through them). View ops and hints pass a deferred value on;
// pointwise ops, reductions and the other shape ops read it
// (TensorView::read, copy_into); any other op gets its deferred operands
// stored first (materialize), and a view of a deferred value that more
// than one op reads is stored when it is made. Values are released after
// their last read in the segment. What is stored is counted against
// host_memory.h's limit first.
struct Env {
  std::vector<TensorView> values;
  std::vector<bool> ready;
  // Reads of each value still to come in this segment (one per occurrence
  // in an expr's inputs; a segment result counts kResult more). Empty (as
  // from Env(n)): nothing is deferred or released early.
  std::vector<int64_t> reads;
  static constexpr int64_t kResult = int64_t{1} << 40;
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
  // Whether one op reads value `id`, once (asked before any of its reads).
  bool read_once(int64_t id) const {
    const size_t i = static_cast<size_t>(id);
    return i < reads.size() && reads[i] == 1;
  }
  // Whether value `id`, whose distinct elements take `bytes`, is deferred.
  bool defers(int64_t id, uint64_t bytes) const { return read_once(id) && bytes >= stream_bytes(); }
};

// Computes every output of `e` from its (ready) inputs and sets them in env.
// Outputs may be views of inputs' storage, or deferred; inputs are never
// written. Throws kf::Error for run-time errors (index out of range...);
// running out of memory names the op and value.
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
