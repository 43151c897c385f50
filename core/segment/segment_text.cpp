#include "core/segment/segment_text.h"

#include "core/define/builder.h"
#include "core/text/text_printer.h"

namespace kf {

std::string segment_to_text(const Fusion& fusion, const Task& task) {
  Builder b(/*communication=*/true);  // a communication segment prints its collective
  std::vector<int64_t> id(fusion.values.size(), -1);
  for (int64_t in : task.inputs) {
    const Value& v = fusion.value(in);
    id[static_cast<size_t>(in)] = v.is_scalar ? b.scalar_input(v.dtype) : b.tensor_input(v.rank, v.dtype);
  }
  auto mapped = [&](int64_t v) {
    int64_t& m = id[static_cast<size_t>(v)];
    if (m < 0) {
      const Value& c = fusion.value(v);  // only constants are not mapped yet
      m = is_float(c.dtype) ? b.constant_f64(c.f64, c.dtype) : b.constant_i64(c.i64, c.dtype);
    }
    return m;
  };
  for (int64_t ei : task.exprs) {
    const Expr& e = fusion.exprs[static_cast<size_t>(ei)];
    std::vector<int64_t> args;
    for (int64_t in : e.inputs) args.push_back(mapped(in));
    std::vector<int64_t> outs = b.op(e.op, args, e.attrs);
    for (size_t k = 0; k < outs.size(); ++k) id[static_cast<size_t>(e.outputs[k])] = outs[k];
  }
  for (int64_t out : task.outputs)
    if (!fusion.value(out).is_scalar) b.output(id[static_cast<size_t>(out)], {}, -1);
  return print_fusion(b.draft());
}

}  // namespace kf
