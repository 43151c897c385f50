// A segment as a standalone fusion in the text form: its value inputs
// become inputs (in task order), constants are re-declared, its exprs are
// replayed through a Builder, and its outputs become outputs. A
// communication segment prints its collective, which the text parser
// rejects (only kfuse inserts them): such text is for reading.
#pragma once

#include <string>

#include "core/ir/task.h"

namespace kf {

std::string segment_to_text(const Fusion& fusion, const Task& task);

}  // namespace kf
