#include "core/codegen/emit_common.h"

#include <algorithm>

#include "core/codegen/op_cuda.h"
#include "core/schedule/vector_plan.h"

namespace kf {

std::vector<std::string> unravel(KernelWriter& w, int64_t dom, const std::vector<size_t>& dims,
                                 const std::string& linear, const std::string& suffix, bool maybe_unused) {
  std::vector<std::string> names(dims.size(), "0");
  std::vector<size_t> many;
  for (size_t k = 0; k < dims.size(); ++k)
    if (w.size_class(dom, dims[k]) == SizeClass::Many) many.push_back(k);
  if (many.empty()) return names;
  const std::string t = (maybe_unused ? "[[maybe_unused]] const " : "const ") + w.index_type();
  // Appended piecewise: g++ 12 warns (-Wrestrict, a false positive) on
  // "i" + std::to_string(d) here.
  auto name_of = [&suffix](size_t d) {
    std::string n = std::to_string(d);
    n.insert(n.begin(), 'i');
    n += suffix;
    return n;
  };
  if (many.size() == 1) {
    names[many[0]] = name_of(dims[many[0]]);
    w.line(t + " " + names[many[0]] + " = (" + w.index_type() + ")(" + linear + ");");
    return names;
  }
  const std::string rem = w.fresh("rem");
  w.line(w.index_type() + " " + rem + " = (" + w.index_type() + ")(" + linear + ");");
  for (size_t m = many.size(); m-- > 0;) {
    const size_t k = many[m];
    names[k] = name_of(dims[k]);
    if (m == 0) {
      w.line(t + " " + names[k] + " = " + rem + ";");
    } else {
      w.divmod(t, names[k], rem, dom, dims[k]);
    }
  }
  return names;
}

std::vector<std::string> unravel_in_order(KernelWriter& w, int64_t dom, const std::vector<size_t>& order,
                                          const std::string& linear, const std::string& suffix, bool maybe_unused) {
  const std::vector<std::string> names = unravel(w, dom, order, linear, suffix, maybe_unused);
  std::vector<std::string> idx(order.size());
  for (size_t k = 0; k < order.size(); ++k) idx[order[k]] = names[k];
  return idx;
}

std::vector<size_t> all_dims(size_t r) {
  std::vector<size_t> d(r);
  for (size_t i = 0; i < r; ++i) d[i] = i;
  return d;
}

std::string all_of(const std::vector<std::string>& conds) {
  std::string cond;
  for (const std::string& c : conds) cond += (cond.empty() ? "" : " && ") + c;
  return cond.empty() ? "true" : cond;
}

std::string extent_product(KernelWriter& w, int64_t dom, const std::vector<size_t>& dims, const char* one) {
  std::string p;
  for (size_t d : dims) {
    const std::string e = w.extent(dom, d);
    if (e == "1") continue;
    p = p.empty() ? "(long long)" + e : p + " * " + e;
  }
  return p.empty() ? std::string(one) : w.hoist("long long", "n", p);
}

void use_vectors(KernelWriter& w, const VectorPlan& vp) {
  w.vector_inputs = vp.inputs;
  w.any_aligned = vp.any_aligned;
  w.vector_regs.clear();
  w.lane_dim = vp.dim;
  w.lane_width = vp.width;
  w.lane_conditions.clear();
  w.lane_checks.clear();
}

std::string vector_type(const KernelWriter& w, int64_t v, int V) {
  return "kf_vec<" + std::string(storage_type(w.fusion().value(v).dtype)) + ", " + std::to_string(V) + ">";
}

std::vector<int> vector_dims(const KernelWriter& w, int64_t v, int64_t dom, size_t dim) {
  const size_t r = w.rank(v), rd = w.rank(dom);
  std::vector<int> dims;
  if (auto vi = w.vector_inputs.find(v); vi != w.vector_inputs.end()) {
    dims = vi->second;
  } else if (w.views.contains(v)) {  // an output through a reshape keeping the last dim (add_view_vectors)
    dims.assign(r, kZeroIndex);
    dims[r - 1] = static_cast<int>(dim);
  } else {  // an output in domain order
    dims.assign(r, kZeroIndex);
    for (size_t j = 0; j < r && r <= rd; ++j)
      if (w.size_class(v, j) != SizeClass::One) dims[j] = static_cast<int>(rd - r + j);
  }
  return dims;
}

void vector_conditions(KernelWriter& w, const ExtentSets& sets, int64_t v, int64_t dom, int width, size_t dim,
                       std::vector<std::string>* conds, const std::vector<int>* input_dims,
                       std::vector<ArgCheck>* checks, const VectorRef* ref, bool any_alignment) {
  std::vector<ArgCheck> unused;
  if (checks == nullptr) checks = &unused;
  using K = ArgSlot::Kind;
  const size_t r = w.rank(v);
  const std::vector<int> dims = input_dims != nullptr ? *input_dims : vector_dims(w, v, dom, dim);
  const size_t pv = static_cast<size_t>(
      std::find_if(dims.begin(), dims.end(), [&](int m) { return read_dim(m) == static_cast<int>(dim); }) - dims.begin());
  // A vector wider than 16 bytes moves as several 16-byte ones.
  // (At any alignment: element-aligned, the other strides free.)
  any_alignment = any_alignment || w.loads_any_aligned(v);
  const int bytes = any_alignment ? dtype_size(w.fusion().value(v).dtype)
                                  : std::min(width * dtype_size(w.fusion().value(v).dtype), kVectorBytes);
  // The text only when asked for: its names are declared where first used.
  const auto text = [&](const std::function<std::string()>& make) {
    if (conds != nullptr) conds->push_back(make());
  };
  text([&] { return "((unsigned long long)" + w.pointer(v) + " % " + std::to_string(bytes) + " == 0)"; });
  checks->push_back({ArgCheck::Kind::Multiple, {w.word(K::Data, v)}, 0, bytes});
  text([&] { return w.stride(v, pv) + " == 1"; });
  checks->push_back({ArgCheck::Kind::Equal, {w.word(K::Stride, v, static_cast<int>(pv))}, 1});
  for (size_t d = 0; d < r; ++d) {
    if (any_alignment || d == pv || w.size_class(v, d) != SizeClass::Many || (ref != nullptr && v == ref->value)) continue;
    // With ref: its dim reading the same domain dim (none: ref's rows all
    // start at remainder 0 along it, so v's stride must be a multiple).
    int j = -1;
    if (ref != nullptr && dims[d] >= 0)
      for (size_t k = 0; k < ref->dims.size(); ++k)
        if (ref->dims[k] == dims[d] && w.size_class(ref->value, k) == SizeClass::Many) j = static_cast<int>(k);
    if (j < 0) {
      text([&] { return w.stride(v, d) + " % " + std::to_string(width) + " == 0"; });
      checks->push_back({ArgCheck::Kind::Multiple, {w.word(K::Stride, v, static_cast<int>(d))}, 0, width});
    } else {
      text([&] {
        const std::string s = w.stride(v, d);  // (hoisted in this order on every compiler)
        return "(" + s + " - " + w.stride(ref->value, static_cast<size_t>(j)) + ") % " + std::to_string(width) + " == 0";
      });
      checks->push_back({ArgCheck::Kind::Congruent, {w.word(K::Stride, v, static_cast<int>(d)), w.word(K::Stride, ref->value, j)},
                         0, width});
    }
  }
  for (size_t d = 0; d < r; ++d) {
    if (dims[d] < 0) continue;
    if (w.size_class(v, d) == SizeClass::Many && !sets.same(v, static_cast<int>(d), dom, dims[d])) {
      const size_t dd = static_cast<size_t>(dims[d]);
      text([&] {
        const std::string e = w.extent(v, d);  // (hoisted in this order on every compiler)
        return e + " == " + w.extent(dom, dd);
      });
      ArgCheck same{ArgCheck::Kind::Equal, {w.word(K::Extent, v, static_cast<int>(d))}};
      w.add_extent(&same, dom, dd);  // a second word, or the constant it must equal
      checks->push_back(same);
    }
  }
}

void used_vector_conditions(KernelWriter& w, const ExtentSets& sets, const VectorPlan& vp, int64_t dom,
                            bool every_group, std::vector<std::string>* conds, std::vector<ArgCheck>* checks,
                            const VectorRef* ref, bool any_alignment) {
  std::vector<std::pair<int64_t, std::vector<int>>> seen;
  for (const auto& [key, vr] : w.vector_regs) {
    if (!every_group && vr.ok_group != 0) continue;
    if (std::find(seen.begin(), seen.end(), std::make_pair(key.first, vr.dims)) != seen.end()) continue;
    seen.emplace_back(key.first, vr.dims);
    vector_conditions(w, sets, key.first, dom, vp.width, vp.dim, conds, &vr.dims, checks, ref, any_alignment);
  }
  for (int64_t o : vp.outputs)
    vector_conditions(w, sets, o, dom, vp.width, vp.dim, conds, nullptr, checks, ref, any_alignment);
  if (conds != nullptr) conds->insert(conds->end(), w.lane_conditions.begin(), w.lane_conditions.end());
  if (checks != nullptr) checks->insert(checks->end(), w.lane_checks.begin(), w.lane_checks.end());
}

std::string vector_load_any(KernelWriter& w, int64_t v, const std::string& vt, const std::string& at,
                            const std::string& left) {
  // (the tensor's bytes: from its pointer to its last element's end)
  std::vector<std::string> last(w.rank(v), "0");
  for (size_t d = 0; d < last.size(); ++d)
    if (w.size_class(v, d) == SizeClass::Many) last[d] = "(" + w.extent(v, d) + " - 1)";
  const std::string p = w.pointer(v);
  const std::string end = w.hoist("const void*", "pend", p + " + " + w.offset(v, last) + " + 1");
  return "kf_vload_any<" + vt + ">(" + at + ", " + left + ", " + p + ", " + end + ")";
}

std::vector<std::string> vector_loads(KernelWriter& w, int V, int section, const std::vector<std::string>& group_ok,
                                      const std::string& any_left) {
  std::vector<std::string> loads;
  for (const auto& [key, vr] : w.vector_regs) {
    if (vr.section != section) continue;
    const int64_t v = key.first;
    const std::string vt = vector_type(w, v, V);
    std::string load = "*(const " + vt + "*)(" + w.address(v, vr.base) + ")";
    // (an input of VectorPlan::any_aligned: its vector exists whole where
    // its lanes' guard holds, the row's width a multiple of V)
    if (!any_left.empty()) load = vector_load_any(w, v, vt, w.address(v, vr.base), any_left);
    else if (w.loads_any_aligned(v)) load = vector_load_any(w, v, vt, w.address(v, vr.base), std::to_string(V));
    std::string ok = group_ok.empty() ? std::string() : group_ok[static_cast<size_t>(vr.ok_group)];
    if (!vr.guard.empty()) ok = ok.empty() ? vr.guard : ok + " && " + vr.guard;
    loads.push_back("const " + vt + " " + vr.reg + " = " + (ok.empty() ? load : "(" + ok + ") ? " + load + " : " + vt + "{}") + ";");
  }
  if (loads.empty()) loads.push_back("// no vector loads");
  return loads;
}

GroupStores vector_group_values(KernelWriter& w, const VectorPlan& vp, const std::vector<int64_t>& outs,
                                const std::vector<std::string>& idx, const std::function<void(int)>& on_lane,
                                const std::vector<std::vector<std::string>>* lane_indices) {
  const Fusion& f = w.fusion();
  const size_t d = vp.dim;
  GroupStores g;
  g.idx = idx;
  g.any_left = w.any_left;
  g.any_mask = w.any_mask;
  for (int64_t o : vp.outputs) {
    g.vector_regs.push_back(w.fresh("ov"));
    w.line(vector_type(w, o, vp.width) + " " + g.vector_regs.back() + ";");
  }
  w.lane_base = idx;
  // The outputs stored element by element are stored after every lane is
  // computed: a store between two lanes' loads keeps the compiler from
  // issuing the later loads early (it cannot tell that an output does not
  // alias an input; in place it does, at the same element, read first), so
  // an input read per lane, misaligned or in another order, cost one
  // memory latency per lane (an Adam step in place with its moment at an
  // odd offset: docs/perf-log.md, session 38).
  for (int lane = 0; lane < vp.width; ++lane) {
    w.lane = lane;
    w.lane_index = idx;
    if (lane_indices != nullptr) w.lane_index = (*lane_indices)[static_cast<size_t>(lane)];
    else if (lane > 0) w.lane_index[d] = "(" + idx[d] + " + " + std::to_string(lane) + ")";
    on_lane(lane);
    for (int64_t o : outs) {
      const std::string reg = w.value_at(o, w.lane_index);
      auto it = std::find(vp.outputs.begin(), vp.outputs.end(), o);
      if (it == vp.outputs.end()) {
        g.elements.push_back({o, lane, w.lane_index, reg});
      } else {
        w.line(g.vector_regs[static_cast<size_t>(it - vp.outputs.begin())] + ".v[" + std::to_string(lane) + "] = " +
               w.stored(f.value(o).dtype, reg) + ";");
      }
    }
  }
  w.lane = -1;
  return g;
}

void store_vector_group(KernelWriter& w, const VectorPlan& vp, const GroupStores& g) {
  for (const GroupStores::Element& s : g.elements) {
    if (!g.any_left.empty()) w.open("if (" + std::to_string(s.lane) + " < " + g.any_left + ")");
    w.store(s.value, s.idx, s.reg);
    if (!g.any_left.empty()) w.close();
  }
  for (size_t k = 0; k < vp.outputs.size(); ++k) {
    const int64_t o = vp.outputs[k];
    const std::string vt = vector_type(w, o, vp.width);
    if (g.any_left.empty())
      w.line("*(" + vt + "*)(" + w.address(o, g.idx) + ") = " + g.vector_regs[k] + ";");
    else
      w.line("kf_vstore_any(" + w.address(o, g.idx) + ", " + g.vector_regs[k] + ", " + g.any_left + ", " + g.any_mask + ");");
  }
}

void vector_group(KernelWriter& w, const VectorPlan& vp, const std::vector<int64_t>& outs,
                  const std::vector<std::string>& idx, const std::function<void(int)>& on_lane,
                  const std::vector<std::vector<std::string>>* lane_indices) {
  store_vector_group(w, vp, vector_group_values(w, vp, outs, idx, on_lane, lane_indices));
}

}  // namespace kf
