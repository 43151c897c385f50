#include "core/shard/shard.h"

#include <map>
#include <utility>

#include "core/ir/op_attrs.h"
#include "core/ir/type_promotion.h"
#include "core/util/error.h"

namespace kf {

namespace {

// The reduce attribute of allreduce and reduce_scatter: CommReduce's values
// (core/runtime/comm/communicator.h checks that they agree).
constexpr int64_t kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4;

// Per value, the dims known to have extent one whatever the inputs (a
// keepdim reduction's axes, an unsqueezed dim): a replicated operand
// broadcasts along them, so it needs no cut to meet a sharded one.
using OneMask = uint32_t;
static_assert(kMaxRank <= 32);
constexpr OneMask bit(int64_t d) { return OneMask{1} << d; }

int64_t reduce_of(Op op) {
  switch (op) {
    case Op::SUM: return kSum;
    case Op::PROD: return kProd;
    case Op::MAX: return kMax;
    case Op::MIN: return kMin;
    case Op::MEAN: return kAvg;
    default: fail(KF_ERR_INTERNAL, "shard: ", op_name(op), " has no collective reduce");
  }
}

class Sharder {
 public:
  explicit Sharder(Fusion& f) : f_(f), ranks_(f.mesh) {}

  void run() {
    const size_t n = f_.values.size();
    sh_.assign(n, {});
    one_.assign(n, 0);
    pending_.assign(n, {});
    for (size_t i = 0; i < f_.inputs.size(); ++i) sh_[static_cast<size_t>(f_.inputs[i])] = f_.input_shardings[i];
    std::vector<Expr> defined = std::move(f_.exprs);
    f_.exprs.clear();
    for (const Expr& e : defined) visit(e);
    for (size_t i = 0; i < f_.outputs.size(); ++i) output(i);
    clone_input_casts();
    f_.shardings = sh_;
    for (Value& v : f_.values) v.producer = -1;
    for (size_t i = 0; i < f_.exprs.size(); ++i)
      for (int64_t o : f_.exprs[i].outputs) f_.values[static_cast<size_t>(o)].producer = static_cast<int64_t>(i);
  }

 private:
  // A reduction over the sharded dim, not yet finished: each rank's own
  // reduction is in `partial`; a collective makes the value from it.
  struct Pending {
    int64_t partial = -1;
    int64_t reduce = kSum;
  };

  const Value& val(int64_t id) const { return f_.value(id); }
  bool is_tensor(int64_t id) const { return !val(id).is_scalar; }
  size_t at(int64_t id) const { return static_cast<size_t>(id); }

  // A new value, with its entries in the per-value tables.
  int64_t grown(int64_t id) {
    sh_.emplace_back();
    one_.push_back(0);
    pending_.emplace_back();
    return id;
  }
  int64_t new_value(DType dtype, int rank, bool is_scalar) { return grown(f_.add_computed(dtype, rank, is_scalar)); }
  int64_t constant_i64(int64_t value) { return grown(f_.add_constant_i64(value)); }

  // Appends op(args) writing `out` (a new value like `like` when out < 0).
  int64_t emit(Op op, std::vector<int64_t> args, std::vector<int64_t> attrs, int64_t out, DType dtype, int rank,
               bool is_scalar) {
    if (out < 0) out = new_value(dtype, rank, is_scalar);
    push(Expr{op, std::move(args), {out}, std::move(attrs)});
    return out;
  }
  int64_t emit_like(Op op, std::vector<int64_t> args, std::vector<int64_t> attrs, int64_t like, int64_t out = -1) {
    return emit(op, std::move(args), std::move(attrs), out, val(like).dtype, val(like).rank, val(like).is_scalar);
  }

  // Appends an expr, noting where each of its results is made.
  void push(Expr e) {
    for (int64_t o : e.outputs) {
      if (made_by_.size() <= at(o)) made_by_.resize(f_.values.size(), -1);
      made_by_[at(o)] = static_cast<int64_t>(f_.exprs.size());
    }
    f_.exprs.push_back(std::move(e));
  }

  // The expr (in the rewritten graph) that makes `id`, or -1.
  const Expr* made_by(int64_t id) const {
    if (at(id) >= made_by_.size() || made_by_[at(id)] < 0) return nullptr;
    return &f_.exprs[static_cast<size_t>(made_by_[at(id)])];
  }

  // Each operand of a pointwise op as it meets a result sharded on dim t
  // (t < 0: replicated): cut to its block where it covers t, whole where it
  // broadcasts along t.
  int64_t meet(int64_t in, int r, int t) {
    if (!is_tensor(in)) return in;
    if (t < 0) return as(in, {});
    const int j = t - (r - val(in).rank);
    const bool covers = j >= 0 && !((one_[at(in)] & bit(j)) && sh_[at(in)].dim != j);
    return as(in, covers ? Sharding{j} : Sharding{});
  }

  // This rank's block of a replicated pointwise result, computed from the
  // blocks of its operands instead of cut from the whole (a one-hot of
  // iota and labels then costs this rank's block, not a whole [rows,
  // vocab] tensor and a copy). Nullopt when `id` is not made by a
  // pointwise op.
  std::optional<int64_t> recompute_block(int64_t id, Sharding want) {
    const Expr* e = made_by(id);
    if (e == nullptr || !is_pointwise(e->op) || e->outputs.size() != 1) return std::nullopt;
    Expr cut = *e;
    const int r = val(id).rank;
    for (int64_t& in : cut.inputs) in = meet(in, r, want.dim);
    const int64_t out = new_value(val(id).dtype, r, false);
    cut.outputs = {out};
    sh_[at(out)] = want;
    one_[at(out)] = one_[at(id)];
    push(std::move(cut));
    return out;
  }

  // ---- changing a value's sharding ---------------------------------------

  // The value itself, finished by its allreduce if it was pending.
  int64_t finished(int64_t id) {
    Pending& p = pending_[at(id)];
    if (p.partial < 0) return id;
    emit_like(Op::ALLREDUCE, {p.partial}, {p.reduce, ranks_}, id, id);
    sh_[at(id)] = {};
    p.partial = -1;
    return id;
  }

  // `id` with sharding `want`: itself, or a gathered / cut copy (cached, so
  // every reader of one value shares them).
  int64_t as(int64_t id, Sharding want) {
    if (!is_tensor(id)) return id;
    Pending& p = pending_[at(id)];
    if (p.partial >= 0) {
      if (!want.sharded()) return finished(id);
      emit_like(Op::REDUCE_SCATTER, {p.partial}, {want.dim, p.reduce, ranks_}, id, id);
      sh_[at(id)] = want;
      p.partial = -1;
      return id;
    }
    if (sh_[at(id)] == want) return id;
    if (auto it = converted_.find({id, want.dim}); it != converted_.end()) return it->second;
    int64_t src = id;
    if (auto g = gathered_from_.find(id); g != gathered_from_.end() && g->second.second == want.dim)
      return g->second.first;  // the blocks this whole value was gathered from
    if (sh_[at(id)].sharded()) {
      src = emit_like(Op::ALLGATHER, {id}, {sh_[at(id)].dim, ranks_}, id);
      one_[at(src)] = one_[at(id)] & ~bit(sh_[at(id)].dim);
      converted_[{id, -1}] = src;
      gathered_from_[src] = {id, sh_[at(id)].dim};
      if (!want.sharded()) return src;
    }
    if (src == id)
      if (std::optional<int64_t> block = recompute_block(id, want)) {
        converted_[{id, want.dim}] = *block;
        return *block;
      }
    const int64_t cut = emit_like(Op::SHARD_SLICE, {src}, {want.dim, ranks_}, id);
    sh_[at(cut)] = want;
    one_[at(cut)] = one_[at(src)];
    converted_[{id, want.dim}] = cut;
    return cut;
  }

  // A cast of an input read by several exprs gets one copy per reader:
  // with a mesh, collectives split a fusion into several kernels, and a
  // cast shared across them would be written out in float32 by the first
  // and read back by the others (layernorm over a sharded dim: 1.1 GB
  // moved instead of 0.5 GB). Each kernel casts the input it reads.
  void clone_input_casts() {
    std::vector<int> readers(f_.values.size(), 0);
    for (const Expr& e : f_.exprs)
      for (int64_t in : e.inputs) ++readers[at(in)];
    std::vector<bool> is_output(f_.values.size(), false);
    for (const Output& o : f_.outputs) is_output[at(o.value)] = true;
    const std::vector<Expr> before = std::move(f_.exprs);
    std::vector<const Expr*> made_by(f_.values.size(), nullptr);
    for (const Expr& b : before)
      for (int64_t o : b.outputs) made_by[at(o)] = &b;
    f_.exprs.clear();
    made_by_.assign(f_.values.size(), -1);
    for (Expr e : before) {
      for (int64_t& in : e.inputs) {
        if (readers[at(in)] < 2 || is_output[at(in)]) continue;
        const Expr* p = made_by[at(in)];
        if (p == nullptr || p->op != Op::CAST || val(p->inputs[0]).kind != ValueKind::TensorInput) continue;
        const int64_t copy = new_value(val(in).dtype, val(in).rank, val(in).is_scalar);
        sh_[at(copy)] = sh_[at(in)];
        one_[at(copy)] = one_[at(in)];
        push(Expr{Op::CAST, p->inputs, {copy}, p->attrs});
        in = copy;
      }
      push(std::move(e));
    }
  }

  // ---- ops ------------------------------------------------------------------

  void visit(const Expr& e) {
    switch (op_info(e.op).category) {
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary:
      case OpCategory::Cast:
      case OpCategory::Hint: pointwise(e); return;
      case OpCategory::Reduction: reduction(e); return;
      case OpCategory::Shape: shape(e); return;
      case OpCategory::Query: size(e); return;
      case OpCategory::Library: library(e); return;
      case OpCategory::Indexing:
      case OpCategory::Scatter:
      case OpCategory::Scan:
      case OpCategory::Creation: whole(e); return;
      case OpCategory::Communication: fail(KF_ERR_INTERNAL, "shard: a definition holds ", op_name(e.op));
    }
  }

  // Every tensor operand whole; the results are whole.
  void whole(const Expr& e) {
    Expr out = e;
    for (int64_t& in : out.inputs) in = as(finished(in), {});
    push(std::move(out));
  }

  void pointwise(const Expr& e) {
    const int64_t result = e.outputs[0];
    const int r = val(result).rank;
    Expr out = e;
    for (int64_t& in : out.inputs) in = finished(in);
    int t = -1;  // the result's sharded dim: the first sharded operand's
    for (int64_t in : out.inputs)
      if (is_tensor(in) && sh_[at(in)].sharded()) {
        t = r - val(in).rank + sh_[at(in)].dim;
        break;
      }
    OneMask one = ~OneMask{0};
    for (int64_t& in : out.inputs) {
      if (!is_tensor(in)) continue;
      const int lead = r - val(in).rank;
      one &= (one_[at(in)] << lead) | (bit(lead) - 1);  // dims it lacks broadcast
      if (t >= 0) in = meet(in, r, t);
    }
    if (e.inputs.empty() || r == 0) one = 0;
    one_[at(result)] = one & (r >= 32 ? ~OneMask{0} : bit(r) - 1);
    if (t >= 0) one_[at(result)] &= ~bit(t);
    sh_[at(result)] = t >= 0 ? Sharding{t} : Sharding{};
    push(std::move(out));
  }

  // Where input dim d lands in a reduction's result (-1: reduced away).
  static int reduced_dim(const ReduceAttrs& ra, const std::vector<bool>& reduced, int d) {
    if (reduced[static_cast<size_t>(d)]) return ra.keepdim ? d : -1;
    if (ra.keepdim) return d;
    int k = 0;
    for (int i = 0; i < d; ++i) k += reduced[static_cast<size_t>(i)] ? 0 : 1;
    return k;
  }

  OneMask reduced_ones(const ReduceAttrs& ra, const std::vector<bool>& reduced, int64_t a) const {
    OneMask m = 0;
    for (int d = 0; d < static_cast<int>(reduced.size()); ++d) {
      const int o = reduced_dim(ra, reduced, d);
      if (o < 0) continue;
      if (reduced[static_cast<size_t>(d)] || (one_[at(a)] & bit(d))) m |= bit(o);
    }
    return m;
  }

  void reduction(const Expr& e) {
    const int64_t a = finished(e.inputs[0]);
    const ReduceAttrs ra(e);
    const std::vector<bool> reduced = ra.reduced(static_cast<size_t>(val(a).rank));
    const OneMask ones = reduced_ones(ra, reduced, a);
    const Sharding s = sh_[at(a)];
    Expr out = e;
    out.inputs[0] = a;
    for (int64_t o : e.outputs) one_[at(o)] = ones;
    if (!s.sharded() || !reduced[static_cast<size_t>(s.dim)]) {
      const int d = s.sharded() ? reduced_dim(ra, reduced, s.dim) : -1;
      for (int64_t o : e.outputs) sh_[at(o)] = Sharding{d};
      push(std::move(out));
      return;
    }
    if (e.op == Op::VAR || e.op == Op::VAR_MEAN) {
      variance(e, a, ra);
      return;
    }
    // Each rank reduces its block; the value waits for its collective.
    const int64_t v = e.outputs[0];
    const int64_t partial = emit_like(e.op, {a}, e.attrs, v);
    one_[at(partial)] = ones;
    pending_[at(v)] = {partial, reduce_of(e.op)};
  }

  // var / var_mean over the sharded dim: mean, allreduce(avg), centred sum
  // of squares, allreduce(sum), divided by the global count - correction.
  // Computed in float32 (float64 for float64) and rounded once at the end.
  void variance(const Expr& e, int64_t a, const ReduceAttrs& ra) {
    const DType out_t = val(e.outputs[0]).dtype;
    const DType ct = out_t == DType::F64 ? DType::F64 : DType::F32;
    const int r = val(a).rank;
    const Sharding s = sh_[at(a)];
    std::vector<int64_t> keep_axes{1};
    keep_axes.insert(keep_axes.end(), ra.axes.begin(), ra.axes.end());
    OneMask axes_mask = 0;
    for (int64_t ax : ra.axes) axes_mask |= bit(ax);

    int64_t x = a;
    if (val(a).dtype != ct) {
      x = emit(Op::CAST, {a}, {static_cast<int64_t>(ct)}, -1, ct, r, false);
      sh_[at(x)] = s;
    }
    const int64_t mean_part = emit(Op::MEAN, {x}, keep_axes, -1, ct, r, false);
    const int64_t mean = emit_like(Op::ALLREDUCE, {mean_part}, {kAvg, ranks_}, mean_part);
    one_[at(mean)] = axes_mask;
    const int64_t centred = emit(Op::SUB, {x, mean}, {}, -1, ct, r, false);
    sh_[at(centred)] = s;
    const int64_t squares = emit(Op::MUL, {centred, centred}, {}, -1, ct, r, false);
    sh_[at(squares)] = s;
    const int64_t sum_part = emit(Op::SUM, {squares}, keep_axes, -1, ct, r, false);
    const int64_t sum = emit_like(Op::ALLREDUCE, {sum_part}, {kSum, ranks_}, sum_part);
    one_[at(sum)] = axes_mask;
    // The global count: the local extents of the axes, times the ranks.
    int64_t count = constant_i64(ranks_);
    for (int64_t ax : ra.axes) {
      const int64_t extent = emit(Op::SIZE, {x}, {ax}, -1, DType::I64, 0, true);
      count = emit(Op::MUL, {count, extent}, {}, -1, DType::I64, 0, true);
    }
    if (ra.correction != 0) count = emit(Op::SUB, {count, constant_i64(ra.correction)}, {}, -1, DType::I64, 0, true);
    const int64_t var = emit(Op::DIV, {sum, count}, {}, -1, ct, r, false);
    one_[at(var)] = axes_mask;
    finish(var, e.outputs[0], ra);
    if (e.op == Op::VAR_MEAN) finish(mean, e.outputs[1], ra);
  }

  // The defined result `target` from a keepdim float32 statistic: squeeze
  // (without keepdim), then the cast to the result's dtype; the last step
  // writes `target`.
  void finish(int64_t src, int64_t target, const ReduceAttrs& ra) {
    const DType t = val(target).dtype;
    int64_t cur = src;
    if (!ra.keepdim) {
      std::vector<int64_t> dims(ra.axes.begin(), ra.axes.end());
      const bool last = val(src).dtype == t;
      cur = emit(Op::SQUEEZE, {cur}, dims, last ? target : -1, val(src).dtype, val(target).rank, false);
      if (last) return;
    }
    emit(Op::CAST, {cur}, {static_cast<int64_t>(t)}, target, t, val(target).rank, false);
    one_[at(target)] = ra.keepdim ? one_[at(src)] : 0;
  }

  void shape(const Expr& e) {
    const int64_t result = e.outputs[0];
    const int64_t a = finished(e.inputs[0]);
    const Sharding s = sh_[at(a)];
    Expr out = e;
    out.inputs[0] = a;
    OneMask one = 0;
    int d = -1;  // the result's sharded dim
    switch (e.op) {
      case Op::PERMUTE: {
        const PermuteAttrs pa(e);
        for (size_t j = 0; j < pa.perm.size(); ++j) {
          if (one_[at(a)] & bit(pa.perm[j])) one |= bit(static_cast<int64_t>(j));
          if (s.sharded() && pa.perm[j] == s.dim) d = static_cast<int>(j);
        }
        break;
      }
      case Op::UNSQUEEZE: {
        const int64_t u = DimAttr(e).dim;
        const OneMask low = one_[at(a)] & (bit(u) - 1);
        one = low | bit(u) | ((one_[at(a)] & ~(bit(u) - 1)) << 1);
        if (s.sharded()) d = s.dim + (u <= s.dim ? 1 : 0);
        break;
      }
      case Op::SQUEEZE: {
        const DimsAttrs da(e);
        bool squeezes_sharded = false;
        for (int64_t q : da.dims) squeezes_sharded = squeezes_sharded || q == s.dim;
        if (squeezes_sharded) out.inputs[0] = as(a, {});
        else if (s.sharded()) {
          d = s.dim;
          for (int64_t q : da.dims) d -= q < s.dim ? 1 : 0;
        }
        break;
      }
      case Op::SLICE:
      case Op::PAD: {
        const bool along = s.sharded() && (e.op == Op::SLICE ? SliceAttrs(e).dim == s.dim
                                                             : PadAttrs(e).pads_dim(static_cast<size_t>(s.dim)));
        if (along) out.inputs[0] = as(a, {});
        else d = s.dim;
        break;
      }
      case Op::CAT: {
        const int64_t c = DimAttr(e).dim;
        for (int64_t& in : out.inputs) in = finished(in);
        for (int64_t in : out.inputs)
          if (sh_[at(in)].sharded()) {
            d = sh_[at(in)].dim;
            break;
          }
        if (d == c) d = -1;
        for (int64_t& in : out.inputs) in = as(in, Sharding{d});
        break;
      }
      default:  // broadcast_in_dim, expand, reshape: shapes are global
        whole(e);
        return;
    }
    sh_[at(result)] = Sharding{d};
    one_[at(result)] = d >= 0 ? one & ~bit(d) : one;
    push(std::move(out));
  }

  // linear and matmul, the tensor-parallel patterns (else whole operands):
  //   column parallel  weight split on its output features (linear w dim
  //                    0, matmul b's last dim), input whole: the result is
  //                    split on its last dim (a bias is cut to the block);
  //   row parallel     input split on the contracted dim and weight too
  //                    (linear w dim 1, matmul b's dim -2): each rank's
  //                    product is a partial sum, finished by an allreduce
  //                    (or reduce_scatter); a bias is added once, after it;
  //   batch            input split on a batch (or row) dim, weight whole:
  //                    the result is split the same way.
  void library(const Expr& e) {
    const int64_t result = e.outputs[0];
    const int64_t a = finished(e.inputs[0]), b = finished(e.inputs[1]);
    const int64_t bias = e.inputs.size() > 2 ? finished(e.inputs[2]) : -1;
    const int ra = val(a).rank, rb = val(b).rank, r = val(result).rank;
    const bool linear = e.op == Op::LINEAR;
    if (ra < 2 || rb != 2) {
      whole(e);
      return;
    }
    const int b_out = linear ? 0 : 1, b_in = linear ? 1 : 0;  // b's output-feature / contracted dims
    const Sharding sa = sh_[at(a)], sb = sh_[at(b)];
    Expr out = e;
    if (sb.dim == b_out && !sa.sharded()) {  // column parallel
      if (bias >= 0) out.inputs[2] = as(bias, Sharding{val(bias).rank - 1});
      sh_[at(result)] = Sharding{r - 1};
      push(std::move(out));
      return;
    }
    if (sa.dim == ra - 1 && sb.dim == b_in) {  // row parallel: partial sums
      const bool same_type = bias < 0 || (val(bias).dtype == val(result).dtype && val(a).dtype == val(result).dtype);
      if (same_type) {
        out.inputs.resize(2);
        const int64_t partial = new_value(val(result).dtype, r, false);
        out.outputs = {partial};
        push(std::move(out));
        if (bias < 0) {
          pending_[at(result)] = {partial, kSum};
          return;
        }
        const int64_t sum = new_value(val(result).dtype, r, false);
        pending_[at(sum)] = {partial, kSum};
        emit(Op::ADD, {finished(sum), as(bias, {})}, {}, result, val(result).dtype, r, false);
        return;
      }
    }
    if (sa.sharded() && sa.dim < ra - 1 && !sb.sharded()) {  // batch / rows
      if (bias >= 0) out.inputs[2] = as(bias, {});
      sh_[at(result)] = Sharding{sa.dim + (r - ra)};
      push(std::move(out));
      return;
    }
    whole(e);
  }

  // size(x, dim): the global extent.
  void size(const Expr& e) {
    const int64_t x = e.inputs[0];
    const int64_t dim = e.attrs[0];
    const Pending& p = pending_[at(x)];
    const int64_t src = p.partial >= 0 ? p.partial : x;  // same extents
    if (p.partial < 0 && sh_[at(x)].dim == dim) {
      const int64_t local = emit(Op::SIZE, {x}, {dim}, -1, DType::I64, 0, true);
      emit(Op::MUL, {local, constant_i64(ranks_)}, {}, e.outputs[0], DType::I64, 0, true);
      return;
    }
    emit(Op::SIZE, {src}, {dim}, e.outputs[0], DType::I64, 0, true);
  }

  void output(size_t i) {
    Output& o = f_.outputs[i];
    std::optional<Sharding> want = o.requested;
    const std::optional<Sharding> aliased =
        o.alias_input >= 0 ? std::optional(f_.input_shardings[static_cast<size_t>(o.alias_input)]) : std::nullopt;
    if (!want) want = aliased;
    const int64_t v = want ? as(o.value, *want) : finished(o.value);
    o.sharding = sh_[at(v)];
    if (aliased && o.sharding != *aliased)
      fail(KF_ERR_INVALID_ARGUMENT, "output ", i, " is written into input ", o.alias_input,
           ", which is sharded differently (", aliased->dim, " against ", o.sharding.dim,
           "; -1 is replicated)");
    o.value = v;
  }

  Fusion& f_;
  const int64_t ranks_;
  std::vector<Sharding> sh_;
  std::vector<OneMask> one_;
  std::vector<Pending> pending_;
  std::map<std::pair<int64_t, int>, int64_t> converted_;
  std::vector<int64_t> made_by_;  // per value id: its expr in f_.exprs, or -1
  std::map<int64_t, std::pair<int64_t, int>> gathered_from_;  // allgather result -> (blocks, dim)
};

}  // namespace

void shard(Fusion& fusion) {
  if (fusion.mesh == 0) return;
  Sharder(fusion).run();
}

}  // namespace kf
