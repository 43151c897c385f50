// The concretize stage's entry point: one ConcreteFusion from one binding.
#include "core/concretize/concrete_fusion.h"
#include "core/concretize/extent_sets.h"
#include "core/concretize/layout.h"

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
  propagate_extent_deps(*c);
  auto sets = std::make_shared<ExtentSets>(*c);  // reads the fields above
  sets->freeze();
  c->extent_sets = std::move(sets);
  return c;
}

}  // namespace kf
