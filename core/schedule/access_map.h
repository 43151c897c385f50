// Which indices a kernel reads each value at, found on the IR: the roots
// (values a kernel evaluates, each at a known IndexMap over its domain) are
// followed through the producers of the task, applying each op's index rule
// (core/ir/index_rules.h, the rules codegen's KernelWriter::value_at applies
// to index expressions). Schedulers use it to find transposed inputs (tiles), the
// layout of vector loads, and reduction results read at another row's
// index (which no row kernel can run).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/kernel_schedule.h"
#include "core/ir/task.h"

namespace kf {

struct AccessMap {
  // Per value reached (task inputs, intermediates, reduction results): the
  // distinct maps it is read at, in first-seen order. The walk stops at
  // task inputs and at reduction results (their inputs are read by the
  // reduction's own loop, which a row scheduler seeds itself).
  std::map<int64_t, std::vector<IndexMap>> reads;
  std::vector<int64_t> order;  // the values of `reads` in first-read order (depth first, operands in order)
  const std::vector<IndexMap>* find(int64_t v) const {
    auto it = reads.find(v);
    return it == reads.end() ? nullptr : &it->second;
  }
};

// The identity map of `domain`: dim d reads domain dim d, dims of size
// class 0/1 read index 0.
IndexMap identity_map(const ConcreteFusion& c, int64_t domain);

// With `shifts`, the dims a cat or a pad reads inside a bound (every
// operand of a cat along its dim, the first included; a pad's input along
// each padded dim) are shifted entries (kShiftedIndex) instead of opaque
// or plain ones: the pointwise vector plan's view, in which such reads can
// be vectors (codegen guards them by the bound).
//
// With shifts, how a slice of step 1 reads its dim:
enum class SliceReads : uint8_t {
  Opaque,     // at an opaque index
  Unaligned,  // at a shift of alignment 1: where its elements lie, not
              // whether they align (the tiled scheduler's view: a tile
              // filled through a slice along its dim a is filled coalesced)
  AtStart,    // at a shift by its start, of the start's alignment (the
              // pointwise vector plan's view: a rotary embedding's halves,
              // a gated activation's gate and up, read as vectors where the
              // start keeps a vector whole; a start counted from the end is
              // taken as aligned, which the run time checks)
};
// With `stops`: the (value, map) pairs recorded but not followed into
// their operands (the values a tiled kernel's phase 2 reads from its tiles).
using AccessStops = std::set<std::pair<int64_t, IndexMap>>;
AccessMap trace_accesses(const ConcreteFusion& c, const Task& task,
                         const std::vector<std::pair<int64_t, IndexMap>>& roots, bool shifts = false,
                         SliceReads slices = SliceReads::Opaque, const AccessStops* stops = nullptr);

}  // namespace kf
