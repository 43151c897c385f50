// A ConcreteFusion is a Fusion bound to one class of inputs: the
// concretization key. Per input dimension the key holds the size class
// {0, 1, >1} (1 is a broadcast), the stride order, contiguity and the
// pointer alignment; then the size classes of every computed value (a
// slice or reshape can turn a >1 extent into 1), the values of scalars that
// decide shapes, the device, and whether 32-bit indexing suffices.
// Calls whose inputs fall in the same classes share a ConcreteFusion (and
// its segmentation and kernels); other sizes within the classes reuse it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/concretize/input_meta.h"
#include "core/ir/fusion.h"
#include "core/util/lazy.h"

struct kf_concrete_s {};

namespace kf {

class Segmentation;
class ExtentSets;

enum class SizeClass : uint8_t { Zero = 0, One = 1, Many = 2 };
inline SizeClass size_class(int64_t extent) {
  return extent == 0 ? SizeClass::Zero : extent == 1 ? SizeClass::One : SizeClass::Many;
}

struct ConcreteKey {
  std::vector<int64_t> words;
  uint64_t hash = 0;
  bool operator==(const ConcreteKey& o) const { return hash == o.hash && words == o.words; }
};

struct InputLayout {
  std::vector<int> stride_order;  // dims outermost first
  std::vector<bool> contiguous;   // per dim: stride == inner stride * inner size
  int alignment = 16;
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
};

class ConcreteFusion : public kf_concrete_s, public ExternallyHeld<ConcreteFusion> {
 public:
  // Not owned: the fusion owns its concrete fusions (its cache), so an owning
  // pointer back would be a cycle. A caller's handle anchors the fusion.
  const Fusion* fusion = nullptr;
  ConcreteKey key;
  Device device;
  bool index32 = true;
  std::vector<InputLayout> input_layouts;             // per input
  std::vector<std::vector<SizeClass>> size_classes;   // per value id
  std::vector<std::vector<int>> stride_orders;        // per value id: layout it is produced in
  // Per value id: the ids its extents depend on (input extents < 0, shape
  // scalars >= 0), sorted and unique.
  std::vector<std::vector<int64_t>> extent_deps;
  std::shared_ptr<const Segmentation> segmentation;  // set once, under segmentation_once
  mutable std::once_flag segmentation_once;
  // Which extents are equal in every call of the class (extent_sets.h),
  // computed on first use: segmentation asks the schedulers about many
  // groups of one fusion.
  Lazy<const ExtentSets> extent_sets;

  std::string describe() const;

 protected:
  std::shared_ptr<const void> external_anchor() const override;
};

// Binds one call into `b`: checks the inputs, infers every value's sizes
// and, when with_key, builds b->key. Throws kf::Error for inputs that
// contradict the definition. Allocates only where `b` has not held a
// binding of this size before.
void bind_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs,
                 Binding* b, bool with_key = true);
// The same into a new Binding (tools and tests).
Binding bind_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs);

// The cached ConcreteFusion for binding.key, built from `binding` on a miss.
std::shared_ptr<ConcreteFusion> concretize(const std::shared_ptr<const Fusion>& fusion,
                                           const Binding& binding);

struct ConcreteStats {
  uint64_t built = 0, hits = 0;
};
ConcreteStats concrete_stats();
void set_concrete_limit(size_t max_per_fusion);
void reset_concrete_stats();

}  // namespace kf
