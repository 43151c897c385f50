// How the executor runs a segmentation, worked out once when it is built:
// which tensor every segment reads and writes (a fusion input, a caller's
// output, or an intermediate the executor allocates), when each
// intermediate can be released, and where each fusion output's value is at
// the end. A call then only follows the plan: no per-call tables.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir/fusion.h"

namespace kf {

struct Segment;

// Where a value lives during a run.
struct TensorRef {
  enum class Kind : uint8_t { Input, Output, Intermediate };
  Kind kind = Kind::Input;
  uint32_t index = 0;  // fusion input, fusion output, or intermediate slot
};

// A fusion input copied from the caller's tensor into an intermediate slot
// in kfuse's layout (ConcreteFusion::relayout_inputs) before a segment.
struct InputCopy {
  uint32_t input = 0;  // fusion input
  uint32_t slot = 0;   // intermediate slot
};

struct SegmentRun {
  std::vector<InputCopy> copy_in;       // inputs copied in before this segment runs
  std::vector<TensorRef> inputs;        // per task.inputs
  std::vector<TensorRef> outputs;       // per task.outputs
  std::vector<uint32_t> release_after;  // intermediate slots this segment reads last
};

struct RunPlan {
  std::vector<SegmentRun> segments;
  std::vector<int64_t> intermediates;   // per slot: the value it holds (an input's copy holds the input)
  std::vector<TensorRef> final_values;  // per fusion output: where its value is at the end
};

// Outputs are computed in place in the caller's tensors, except outputs that
// are inputs, repeated outputs, and outputs aliasing an input that a later
// segment still reads, or that their own segment reads other than where it
// writes (Segment::in_place_inputs): those are copied at the end from
// final_values.
// relayout: per output, whether it is produced as an intermediate and
// copied into the caller's tensor at the end (ConcreteFusion::relayout_outputs).
// relayout_inputs: per input, whether it is copied into an intermediate
// before its first reader, which every segment then reads; the copy is
// released after its last reader (ConcreteFusion::relayout_inputs).
RunPlan plan_run(const Fusion& f, const std::vector<Segment>& segments, const std::vector<bool>& relayout = {},
                 const std::vector<bool>& relayout_inputs = {});

}  // namespace kf
