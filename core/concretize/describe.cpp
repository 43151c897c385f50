// ConcreteFusion::describe: the key and concrete types in readable text
// (kf_concrete_describe, `kfuse explain`).
#include <sstream>

#include "core/concretize/concrete_fusion.h"

namespace kf {

namespace {

const char* class_name(SizeClass c) {
  switch (c) {
    case SizeClass::Zero: return "0";
    case SizeClass::One: return "1";
    case SizeClass::Many: return ">1";
  }
  return "?";
}

template <typename T, typename F>
void list(std::ostream& os, const std::vector<T>& xs, F&& item) {
  os << '[';
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) os << ", ";
    item(xs[i]);
  }
  os << ']';
}

void type_of(std::ostream& os, const Value& v) {
  if (v.is_scalar) os << "scalar<" << dtype_name(v.dtype) << '>';
  else os << "tensor<" << dtype_name(v.dtype) << ", " << v.rank << '>';
}

}  // namespace

std::string ConcreteFusion::describe() const {
  std::ostringstream os;
  const Fusion& f = *fusion;
  os << "concrete fusion, key " << std::hex << key.hash << std::dec << '\n';
  os << "device: " << (device.kind == DeviceKind::CPU ? "cpu" : "cuda:")
     << (device.kind == DeviceKind::CPU ? "" : std::to_string(device.id))
     << ", indexing: " << (index32 ? "32-bit" : "64-bit") << '\n';
  if (f.mesh != 0) os << "mesh: " << f.mesh << " ranks (sizes below are one rank's)\n";
  // ", sharded on dim d" or ", replicated" after a tensor's line, with a mesh.
  auto sharding = [&](int64_t id) {
    if (f.mesh == 0 || f.value(id).is_scalar) return;
    const int d = f.shardings[static_cast<size_t>(id)].dim;
    if (d >= 0) os << ", sharded on dim " << d;
    else os << ", replicated";
  };
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Value& v = f.value(f.inputs[i]);
    os << "input " << i << " (value " << v.id << ") ";
    type_of(os, v);
    if (v.is_scalar) {
      os << '\n';
      continue;
    }
    const bool copied = i < relayout_inputs.size() && relayout_inputs[i];
    const InputLayout& l = copied ? caller_input_layouts[i] : input_layouts[i];
    os << ": sizes ";
    list(os, size_classes[static_cast<size_t>(v.id)], [&](SizeClass c) { os << class_name(c); });
    os << ", stride order ";
    list(os, l.stride_order, [&](int d) { os << d; });
    os << ", contiguous ";
    list(os, l.contiguous, [&](bool c) { os << (c ? 't' : 'f'); });
    os << ", alignment " << l.alignment;
    if (l.row_alignment < 16) os << ", rows aligned to " << l.row_alignment << " elements";
    os << ", extents ";
    std::vector<int64_t> ids;
    for (int d = 0; d < v.rank; ++d) ids.push_back(f.extent_id(i, d));
    list(os, ids, [&](int64_t id) { os << id; });
    if (copied) {
      os << ", copied from the caller's layout into order ";
      list(os, input_layouts[i].stride_order, [&](int d) { os << d; });
    }
    sharding(v.id);
    os << '\n';
  }
  for (const Expr& e : f.exprs)
    for (int64_t out : e.outputs) {
      const Value& v = f.value(out);
      os << "value " << out << " = " << op_name(e.op) << ": ";
      type_of(os, v);
      if (!v.is_scalar) {
        os << ", sizes ";
        list(os, size_classes[static_cast<size_t>(out)], [&](SizeClass c) { os << class_name(c); });
        os << ", order ";
        list(os, stride_orders[static_cast<size_t>(out)], [&](int d) { os << d; });
        os << ", extent deps ";
        list(os, extent_deps[static_cast<size_t>(out)], [&](int64_t d) { os << d; });
        sharding(out);
      }
      os << '\n';
    }
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const Output& o = f.outputs[i];
    os << "output " << i << ": value " << o.value << ", layout ";
    list(os, stride_orders[static_cast<size_t>(o.value)], [&](int d) { os << d; });
    if (o.alias_input >= 0) os << ", aliases input " << o.alias_input;
    if (i < relayout_outputs.size() && relayout_outputs[i]) {
      os << ", copied into the caller's layout ";
      list(os, copied_output_order(i), [&](int d) { os << d; });
    }
    sharding(o.value);
    os << '\n';
  }
  return os.str();
}

}  // namespace kf
