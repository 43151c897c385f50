#include "core/segment/recompute.h"

#include <algorithm>

namespace kf {

namespace {

// The exprs that compute `v` from the fusion's inputs, constants and
// scalars by pointwise ops alone (sorted), or nothing where another op,
// more than kMaxRecomputed exprs, a fusion output (its segment is the one
// that writes it), or an input that an output updates in place (an
// earlier segment may have written it) are on the way.
std::vector<int64_t> pointwise_chain(const Fusion& f, const std::vector<bool>& is_output, int64_t v) {
  std::vector<int64_t> chain, stack = {v};
  while (!stack.empty()) {
    const int64_t x = stack.back();
    stack.pop_back();
    const Value& val = f.value(x);
    if (is_output[static_cast<size_t>(x)]) return {};
    if (val.kind == ValueKind::TensorInput)
      for (const Output& o : f.outputs)
        if (o.alias_input == val.input_index) return {};
    const int64_t p = val.producer;
    if (p < 0 || std::find(chain.begin(), chain.end(), p) != chain.end()) continue;
    const Expr& e = f.exprs[static_cast<size_t>(p)];
    if (!is_pointwise(e.op) || chain.size() == kMaxRecomputed) return {};
    chain.push_back(p);
    stack.insert(stack.end(), e.inputs.begin(), e.inputs.end());
  }
  std::sort(chain.begin(), chain.end());
  return chain;
}

}  // namespace

void recompute_gathered_operands(const Fusion& f, const AcceptsRecomputing& accepts,
                                 std::vector<std::vector<int64_t>>* groups) {
  std::vector<bool> is_output(f.values.size(), false);
  for (const Output& o : f.outputs) is_output[static_cast<size_t>(o.value)] = true;
  for (std::vector<int64_t>& g : *groups) {
    const auto in_group = [&](int64_t e) { return std::binary_search(g.begin(), g.end(), e); };
    std::vector<int64_t> operands;
    for (int64_t ei : g) {
      const Expr& e = f.exprs[static_cast<size_t>(ei)];
      if (op_info(e.op).category != OpCategory::Indexing || e.inputs.empty()) continue;
      const int64_t v = e.inputs[0];
      const int64_t p = f.value(v).producer;
      if (p < 0 || in_group(p) || is_output[static_cast<size_t>(v)]) continue;
      // Read in this group only as gathered data: recomputing it whole
      // for another reader would move the group's work, not save bytes.
      bool gathered_only = true;
      for (int64_t c : g) {
        const Expr& r = f.exprs[static_cast<size_t>(c)];
        for (size_t k = 0; k < r.inputs.size(); ++k)
          if (r.inputs[k] == v && (k != 0 || op_info(r.op).category != OpCategory::Indexing)) gathered_only = false;
      }
      if (gathered_only && std::find(operands.begin(), operands.end(), v) == operands.end()) operands.push_back(v);
    }
    for (int64_t v : operands) {
      const std::vector<int64_t> chain = pointwise_chain(f, is_output, v);
      if (chain.empty()) continue;
      // The chain's other values read by the group itself would be
      // computed over their whole extent here, moving the work: left out.
      bool read_whole = false;
      for (int64_t ce : chain)
        for (int64_t cv : f.exprs[static_cast<size_t>(ce)].outputs)
          if (cv != v)
            for (int64_t r : g)
              for (int64_t in : f.exprs[static_cast<size_t>(r)].inputs) read_whole = read_whole || in == cv;
      if (read_whole) continue;
      std::vector<int64_t> merged = g;
      merged.insert(merged.end(), chain.begin(), chain.end());
      std::sort(merged.begin(), merged.end());
      merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
      if (accepts(merged, chain)) g = std::move(merged);
    }
  }
}

}  // namespace kf
