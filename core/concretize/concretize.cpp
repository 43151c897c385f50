// The concretize stage's entry point: one ConcreteFusion from one binding.
#include "core/concretize/concrete_fusion.h"
#include "core/concretize/extent_sets.h"
#include "core/concretize/layout.h"
#include "core/ir/approx_math.h"

namespace kf {

std::shared_ptr<const ConcreteFusion> concretize(const Fusion& fusion, const Binding& b) {
  auto c = std::make_shared<ConcreteFusion>();
  c->fusion = &fusion;
  c->key = b.key;
  c->device = b.device;
  c->index32 = b.index32;
  for (size_t i = 0; i < fusion.inputs.size(); ++i) c->input_layouts.push_back(analyze_layout(b.inputs[i]));
  c->size_classes.resize(fusion.values.size());
  for (size_t id = 0; id < fusion.values.size(); ++id)
    for (int64_t e : b.sizes[static_cast<int64_t>(id)]) c->size_classes[id].push_back(size_class(e));
  for (int64_t ei : fusion.reshapes) {
    const Expr& e = fusion.exprs[static_cast<size_t>(ei)];
    c->reshapes[ei] = reshape_groups(b.sizes[e.inputs[0]], b.sizes[e.outputs[0]]);
  }
  for (size_t i = 0; i < b.output_orders.size(); ++i)
    c->caller_output_orders.push_back(
        decode_order(b.output_orders[i], static_cast<size_t>(fusion.value(fusion.outputs[i].value).rank)));
  propagate_layouts(*c);
  for (size_t i = 0; i < fusion.outputs.size(); ++i) {
    const Output& o = fusion.outputs[i];
    // The code a caller's tensor in the plan's order would encode (size-1
    // dims keep their place): only the strides' order matters, so each dim
    // gets its position, outermost largest (compact strides could
    // overflow: an empty tensor's other dims may be huge).
    const std::span<const int64_t> sizes = b.sizes[o.value];
    const std::vector<int>& order =
        c->relayout_outputs[i] ? c->copied_output_order(i) : c->stride_orders[static_cast<size_t>(o.value)];
    Extents strides(sizes.size(), 0);
    for (size_t k = 0; k < order.size(); ++k)
      strides[static_cast<size_t>(order[k])] = static_cast<int64_t>(order.size() - k);
    const size_t r = sizes.size();
    c->output_order_codes.push_back(encode_order(sizes, strides) & (r >= 16 ? ~uint64_t{0} : (uint64_t{1} << (4 * r)) - 1));
  }
  propagate_extent_deps(*c);
  c->approximate = approximate_exprs(fusion);
  auto sets = std::make_shared<ExtentSets>(*c, reshape_target_extents());  // reads the fields above
  sets->freeze();
  c->extent_sets = std::move(sets);
  return c;
}

const std::vector<int>& ConcreteFusion::copied_output_order(size_t i) const {
  if (i < caller_output_orders.size()) return caller_output_orders[i];
  return caller_input_layouts.at(static_cast<size_t>(fusion->outputs.at(i).alias_input)).stride_order;
}

}  // namespace kf
