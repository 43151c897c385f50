// Tasks built around one op that runs alone (a scatter, a scan) with the
// producers of its operands that its kernels compute inline (grouping.cpp:
// inline_producers): the check both schedulers share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/concretize/concrete_fusion.h"
#include "core/ir/op_table.h"
#include "core/ir/task.h"

namespace kf {

// The task's one expr of `head` category, when every other expr is
// pointwise, shape, creation, indexing or query and the task writes the
// head's result only; else nullopt with the reason in `why` (optional),
// naming the head `noun` ("scatter", "scan").
std::optional<int64_t> single_head_expr(const ConcreteFusion& c, const Task& task, OpCategory head,
                                        const std::string& noun, std::string* why);

}  // namespace kf
