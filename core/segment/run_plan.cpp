#include "core/segment/run_plan.h"

#include <algorithm>

#include "core/segment/segmentation.h"
#include "core/util/error.h"

namespace kf {

RunPlan plan_run(const Fusion& f, const std::vector<Segment>& segments, const std::vector<bool>& relayout,
                 const std::vector<bool>& relayout_inputs) {
  const size_t n = f.values.size();
  std::vector<int64_t> last_read_segment(n, -1), producer_segment(n, -1);
  for (size_t k = 0; k < segments.size(); ++k) {
    for (int64_t in : segments[k].task.inputs) last_read_segment[static_cast<size_t>(in)] = static_cast<int64_t>(k);
    for (int64_t out : segments[k].task.outputs) producer_segment[static_cast<size_t>(out)] = static_cast<int64_t>(k);
  }

  std::vector<TensorRef> where(n);
  std::vector<bool> placed(n, false);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    where[static_cast<size_t>(f.inputs[i])] = {TensorRef::Kind::Input, static_cast<uint32_t>(i)};
    placed[static_cast<size_t>(f.inputs[i])] = true;
  }
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const Output& o = f.outputs[i];
    const size_t id = static_cast<size_t>(o.value);
    if (placed[id]) continue;  // an input, or a repeated output: copied at the end
    if (i < relayout.size() && relayout[i]) continue;  // an intermediate, copied at the end
    if (o.alias_input >= 0) {
      // Written into its input only where nothing reads the input after the
      // write: no later segment, and within the producing segment only the
      // thread that writes each element, before it does (in_place_inputs).
      const int64_t aliased = f.inputs[static_cast<size_t>(o.alias_input)];
      const int64_t last = last_read_segment[static_cast<size_t>(aliased)], producer = producer_segment[id];
      if (last > producer || (last == producer && producer < 0)) continue;
      if (last == producer) {
        const std::vector<int64_t>& safe = segments[static_cast<size_t>(producer)].in_place_inputs;
        if (std::find(safe.begin(), safe.end(), aliased) == safe.end()) continue;
      }
    }
    where[id] = {TensorRef::Kind::Output, static_cast<uint32_t>(i)};
    placed[id] = true;
  }

  RunPlan plan;
  // Inputs copied into kfuse's layout: segments read the copy, made before
  // the first of them and released after the last; final_values (an output
  // that is an input) still name the caller's tensor.
  std::vector<int64_t> copy_slot(n, -1);  // per input value copied in: its slot
  plan.segments.resize(segments.size());
  for (size_t i = 0; i < f.inputs.size() && i < relayout_inputs.size(); ++i) {
    const size_t id = static_cast<size_t>(f.inputs[i]);
    if (!relayout_inputs[i] || last_read_segment[id] < 0) continue;
    size_t first = 0;
    while (std::find(segments[first].task.inputs.begin(), segments[first].task.inputs.end(), f.inputs[i]) ==
           segments[first].task.inputs.end())
      ++first;
    const uint32_t slot = static_cast<uint32_t>(plan.intermediates.size());
    plan.intermediates.push_back(f.inputs[i]);
    copy_slot[id] = slot;
    plan.segments[first].copy_in.push_back({static_cast<uint32_t>(i), slot});
    plan.segments[static_cast<size_t>(last_read_segment[id])].release_after.push_back(slot);
  }
  for (size_t k = 0; k < segments.size(); ++k) {
    const Segment& seg = segments[k];
    SegmentRun& run = plan.segments[k];
    for (int64_t in : seg.task.inputs) {
      const int64_t slot = copy_slot[static_cast<size_t>(in)];
      run.inputs.push_back(slot < 0 ? where[static_cast<size_t>(in)]
                                    : TensorRef{TensorRef::Kind::Intermediate, static_cast<uint32_t>(slot)});
    }
    for (int64_t out : seg.task.outputs) {
      const size_t id = static_cast<size_t>(out);
      if (!placed[id]) {
        where[id] = {TensorRef::Kind::Intermediate, static_cast<uint32_t>(plan.intermediates.size())};
        placed[id] = true;
        plan.intermediates.push_back(out);
      }
      run.outputs.push_back(where[id]);
    }
    for (int64_t dead : seg.dead_after)
      if (where[static_cast<size_t>(dead)].kind == TensorRef::Kind::Intermediate)
        run.release_after.push_back(where[static_cast<size_t>(dead)].index);
  }
  for (const Output& o : f.outputs) {
    if (!placed[static_cast<size_t>(o.value)])
      fail(KF_ERR_INTERNAL, "output value ", o.value, " is neither an input nor computed by a segment");
    plan.final_values.push_back(where[static_cast<size_t>(o.value)]);
  }
  return plan;
}

}  // namespace kf
