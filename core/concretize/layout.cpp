#include "core/concretize/layout.h"

#include "core/util/env_switch.h"
#include "core/ir/op_attrs.h"
#include "core/ir/op_table.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <set>

namespace kf {

uint64_t encode_order(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  const size_t r = sizes.size();
  // Dims of size <= 1 have meaningless strides: they keep their place, and
  // the others are sorted by stride (largest first, ties by index). A
  // stride-0 dim (an expanded operand) moves no memory: it sorts outermost,
  // so that it is never taken for the innermost dim (an attention mask
  // [B, 1, 1, S] expanded along B once sent a pointwise add through 64 x 64
  // tiles over B = 4: 10.5 ms against 0.5; docs/perf-log.md, session 28).
  auto key = [&](int d) {
    const int64_t s = strides[static_cast<size_t>(d)];
    return s == 0 ? std::numeric_limits<int64_t>::max() : s;
  };
  std::array<int, 16> order{}, positions{}, dims{};
  size_t n = 0;
  for (size_t d = 0; d < r; ++d) {
    order[d] = static_cast<int>(d);
    if (sizes[d] > 1) positions[n] = dims[n] = static_cast<int>(d), ++n;
  }
  // Insertion sort: stable, and unlike std::stable_sort it never asks the
  // heap for a buffer (this runs on every execute).
  for (size_t k = 1; k < n; ++k) {
    const int d = dims[k];
    size_t j = k;
    for (; j > 0 && key(dims[j - 1]) < key(d); --j)
      dims[j] = dims[j - 1];
    dims[j] = d;
  }
  for (size_t k = 0; k < n; ++k) order[static_cast<size_t>(positions[k])] = dims[k];
  uint64_t code = 0;
  for (size_t d = 0; d < r; ++d) code |= static_cast<uint64_t>(order[d]) << (4 * d);
  return code;
}

std::vector<int> decode_order(uint64_t code, size_t rank) {
  std::vector<int> order(rank);
  for (size_t d = 0; d < rank; ++d) order[d] = static_cast<int>((code >> (4 * d)) & 0xf);
  return order;
}

LayoutCode encode_layout(const InputMeta& input) {
  const size_t r = input.sizes.size();
  LayoutCode code;
  code.order = encode_order(input.sizes, input.strides);
  std::array<int, 16> order{};
  for (size_t d = 0; d < r; ++d) order[d] = static_cast<int>((code.order >> (4 * d)) & 0xf);
  int64_t expected = 1;
  for (size_t k = r; k > 0; --k) {
    size_t d = static_cast<size_t>(order[k - 1]);
    if (input.sizes[d] > 1 && input.strides[d] == 0) code.expanded |= 1u << d;
    if (input.sizes[d] <= 1 || input.strides[d] == expected) code.contiguous |= 1u << d;
    if (input.sizes[d] <= 1) continue;
    // Wild strides may overflow: then no outer dim can be contiguous.
    if (__builtin_mul_overflow(input.strides[d], input.sizes[d], &expected)) expected = -1;
  }
  bool dense = true;
  for (size_t d = 0; d < r; ++d) dense = dense && ((code.contiguous >> d) & 1u) != 0;
  if (!dense && r > 0) {
    size_t inner = r;  // the innermost dim of size > 1 (size-1 dims keep their place in the order)
    for (size_t k = r; k > 0 && inner == r; --k)
      if (input.sizes[static_cast<size_t>(order[k - 1])] > 1) inner = static_cast<size_t>(order[k - 1]);
    for (size_t d = 0; d < r; ++d) {
      if (d == inner || input.sizes[d] <= 1 || input.strides[d] == 0) continue;
      const uint64_t s = input.strides[d] < 0 ? 0 - static_cast<uint64_t>(input.strides[d])
                                              : static_cast<uint64_t>(input.strides[d]);
      while (code.row_alignment > 1 && s % static_cast<uint64_t>(code.row_alignment) != 0) code.row_alignment /= 2;
    }
  }
  return code;
}

InputLayout analyze_layout(const InputMeta& input) {
  const size_t r = input.sizes.size();
  const LayoutCode code = encode_layout(input);
  InputLayout l;
  l.alignment = input.alignment;
  l.row_alignment = code.row_alignment;
  l.stride_order = decode_order(code.order, r);
  for (size_t d = 0; d < r; ++d) l.contiguous.push_back((code.contiguous >> d) & 1u);
  l.expanded = code.expanded;
  return l;
}

namespace {

std::vector<int> row_major(size_t r) {
  std::vector<int> o(r);
  std::iota(o.begin(), o.end(), 0);
  return o;
}

// Drops the dims marked in `removed` and renumbers the others.
std::vector<int> drop_dims(const std::vector<int>& order, const std::vector<bool>& removed) {
  std::vector<int> renumber(order.size(), -1);
  int next = 0;
  for (size_t d = 0; d < order.size(); ++d)
    if (!removed[d]) renumber[d] = next++;
  std::vector<int> out;
  for (int d : order)
    if (!removed[static_cast<size_t>(d)]) out.push_back(renumber[static_cast<size_t>(d)]);
  return out;
}

// The order of a value right-aligned into a higher rank: new leading dims
// are outermost.
std::vector<int> lift(const std::vector<int>& order, size_t rank) {
  size_t lead = rank - order.size();
  std::vector<int> out = row_major(lead);
  for (int d : order) out.push_back(d + static_cast<int>(lead));
  return out;
}

int many_dims(const ConcreteFusion& c, int64_t id) {
  const auto& cls = c.size_classes[static_cast<size_t>(id)];
  return static_cast<int>(std::count(cls.begin(), cls.end(), SizeClass::Many));
}

std::vector<int> expr_order(const ConcreteFusion& c, const Expr& e, size_t out_rank) {
  const Fusion& f = *c.fusion;
  auto order_of = [&](int64_t id) -> const std::vector<int>& {
    return c.stride_orders[static_cast<size_t>(id)];
  };
  const std::vector<int>& a_order = order_of(e.inputs.empty() ? e.outputs[0] : e.inputs[0]);
  switch (op_info(e.op).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: {
      // Follow the operand with the most non-broadcast dims, preferring
      // full-rank operands.
      int64_t best = -1;
      int best_score = -1;
      for (int64_t id : e.inputs) {
        const Value& v = f.value(id);
        if (v.is_scalar) continue;
        int score = many_dims(c, id) + (static_cast<size_t>(v.rank) == out_rank ? 1000 : 0);
        if (score > best_score) {
          best = id;
          best_score = score;
        }
      }
      if (best < 0) return row_major(out_rank);
      return lift(order_of(best), out_rank);
    }
    case OpCategory::Reduction: {
      const ReduceAttrs ra(e);
      if (ra.keepdim) return a_order;
      const std::vector<bool> removed = ra.reduced(a_order.size());
      return drop_dims(a_order, removed);
    }
    case OpCategory::Hint:
    case OpCategory::Scatter:
    case OpCategory::Scan: return a_order;
    case OpCategory::Indexing:
      return e.op == Op::GATHER ? order_of(e.inputs[1]) : a_order;
    case OpCategory::Shape: break;
    default: return row_major(out_rank);
  }
  switch (e.op) {
    case Op::PERMUTE: {
      const std::span<const int64_t> perm = PermuteAttrs(e).perm;
      std::vector<int> inv(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int>(i);
      std::vector<int> out;
      for (int d : a_order) out.push_back(inv[static_cast<size_t>(d)]);
      return out;
    }
    case Op::SQUEEZE: {
      std::vector<bool> removed(a_order.size(), false);
      for (int64_t d : DimsAttrs(e).dims) removed[static_cast<size_t>(d)] = true;
      return drop_dims(a_order, removed);
    }
    case Op::UNSQUEEZE: {
      int at = static_cast<int>(DimAttr(e).dim);
      std::vector<int> out;
      bool placed = false;
      for (int d : a_order) {
        if (d == at && !placed) {
          out.push_back(at);
          placed = true;
        }
        out.push_back(d >= at ? d + 1 : d);
      }
      if (!placed) out.push_back(at);
      return out;
    }
    case Op::SLICE:
    case Op::PAD:
    case Op::CAT: return a_order;
    case Op::EXPAND: return lift(a_order, out_rank);
    case Op::BROADCAST_IN_DIM: {
      std::vector<bool> mapped(out_rank, false);
      for (int64_t d : DimsAttrs(e).dims) mapped[static_cast<size_t>(d)] = true;
      std::vector<int> out;
      for (size_t d = 0; d < out_rank; ++d)
        if (!mapped[d]) out.push_back(static_cast<int>(d));
      for (int d : a_order) out.push_back(static_cast<int>(DimsAttrs(e).dims[static_cast<size_t>(d)]));
      return out;
    }
    default: return row_major(out_rank);
  }
}

// The innermost dim of class >1 of a value in `order`, or -1.
int innermost_many(const ConcreteFusion& c, size_t v, const std::vector<int>& order) {
  const auto& cls = c.size_classes[v];
  for (size_t k = order.size(); k-- > 0;)
    if (static_cast<size_t>(order[k]) < cls.size() && cls[static_cast<size_t>(order[k])] == SizeClass::Many) return order[k];
  return -1;
}

// Whether the caller's order for output value `v` lays it across the rows
// of a reduction it belongs to, across a column reduction's results, or
// across a column kernel's walk (below): v
// has the sizes of a reduction's input u
// and lies on u's chain (an ancestor of v, or v one of u's), the reduction
// runs along v's own innermost dim, and the caller's innermost dim is
// another. The row kernel that produces v walks each row along its memory
// and would store one element per 32-byte sector across the rows (one L2
// request per element: 3.27 ms for a residual add + RMSNorm into a [1, 0]
// output of [16512, 12288] on the H200, DRAM at 16%, docs/perf-log.md
// session 29); v is written in its own order and copied into the caller's
// tensor by tiles instead.
// Rows: only through the row case (v of a row reduction's input sizes on
// its chain, the reduction along v's own innermost dim, which is also its
// logical last dim of class >1), which the row kernels can write across
// their rows themselves (RowParams::across); Copied: through a column
// reduction's, which they cannot, beside a column reduction over v's
// sizes (an inner-outer kernel's), or where v's own innermost dim is not
// its logical last (v in the caller's order then votes the row domain's
// walk towards the logical order, row_domain.cpp memory_order: its rows
// read across their memory, or the column kernel taking them).
enum class Crossing { None, Rows, Copied };

Crossing crosses_rows(const ConcreteFusion& c, size_t v, const std::vector<int>& caller) {
  const Fusion& f = *c.fusion;
  const int own = innermost_many(c, v, c.stride_orders[v]), theirs = innermost_many(c, v, caller);
  if (own < 0 || theirs < 0 || own == theirs) return Crossing::None;
  std::vector<char> ancestor(f.values.size(), 0);  // v's ancestors and v
  std::vector<size_t> stack = {v};
  while (!stack.empty()) {
    const size_t x = stack.back();
    stack.pop_back();
    if (ancestor[x]) continue;
    ancestor[x] = 1;
    const int64_t p = f.values[x].producer;
    if (p >= 0)
      for (int64_t in : f.exprs[static_cast<size_t>(p)].inputs) stack.push_back(static_cast<size_t>(in));
  }
  const auto many = [&](size_t x) {
    return std::count(c.size_classes[x].begin(), c.size_classes[x].end(), SizeClass::Many);
  };
  // Whether u descends from v (v feeds the reduction: a residual sum that
  // is also an output).
  const auto descends = [&](size_t u) {
    std::vector<size_t> up = {u};
    std::vector<char> seen(f.values.size(), 0);
    while (!up.empty()) {
      const size_t x = up.back();
      up.pop_back();
      if (x == v) return true;
      if (seen[x]) continue;
      seen[x] = 1;
      const int64_t p = f.values[x].producer;
      if (p >= 0)
        for (int64_t in : f.exprs[static_cast<size_t>(p)].inputs) up.push_back(static_cast<size_t>(in));
    }
    return false;
  };
  bool rows = false, cross_columns = false;
  for (const Expr& e : f.exprs) {
    if (op_info(e.op).category != OpCategory::Reduction || e.inputs.empty()) continue;
    const size_t u = static_cast<size_t>(e.inputs[0]);
    const std::vector<bool> reduced = ReduceAttrs(e).reduced(c.size_classes[u].size());
    // A column reduction (u's innermost dim kept) writes its results along
    // that dim: v, one of them or computed from them at their dims, would
    // be stored one element per sector (a max over dim 0 of [2, 4095,
    // 128256] into a [1, 0] output: 13.6 ms, 0.09x torch.compile, seed
    // 1631654200 c0111, session 31). So would v of u's sizes on u's chain
    // (a column norm's normalized output) with the caller's innermost dim
    // another than u's: the column kernel walks u's innermost dim (a
    // layernorm over the channels of NCHW into a channels-last output:
    // 0.476 ms, 0.20x torch.compile, seed 1853590537 c0120, session 40).
    const int inner_u = innermost_many(c, u, c.stride_orders[u]);
    // (A column reduction over v's sizes beside a row reduction is an
    // inner-outer kernel's, which cannot write across its rows.)
    if (inner_u >= 0 && !reduced[static_cast<size_t>(inner_u)] && c.size_classes[u] == c.size_classes[v]) cross_columns = true;
    if (inner_u >= 0 && !reduced[static_cast<size_t>(inner_u)]) {
      for (int64_t o : e.outputs)
        if (ancestor[static_cast<size_t>(o)] && many(static_cast<size_t>(o)) == many(v)) return Crossing::Copied;
      if (c.size_classes[u] == c.size_classes[v] && theirs != inner_u && (ancestor[u] || descends(u)))
        return Crossing::Copied;
    }
    if (c.size_classes[u] != c.size_classes[v] || !reduced[static_cast<size_t>(own)]) continue;
    // v is computed from the row (the normalized output), or feeds it
    if (!ancestor[u] && !descends(u)) continue;
    // (the caller's innermost another reduced dim: the across kernel
    // stores along kept dims only)
    const int logical = innermost_many(c, v, row_major(c.size_classes[v].size()));
    if (logical != own || reduced[static_cast<size_t>(theirs)]) return Crossing::Copied;
    rows = true;
  }
  if (rows && cross_columns) return Crossing::Copied;
  return rows ? Crossing::Rows : Crossing::None;
}

// Outputs laid out across the rows of a row reduction are written there by
// the row kernel (RowParams::across) rather than copied at the end: off,
// as that kernel ran slower than the row kernel and the copy on 13 of 14
// plans on an H200 (docs/perf-log.md session 52 §3).
bool rows_written_across() {
  static const bool on = env_switch("KFUSE_TUNE_ROW_ACROSS_OUTPUTS", false);
  return on;
}

// Whether v, a scatter's result, would take its updates across its memory
// in the caller's layout `caller`: the update kernels walk the index
// row-major, its last dim of class >1 fastest, so a warp's atomics share
// sectors only where that dim is innermost in memory. Where the caller's
// innermost is another dim and kfuse's own order's is that one, v is
// produced in kfuse's order and copied into the caller's tensor by tiles
// (a scatter-mean of [131072, 512] messages into 32768 nodes, the result
// column-major: 6.1 ms, 0.13x torch.compile, seed 243917705 c0188,
// docs/perf-log.md session 44). A scatter along that last dim itself
// updates scattered addresses in any layout: left as it is.
bool scatter_across_updates(const ConcreteFusion& c, size_t v, const std::vector<int>& caller) {
  const Fusion& f = *c.fusion;
  const int64_t p = f.values[v].producer;
  if (p < 0) return false;
  const Expr& e = f.exprs[static_cast<size_t>(p)];
  if (op_info(e.op).category != OpCategory::Scatter) return false;
  const int last = innermost_many(c, v, row_major(c.size_classes[v].size()));
  const int own = innermost_many(c, v, c.stride_orders[v]), theirs = innermost_many(c, v, caller);
  return last >= 0 && last != static_cast<int>(ScatterAttrs(e).index()) && own == last && theirs >= 0 &&
         theirs != last;
}

// The caller's outputs of the reduction's chain (`seen`: the values
// choose_input_relayouts walked from it) of its input's size classes
// `cls`, written in place of none, whose innermost dim of class >1 is
// `last`. The row domain's walk follows them against inputs laid out
// across their lines (their bytes vote twice: row_domain.cpp
// memory_order), so the kernel would read those inputs one element per
// sector: a layernorm of a transposed x [32768, 768] into a row-major y
// took 0.344 ms, 0.23x torch.compile (seed 1978985695 c0147,
// docs/perf-log.md session 36).
std::vector<size_t> row_major_outputs(const ConcreteFusion& c, const std::vector<char>& seen,
                                      const std::vector<SizeClass>& cls, int last) {
  const Fusion& f = *c.fusion;
  std::vector<size_t> out;
  for (size_t i = 0; i < c.caller_output_orders.size() && i < f.outputs.size(); ++i) {
    const size_t v = static_cast<size_t>(f.outputs[i].value);
    if (f.outputs[i].alias_input >= 0 || !seen[v] || c.size_classes[v] != cls) continue;
    if (innermost_many(c, v, c.caller_output_orders[i]) == last) out.push_back(i);
  }
  return out;
}

// Marks input i to be copied before its first reader into a compact,
// aligned buffer of kfuse's laid out in `order`, which every segment then
// reads (ConcreteFusion::relayout_inputs).
void copy_input_into(ConcreteFusion& c, size_t i, const std::vector<int>& order) {
  c.relayout_inputs[i] = true;
  InputLayout& l = c.input_layouts[i];
  l.stride_order = order;
  l.contiguous.assign(l.contiguous.size(), true);
  l.alignment = 16;
  l.row_alignment = 16;
  l.expanded = 0;
}

// Decides ConcreteFusion::relayout_inputs. Per reduction, the tensor
// inputs that span its input u (u's size classes, reached through
// pointwise ops only, so their dims are u's: those u is computed from and
// those combined with the reduction's result) are walked by one kernel in
// one order, so an input whose innermost dim of class >1 differs from the
// others' is read across its lines (corpus seed 1631654200 on the H200:
// c0061, a softmax backward of a row-major grad and a column-major y
// [4096, 32000] f32, 0.29x torch.compile, 2.1 ms; c0047 and c0142,
// layernorm and RMSNorm backwards with x permuted [0, 2, 1], 0.40x; the
// copy's gain is a prediction, unmeasured at this commit). Where some input's
// innermost is u's last dim of class >1 (kfuse's own, row-major, layout,
// which row, column and inner-outer kernels all read well), every input
// whose innermost is another dim is copied into that input's order, in a
// compact buffer of kfuse's, before its first reader; outputs laid out
// across the rows are copied at the end (crosses_rows). Copying towards a
// transposed majority instead would hand an inner-outer kernel transposed
// rows, which it walks without vectors. An input an output updates in
// place is copied too: that output is then produced in kfuse's layout and
// copied into the input at the end (propagate_layouts), as its in-place
// write would cross the rows (seed 80188397 c0094, add_rmsnorm in place
// into a transposed x: 0.17x torch.compile, docs/perf-log.md session 35).
// Where no input is laid out row-major but the caller's outputs of the
// chain are (row_major_outputs), the inputs are copied into their order,
// or, where the inputs hold more bytes, those outputs are produced in the
// inputs' order and copied at the end (returned: per output).
// Never copied: an expanded input (stride 0: a copy would materialize
// it), inputs broadcast over u (other classes), and inputs where all
// agree and no output of the chain is laid out otherwise (transposed rows
// written in their own order, column reductions, pointwise fusions: their
// schedulers read them well). A scatter's src input laid out across its
// update walk is copied too (below). Reads only the key's parts: the
// inputs' and the caller's outputs' layouts and the size classes.
std::vector<bool> choose_input_relayouts(ConcreteFusion& c) {
  const Fusion& f = *c.fusion;
  c.relayout_inputs.assign(f.inputs.size(), false);
  std::vector<bool> copied_outputs(f.outputs.size(), false);
  c.caller_input_layouts = c.input_layouts;
  std::vector<char> seen(f.values.size(), 0);
  std::vector<std::vector<size_t>> consumers(f.values.size());
  for (size_t k = 0; k < f.exprs.size(); ++k)
    for (int64_t in : f.exprs[k].inputs) consumers[static_cast<size_t>(in)].push_back(k);
  // Ops a row kernel runs on the row's elements, and ops that broadcast a
  // row's result back over it.
  auto row_op = [](Op op) { return is_pointwise(op) || op_info(op).category == OpCategory::Hint; };
  auto broadcast_op = [](Op op) {
    return op == Op::BROADCAST_IN_DIM || op == Op::EXPAND || op == Op::UNSQUEEZE || op == Op::RESHAPE;
  };
  for (const Expr& e : f.exprs) {
    if (op_info(e.op).category != OpCategory::Reduction || e.inputs.empty()) continue;
    const size_t u = static_cast<size_t>(e.inputs[0]);
    const std::vector<SizeClass>& cls = c.size_classes[u];
    // The spanning inputs, (input index, innermost dim): those u is
    // computed from, and those combined with the reduction's result
    // (log_softmax backward's y, read only after the row sum).
    std::vector<std::pair<size_t, int>> spans;
    std::fill(seen.begin(), seen.end(), 0);
    std::vector<size_t> up = {u}, down(e.outputs.begin(), e.outputs.end());
    while (!down.empty()) {
      const size_t x = down.back();
      down.pop_back();
      if (seen[x] & 2) continue;
      seen[x] |= 2;
      for (size_t k : consumers[x]) {
        const Expr& p = f.exprs[k];
        if (!row_op(p.op) && !broadcast_op(p.op)) continue;
        if (row_op(p.op)) up.insert(up.end(), p.inputs.begin(), p.inputs.end());
        down.insert(down.end(), p.outputs.begin(), p.outputs.end());
      }
    }
    while (!up.empty()) {
      const size_t x = up.back();
      up.pop_back();
      if (seen[x] & 1) continue;
      seen[x] |= 1;
      const Value& v = f.values[x];
      const size_t i = static_cast<size_t>(v.input_index);
      if (v.kind == ValueKind::TensorInput && c.size_classes[x] == cls && !c.input_layouts[i].expanded) {
        const int inner = innermost_many(c, x, c.input_layouts[i].stride_order);
        if (inner >= 0) spans.emplace_back(i, inner);
      }
      if (v.producer < 0) continue;
      const Expr& p = f.exprs[static_cast<size_t>(v.producer)];
      if (row_op(p.op)) up.insert(up.end(), p.inputs.begin(), p.inputs.end());
    }
    int last = -1;  // u's last dim of class >1
    for (size_t d = 0; d < cls.size(); ++d)
      if (cls[d] == SizeClass::Many) last = static_cast<int>(d);
    auto reference = std::find_if(spans.begin(), spans.end(), [&](const auto& sp) { return sp.second == last; });
    std::vector<int> want;
    if (reference != spans.end()) {
      want = c.input_layouts[reference->first].stride_order;
    } else {
      // No input along the rows, but the caller's outputs are: copy the
      // inputs into the outputs' order, or, where the inputs lie along
      // the reduced dims (the walk in their order is then a row kernel
      // along memory), the outputs (produced in the inputs' order, which
      // the walk then follows), whichever moves fewer bytes (elements of
      // one size: their dtypes). Inputs along a kept dim are copied: the
      // walk in their order would be a column normalization, or, with
      // outer reductions (a norm backward's weight gradient), rows read
      // across memory (seed 1978985695 c0051).
      const std::vector<size_t> outs = row_major_outputs(c, seen, cls, last);
      if (spans.empty() || outs.empty()) continue;
      const std::vector<bool> reduced = ReduceAttrs(e).reduced(cls.size());
      int64_t in_bytes = 0, out_bytes = 0;
      bool along_reduced = true;
      for (const auto& [i, inner] : spans) {
        in_bytes += dtype_size(f.value(f.inputs[i]).dtype);
        along_reduced = along_reduced && reduced[static_cast<size_t>(inner)];
      }
      for (size_t i : outs) out_bytes += dtype_size(f.value(f.outputs[i].value).dtype);
      if (along_reduced && in_bytes > out_bytes) {
        for (size_t i : outs) copied_outputs[i] = true;
        continue;
      }
      want = c.caller_output_orders[outs.front()];
    }
    for (const auto& [i, inner] : spans)
      if (inner != last && !c.relayout_inputs[i]) copy_input_into(c, i, want);
  }
  // A scatter's updates walk its src row-major, the last dim of class >1
  // fastest (emit_scatter.cpp; the index too): a src input laid out with
  // another dim innermost is read one element per sector, as a scatter-
  // mean of column-major [2097152, 256] messages was (seed 1853590537
  // c0123: 9.4 ms, about 17 GB of sectors for 2 GB of data; docs/
  // perf-log.md session 44). It is copied row-major first, where the
  // result (laid out as the scatter's self operand) then takes the walk's
  // stores along its memory too: a KV-cache write whose cache and key are
  // both [0, 2, 1] reads and writes the same lines across the walk, which
  // the caches absorb, and copying the key alone doubled its time (seed
  // 1940430775 c0074, 0.125 -> 0.269 ms, session 45).
  for (const Expr& e : f.exprs) {
    if (op_info(e.op).category != OpCategory::Scatter || e.inputs.size() < 3) continue;
    const size_t src = static_cast<size_t>(e.inputs[2]);
    const Value& v = f.values[src];
    if (v.kind != ValueKind::TensorInput) continue;
    const size_t i = static_cast<size_t>(v.input_index);
    if (c.relayout_inputs[i] || c.input_layouts[i].expanded) continue;
    const std::vector<int> order = row_major(c.size_classes[src].size());
    const int last = innermost_many(c, src, order), inner = innermost_many(c, src, c.input_layouts[i].stride_order);
    if (last < 0 || inner < 0 || inner == last) continue;
    // The self operand's order: an input's own, else what kfuse produces
    // for a value it creates (row-major).
    const size_t self = static_cast<size_t>(e.inputs[0]);
    const Value& s = f.values[self];
    const std::vector<int> self_order = s.kind == ValueKind::TensorInput
                                            ? c.input_layouts[static_cast<size_t>(s.input_index)].stride_order
                                            : row_major(c.size_classes[self].size());
    if (innermost_many(c, self, self_order) == last) copy_input_into(c, i, order);
  }
  return copied_outputs;
}

}  // namespace

void propagate_layouts(ConcreteFusion& c) {
  const Fusion& f = *c.fusion;
  const std::vector<bool> copied_outputs = choose_input_relayouts(c);
  c.stride_orders.assign(f.values.size(), {});
  for (size_t i = 0; i < f.inputs.size(); ++i)
    c.stride_orders[static_cast<size_t>(f.inputs[i])] = c.input_layouts[i].stride_order;
  for (const Expr& e : f.exprs)
    for (int64_t out : e.outputs) {
      const Value& v = f.value(out);
      c.stride_orders[static_cast<size_t>(out)] =
          v.is_scalar ? std::vector<int>{} : expr_order(c, e, static_cast<size_t>(v.rank));
    }
  for (const Output& o : f.outputs)
    if (!o.stride_order.empty())
      c.stride_orders[static_cast<size_t>(o.value)].assign(o.stride_order.begin(), o.stride_order.end());
  // The caller's own outputs (kf_execute_into) are written where they are:
  // their layout decides, over the propagated and the pinned one. Values
  // that are inputs keep theirs (an output that is an input is a copy),
  // and a value given twice is written into its first output.
  c.relayout_outputs.assign(f.outputs.size(), false);
  // An output that updates an input copied in (choose_input_relayouts):
  // produced in the copy's layout, copied into the input's memory at the
  // end (after every segment read the copy), never written across its rows.
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const int64_t a = f.outputs[i].alias_input;
    if (a >= 0 && c.relayout_inputs[static_cast<size_t>(a)] && !f.value(f.outputs[i].value).is_scalar &&
        f.outputs[i].value != f.inputs[static_cast<size_t>(a)])
      c.relayout_outputs[i] = true;
  }
  if (c.caller_output_orders.empty()) return;
  std::vector<bool> set(f.values.size(), false);
  for (const int64_t in : f.inputs) set[static_cast<size_t>(in)] = true;
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const size_t v = static_cast<size_t>(f.outputs[i].value);
    if (set[v]) continue;
    set[v] = true;
    if (c.relayout_outputs[i]) continue;
    const Crossing crossing = f.outputs[i].alias_input < 0 ? crosses_rows(c, v, c.caller_output_orders[i]) : Crossing::None;
    if (f.outputs[i].alias_input < 0 &&
        (copied_outputs[i] || crossing == Crossing::Copied || (crossing == Crossing::Rows && !rows_written_across()) ||
         scatter_across_updates(c, v, c.caller_output_orders[i]))) {
      c.relayout_outputs[i] = true;
      continue;
    }
    c.stride_orders[v] = c.caller_output_orders[i];
  }
}

void propagate_extent_deps(ConcreteFusion& c) {
  const Fusion& f = *c.fusion;
  c.extent_deps.assign(f.values.size(), {});
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Value& v = f.value(f.inputs[i]);
    auto& deps = c.extent_deps[static_cast<size_t>(v.id)];
    for (int d = 0; d < v.rank; ++d)
      if (c.size_classes[static_cast<size_t>(v.id)][static_cast<size_t>(d)] == SizeClass::Many)
        deps.push_back(f.extent_id(i, d));
    std::sort(deps.begin(), deps.end());
  }
  for (const Expr& e : f.exprs) {
    std::set<int64_t> deps;
    for (int64_t in : e.inputs) {
      const Value& v = f.value(in);
      if (v.kind == ValueKind::ScalarInput) {
        if (std::binary_search(f.shape_scalars.begin(), f.shape_scalars.end(), in)) deps.insert(in);
        continue;
      }
      const auto& d = c.extent_deps[static_cast<size_t>(in)];
      deps.insert(d.begin(), d.end());
    }
    for (int64_t out : e.outputs)
      if (!f.value(out).is_scalar) c.extent_deps[static_cast<size_t>(out)].assign(deps.begin(), deps.end());
  }
}

}  // namespace kf
