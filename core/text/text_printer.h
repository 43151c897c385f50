// The fusion text form (docs/text-format.md), printing side. Each Record of a
// fusion prints as one statement, so parsing the printed text replays the
// same builder calls and the definition cache returns the same Fusion.
//
// The text signature of every op (where its shape list sits, its attribute
// names and their place in Expr::attrs) lives here too: the parser reads the
// same table, so the two sides cannot drift apart.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/ir/fusion.h"

namespace kf {

// Prints `fusion` in the canonical text form: values are named by kind and id
// (t0: tensor input, s1: scalar input, c2: constant, v3: computed), every op
// attribute is spelled out in canonical order, and floats print with %.17g so
// they read back bit for bit.
std::string print_fusion(const Fusion& fusion);

enum class TextAttrKind : uint8_t {
  Int,      // an integer, may be negative
  Bool,     // true / false, stored as 1 / 0
  DType,    // a dtype name, stored as its kf_dtype code
  Stop,     // an integer or `end` (INT64_MAX)
  IntList,  // [i, j, ...]: the tail of Expr::attrs after the fixed slots
  ScatterReduce,  // none, sum, prod, mean, amax, amin (kf_scatter_reduce)
};

struct TextAttr {
  std::string_view name;
  TextAttrKind kind;
  int slot;  // index in Expr::attrs; unused for IntList (always the tail)
  bool required;
  int64_t default_value;  // when not required; an IntList defaults to []
};

struct TextSignature {
  // Number of value names before the shape list `[a, b]`, or -1 when the op
  // takes no shape list. Ops with a list take exactly min_names names.
  int list_position = -1;
  size_t min_names = 0;
  size_t max_names = 0;
  std::span<const TextAttr> attrs;  // in canonical (printing) order
  size_t fixed_slots = 0;           // attrs that are not IntList
};

const TextSignature& text_signature(Op op);

}  // namespace kf
