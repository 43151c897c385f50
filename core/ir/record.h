// A Record is one builder call: what the definition trie is keyed by. Two
// definitions that make equal records in the same order are the same fusion.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/op_table.h"

namespace kf {

// Mesh: attrs [ranks]. Shard: args [value], attrs [dim] (kReplicated: whole
// on every rank); it applies to the latest output of the value when there
// is one, else to the input.
enum class RecordKind : uint8_t { TensorInput, ScalarInput, Constant, Op, Output, Mesh, Shard };
constexpr int64_t kReplicated = -1;

struct Record {
  RecordKind kind = RecordKind::Op;
  Op op = Op::COUNT;         // RecordKind::Op only
  DType dtype = DType::F32;  // inputs and constants
  std::vector<int64_t> args;   // value ids
  std::vector<int64_t> attrs;  // rank (tensor input), value bits (constant),
                               // normalized op attributes, output layout

  bool operator==(const Record& o) const {
    return kind == o.kind && op == o.op && dtype == o.dtype && args == o.args && attrs == o.attrs;
  }
  uint64_t hash() const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    mix(static_cast<uint64_t>(kind));
    mix(static_cast<uint64_t>(op));
    mix(static_cast<uint64_t>(dtype));
    for (int64_t a : args) mix(static_cast<uint64_t>(a));
    mix(0xabcdefull);
    for (int64_t a : attrs) mix(static_cast<uint64_t>(a));
    return h;
  }
};

struct RecordHash {
  size_t operator()(const Record& r) const { return static_cast<size_t>(r.hash()); }
};

}  // namespace kf
