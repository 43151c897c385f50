// bind_inputs: one call's inputs -> sizes of every value and the
// concretization key. This runs on every execute, so it only reads
// metadata and does arithmetic, into storage the Binding already has.
#include "core/concretize/concrete_fusion.h"
#include "core/concretize/reshape_groups.h"
#include "core/concretize/layout.h"
#include "core/concretize/overlap.h"
#include "core/util/error.h"

namespace kf {

namespace {

constexpr int64_t kIndex32Limit = int64_t{1} << 31;

// FNV-1a-like over the words from `from` on, continuing from `h`.
uint64_t hash_words(const std::vector<int64_t>& words, size_t from = 0, uint64_t h = 1469598103934665603ull) {
  for (size_t k = from; k < words.size(); ++k) {
    const int64_t w = words[k];
    h ^= static_cast<uint64_t>(w);
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

// Rank (<= 16) in the low byte, then 2 bits of size class per dim.
int64_t pack_classes(std::span<const int64_t> sizes) {
  uint64_t w = sizes.size();
  for (size_t d = 0; d < sizes.size(); ++d)
    w |= static_cast<uint64_t>(size_class(sizes[d])) << (8 + 2 * d);
  return static_cast<int64_t>(w);
}

// An output written in place into its input must have that input's shape
// (a broadcast that grows it would write past the input's memory: torch's
// a.add_(b) refuses too), and the input must not reach an element twice (a
// stride-0 broadcast: every row would land on one row).
void check_in_place_outputs(const Fusion& fusion, const Binding& b) {
  for (size_t i = 0; i < fusion.outputs.size(); ++i) {
    const Output& o = fusion.outputs[i];
    if (o.alias_input < 0) continue;
    const size_t a = static_cast<size_t>(o.alias_input);
    const InputMeta& m = b.inputs[a];
    const std::span<const int64_t> out = b.sizes[o.value];
    // Ranks are equal (kf_add_output checks); find the first differing dim.
    for (size_t d = 0; d < out.size(); ++d)
      if (out[d] != m.sizes[d])
        fail(KF_ERR_SHAPE_MISMATCH, "output ", i, " (value ", o.value, ") is written in place into ",
             input_name(fusion, a), ", so it must have that input's shape; in dim ", d, " it has size ", out[d],
             ", the input ", m.sizes[d]);
    int64_t span = 0;
    const int64_t d = self_overlap_dim(m.sizes, m.strides, &span);
    if (d >= 0)
      fail(KF_ERR_INVALID_ARGUMENT, input_name(fusion, a), " is updated in place by output ", i, " (value ", o.value,
           "), but its strides reach one element more than once (dim ", d, " has stride ",
           m.strides[static_cast<size_t>(d)], ", inner dims span ", span,
           " elements): an in-place input needs an element per position");
  }
}

}  // namespace

void bind_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs,
                 Binding* binding, bool with_key) {
  Binding& b = *binding;
  b.output_orders.clear();  // kfuse lays the outputs out unless bind_output_layouts says otherwise
  read_inputs(fusion, inputs, num_inputs, &b.inputs, &b.device);
  b.sizes.reset(fusion);
  for (size_t i = 0; i < fusion.inputs.size(); ++i) {
    const int64_t id = fusion.inputs[i];
    b.sizes.set(id, b.inputs[i].sizes);
    b.sizes.set_scalar(id, b.inputs[i].scalar_i64);
  }
  infer_sizes(fusion, b.sizes);
  check_in_place_outputs(fusion, b);

  b.index32 = true;
  for (const InputMeta& m : b.inputs)
    if (m.max_offset >= kIndex32Limit) b.index32 = false;
  // Element counts were checked (inputs by read_inputs, the rest by
  // infer_sizes): at most 2^62, so these products do not overflow.
  for (size_t id = 0; id < fusion.values.size(); ++id)
    if (numel(b.sizes[static_cast<int64_t>(id)]) >= kIndex32Limit) b.index32 = false;

  if (with_key) {
    std::vector<int64_t>& w = b.key.words;
    w.clear();
    w.reserve(3 + 2 * fusion.inputs.size() + fusion.values.size());
    w.push_back(static_cast<int64_t>(b.device.kind));
    w.push_back(b.device.id);
    w.push_back(b.index32);
    for (size_t i = 0; i < fusion.inputs.size(); ++i) {
      const Value& v = fusion.value(fusion.inputs[i]);
      const InputMeta& m = b.inputs[i];
      if (v.is_scalar) {
        if (std::binary_search(fusion.shape_scalars.begin(), fusion.shape_scalars.end(), v.id))
          w.push_back(m.scalar_i64);  // shape scalars are integers: exact
        continue;
      }
      const LayoutCode l = encode_layout(m);
      w.push_back(static_cast<int64_t>(l.order));
      w.push_back(static_cast<int64_t>(l.contiguous | (static_cast<uint64_t>(m.alignment) << 20) |
                                       (static_cast<uint64_t>(m.device.kind) << 28) |
                                       (static_cast<uint64_t>(l.expanded != 0) << 40) |
                                       (static_cast<uint64_t>(l.row_alignment) << 44)));
      // (which dims are expanded: a word of its own, only where some is;
      // bit 40 above says whether it follows)
      if (l.expanded != 0) w.push_back(static_cast<int64_t>(l.expanded));
    }
    for (size_t id = 0; id < fusion.values.size(); ++id) w.push_back(pack_classes(b.sizes[static_cast<int64_t>(id)]));
    for (int64_t ei : fusion.reshapes) {
      const Expr& e = fusion.exprs[static_cast<size_t>(ei)];
      append_reshape_key(b.sizes[e.inputs[0]], b.sizes[e.outputs[0]], &w);
    }
    b.key.hash = hash_words(w);
  }
}

namespace {

// The order code of the caller's tensor for output value `v` (row-major
// where its metadata is missing or malformed: the output checks report it).
// NULL strides are compact row-major (dl_strides, core/util/dl_layout.h),
// whose order is row-major for any sizes: no strides need deriving here.
uint64_t caller_order_code(const Value& v, std::span<const int64_t> sizes, const DLTensor* t) {
  constexpr uint64_t kRowMajor = 0xfedcba9876543210ull;  // decodes to 0, 1, 2, ... for any rank <= 16
  uint64_t code = kRowMajor;
  if (t != nullptr && t->ndim == v.rank && t->strides != nullptr && v.rank > 1)
    code = encode_order(sizes, std::span<const int64_t>(t->strides, static_cast<size_t>(v.rank)));
  return code & (v.rank >= 16 ? ~uint64_t{0} : (uint64_t{1} << (4 * v.rank)) - 1);
}

}  // namespace

bool outputs_in_plan_layout(const Fusion& fusion, const ConcreteFusion& c, const DLTensor* const* outputs,
                            size_t num_outputs, const Binding& b) {
  if (outputs == nullptr || num_outputs != fusion.outputs.size()) return true;  // the count check reports it
  for (size_t i = 0; i < num_outputs; ++i) {
    const Value& v = fusion.value(fusion.outputs[i].value);
    if (caller_order_code(v, b.sizes[v.id], outputs[i]) != c.output_order_codes[i]) return false;
  }
  return true;
}

void bind_output_layouts(const Fusion& fusion, const DLTensor* const* outputs, size_t num_outputs, Binding* binding) {
  Binding& b = *binding;
  b.output_orders.clear();
  if (outputs == nullptr || num_outputs != fusion.outputs.size()) return;  // the count check reports it
  for (size_t i = 0; i < num_outputs; ++i) {
    const Value& v = fusion.value(fusion.outputs[i].value);
    b.output_orders.push_back(caller_order_code(v, b.sizes[v.id], outputs[i]));
  }
  std::vector<int64_t>& w = b.key.words;
  const size_t from = w.size();
  w.push_back(-1);  // separates the outputs' words from the inputs'
  for (uint64_t code : b.output_orders) w.push_back(static_cast<int64_t>(code));
  b.key.hash = hash_words(w, from, b.key.hash);
}

Binding bind_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs) {
  Binding b;
  bind_inputs(fusion, inputs, num_inputs, &b);
  return b;
}

}  // namespace kf
