// A ConcreteFusion is a Fusion bound to one class of inputs: the
// concretization key. Per input dimension the key holds the size class
// {0, 1, >1} (1 is a broadcast), the stride order, contiguity and the
// pointer alignment; then the size classes of every computed value (a
// slice or reshape can turn a >1 extent into 1), the values of scalars that
// decide shapes, the device, and whether 32-bit indexing suffices.
// Calls whose inputs fall in the same classes share one Plan (the
// pipeline's product, core/pipeline/plan.h), which holds the ConcreteFusion
// built here; other sizes within the classes reuse it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/concretize/input_meta.h"
#include "core/concretize/reshape_groups.h"
#include "core/ir/fusion.h"
#include "core/ir/size_class.h"

namespace kf {

class ExtentSets;

struct ConcreteKey {
  std::vector<int64_t> words;
  uint64_t hash = 0;
  bool operator==(const ConcreteKey& o) const { return hash == o.hash && words == o.words; }
};

struct InputLayout {
  std::vector<int> stride_order;  // dims outermost first
  std::vector<bool> contiguous;   // per dim: stride == inner stride * inner size
  int alignment = 16;      // bytes: the largest power of two <= 16 dividing the address
  int row_alignment = 16;  // elements: LayoutCode::row_alignment
  // The dims of size > 1 and stride 0 (bit d: an operand expanded along
  // dim d). Such an input is never copied into a layout of kfuse's
  // (relayout_inputs), which would materialize it, and its elements along
  // those dims are one: the vector plans read it as a broadcast there.
  uint32_t expanded = 0;
};

// What one call binds: the inputs' metadata, the sizes of every value and
// the concretization key. Its storage is reused: bind_inputs refills a
// Binding without freeing, so one kept per thread (core/util/scratch.h)
// stops allocating after its first call.
struct Binding {
  std::vector<InputMeta> inputs;  // per input
  ValueSizes sizes;               // per value id
  Device device;
  bool index32 = true;
  ConcreteKey key;  // filled when bind_inputs is asked for it
  // Per output, the stride order code (encode_order) of the caller's tensor
  // of kf_execute_into (bind_output_layouts); empty where kfuse lays the
  // outputs out itself (kf_execute).
  std::vector<uint64_t> output_orders;
};

// Built once per concretization key (by the pipeline, core/pipeline) and
// immutable afterwards.
class ConcreteFusion {
 public:
  // Not owned: the fusion owns its plans (and through them this), so an
  // owning pointer back would be a cycle. A caller's handle anchors the fusion.
  const Fusion* fusion = nullptr;
  ConcreteKey key;
  Device device;
  bool index32 = true;
  std::vector<InputLayout> input_layouts;             // per input
  std::vector<std::vector<SizeClass>> size_classes;   // per value id
  std::vector<std::vector<int>> stride_orders;        // per value id: layout it is produced in
  // Per output: the stride order of the caller's tensor it is written into
  // (kf_execute_into); empty where kfuse chose the outputs' layouts.
  std::vector<std::vector<int>> caller_output_orders;
  // Per output: produced in its own layout and copied into the caller's
  // tensor at the end (layout.cpp crosses_rows), not written where it is.
  std::vector<bool> relayout_outputs;
  // Per input: laid out across the rows of a reduction that its other
  // operands read along them (layout.cpp choose_input_relayouts), so it is
  // copied into a compact buffer of kfuse's first and every segment reads
  // that; input_layouts[i] is then that buffer's layout (the caller's is
  // caller_input_layouts[i]).
  std::vector<bool> relayout_inputs;
  std::vector<InputLayout> caller_input_layouts;  // per input: as the caller laid it out
  // Per output: the order code (encode_order) of the layout the plan
  // writes it in, so kf_execute_into can tell whether a caller's outputs
  // already match a plan made without them (outputs_in_plan_layout).
  std::vector<uint64_t> output_order_codes;
  // Per expr: whether it may take its fast form (core/ir/approx_math.h:
  // where only narrow-float outputs read it, within their rounding), the
  // one place that decides; codegen writes what it says. Empty with
  // KFUSE_APPROX_MATH=0.
  std::vector<bool> approximate;
  // Per value id: the ids its extents depend on (input extents < 0, shape
  // scalars >= 0), sorted and unique.
  std::vector<std::vector<int64_t>> extent_deps;
  // Which extents are equal in every call of the class (extent_sets.h):
  // segmentation asks the schedulers about many groups of one fusion.
  std::shared_ptr<const ExtentSets> extent_sets;
  // Per reshape expr: how it regroups dims in this class (reshape_groups.h).
  std::map<int64_t, ReshapeGroups> reshapes;

  std::string describe() const;
  // The caller's layout that relayout output i is copied into: its tensor
  // of kf_execute_into, or (kf_execute, an output updating an input that
  // is copied in) the input's own.
  const std::vector<int>& copied_output_order(size_t i) const;
};

// Binds one call into `b`: checks the inputs, infers every value's sizes
// and, when with_key, builds b->key. Throws kf::Error for inputs that
// contradict the definition. Allocates only where `b` has not held a
// binding of this size before.
void bind_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs,
                 Binding* b, bool with_key = true);
// The same into a new Binding (tools and tests).
Binding bind_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs);

// After bind_inputs: the layouts of the caller's outputs (kf_execute_into)
// join the binding and its key, so that the plan is made for the memory
// the kernels write (a row-major output of a transposed input gets a tiled
// kernel). Reads only their metadata and never fails: a missing or
// malformed output counts as row-major here and is reported by the output
// checks.
void bind_output_layouts(const Fusion& fusion, const DLTensor* const* outputs, size_t num_outputs, Binding* b);
// Whether the caller's outputs are laid out as `c` (a plan bound without
// them) writes them anyway: then kf_execute_into uses that plan rather than
// binding the outputs into a key of their own (no second plan, no second
// compile, for the common case). Counts that disagree count as a match
// (the output checks report them).
bool outputs_in_plan_layout(const Fusion& fusion, const ConcreteFusion& c, const DLTensor* const* outputs,
                            size_t num_outputs, const Binding& b);

// The concretize stage: the ConcreteFusion of `binding`'s class (layouts,
// size classes, extent dependencies, extent sets). Not cached here: the
// pipeline caches its whole product by binding.key (core/pipeline/plan.h).
std::shared_ptr<const ConcreteFusion> concretize(const Fusion& fusion, const Binding& binding);

}  // namespace kf
