#include "core/simplify/decompose.h"

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/ir/op_attrs.h"

namespace kf {

namespace {

class Decomposer {
 public:
  explicit Decomposer(Fusion& f) : f_(f) {}

  size_t run() {
    std::vector<Expr> defined = std::move(f_.exprs);
    f_.exprs.clear();
    size_t count = 0;
    for (Expr& e : defined) {
      if (e.op == Op::ARGMAX || e.op == Op::ARGMIN) {
        arg_reduction(e);
        ++count;
        continue;
      }
      f_.exprs.push_back(std::move(e));
    }
    if (count == 0) return 0;
    for (Value& v : f_.values) v.producer = -1;
    for (size_t i = 0; i < f_.exprs.size(); ++i)
      for (int64_t o : f_.exprs[i].outputs) f_.values[static_cast<size_t>(o)].producer = static_cast<int64_t>(i);
    return count;
  }

 private:
  int64_t constant(int64_t x) { return f_.add_constant_i64(x); }

  int64_t emit(Op op, std::vector<int64_t> args, std::vector<int64_t> attrs, DType dtype, int rank,
               bool is_scalar = false, int64_t out = -1) {
    if (out < 0) out = f_.add_computed(dtype, rank, is_scalar);
    f_.exprs.push_back(Expr{op, std::move(args), {out}, std::move(attrs)});
    return out;
  }

  void arg_reduction(const Expr& e) {
    const int64_t x = e.inputs[0];
    const Value& xv = f_.value(x);
    const DType t = xv.dtype;
    const int r = xv.rank;
    const ReduceAttrs ra(e);
    const int64_t d = ra.axes[0];
    const bool max = e.op == Op::ARGMAX;
    const int64_t m = emit(max ? Op::MAX : Op::MIN, {x}, {1, d}, t, r);
    int64_t hit = emit(Op::EQ, {x, m}, {}, DType::Bool, r);
    if (is_float(t)) hit = emit(Op::LOGICAL_OR, {hit, emit(Op::ISNAN, {x}, {}, DType::Bool, r)}, {}, DType::Bool, r);
    // iota over dim d, laid along it: [1, .., n, .., 1].
    const int64_t n = emit(Op::SIZE, {x}, {d}, DType::I64, 0, true);
    int64_t index = emit(Op::IOTA, {n, constant(0), constant(1)}, {static_cast<int64_t>(DType::I64)}, DType::I64, 1);
    if (r > 1) {
      std::vector<int64_t> shape;
      for (int k = 0; k < r; ++k) shape.push_back(k == d ? n : constant(1));
      shape.insert(shape.begin(), index);
      index = emit(Op::BROADCAST_IN_DIM, std::move(shape), {d}, DType::I64, r);
    }
    const int64_t masked =
        emit(Op::WHERE, {hit, index, constant(std::numeric_limits<int64_t>::max())}, {}, DType::I64, r);
    const int64_t out = e.outputs[0];
    emit(Op::MIN, {masked}, {ra.keepdim ? 1 : 0, d}, DType::I64, f_.value(out).rank, false, out);
  }

  Fusion& f_;
};

}  // namespace

size_t decompose(Fusion& fusion) { return Decomposer(fusion).run(); }

}  // namespace kf
