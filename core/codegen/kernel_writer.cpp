#include "core/codegen/kernel_writer.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "core/codegen/op_cuda.h"
#include "core/ir/type_promotion.h"
#include "core/util/error.h"
#include "core/ir/op_attrs.h"

namespace kf {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += sep;
    s += v[i];
  }
  return s;
}

[[noreturn]] void unsupported(const std::string& why) { fail(KF_ERR_UNSUPPORTED, "codegen: ", why); }

// Whether the parenthesis at `open` closes at the end of `s` (so s is one call).
bool balanced(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
    if (depth == 0) return i + 1 == s.size();
  }
  return false;
}

}  // namespace

KernelWriter::KernelWriter(const ConcreteFusion& c, const Task& task)
    : c_(c), f_(*c.fusion), idx_t_(c.index32 ? "int" : "long long"), fast_(c.approximate) {
  produced_.assign(f_.values.size(), false);
  is_input_.assign(f_.values.size(), false);
  is_output_.assign(f_.values.size(), false);
  for (int64_t ei : task.exprs)
    for (int64_t o : f_.exprs[static_cast<size_t>(ei)].outputs) produced_[static_cast<size_t>(o)] = true;
  for (int64_t v : task.inputs) is_input_[static_cast<size_t>(v)] = true;
  for (int64_t v : task.outputs) is_output_[static_cast<size_t>(v)] = true;
  scopes_.emplace_back();
  body_.emplace_back();
  if (const char* mb = std::getenv("KFUSE_MAX_SOURCE_MB"); mb != nullptr && *mb != '\0') {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(mb, &end, 10);
    if (*end == '\0' && n > 0 && n < (1ull << 20)) max_written_ = static_cast<size_t>(n) << 20;
  }
}

int KernelWriter::slot(ArgSlot::Kind kind, int64_t value, int dim) {
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i].kind == kind && args_[i].value == value && args_[i].dim == dim) return static_cast<int>(i);
  args_.push_back({kind, value, dim});
  return static_cast<int>(args_.size() - 1);
}

namespace {

// The C identifiers in an index expression.
void identifiers_of(const std::string& s, std::set<std::string>* out) {
  for (size_t i = 0; i < s.size();) {
    if (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out->insert(s.substr(i, j - i));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;  // 12LL
    } else {
      ++i;
    }
  }
}

// An expression without the parentheses around all of it: "((i + 1))" and
// "(i + 1)" name the same index.
std::string unwrapped(std::string s) {
  while (s.size() >= 2 && s.front() == '(' && s.back() == ')') {
    int depth = 0;
    bool whole = true;
    for (size_t i = 0; i + 1 < s.size() && whole; ++i) {
      depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
      whole = depth > 0;
    }
    if (!whole) break;
    s = s.substr(1, s.size() - 2);
  }
  return s;
}

}  // namespace

std::string KernelWriter::hoist(const std::string& type, const std::string& prefix,
                                const std::string& expr) {
  const std::string key = type + "|" + expr;
  auto it = hoisted_.find(key);
  if (it != hoisted_.end()) return it->second;
  const std::string name = prefix + std::to_string(counter_++);
  const bool is_pointer = type.back() == '*';
  preamble_ += "  " + (is_pointer ? type + " const " : "const " + type + " ") + name + " = " + expr + ";\n";
  count_written(expr.size() + name.size() + type.size() + 12);
  hoisted_[key] = name;
  return name;
}

std::string KernelWriter::extent(int64_t value, size_t dim) {
  switch (size_class(value, dim)) {
    case SizeClass::Zero: return "0";
    case SizeClass::One: return "1";
    case SizeClass::Many: break;
  }
  const int k = slot(ArgSlot::Kind::Extent, value, static_cast<int>(dim));
  return hoist(idx_t_, "e", "(" + idx_t_ + ")args.a[" + std::to_string(k) + "]");
}

std::string KernelWriter::stride(int64_t value, size_t dim) {
  const int k = slot(ArgSlot::Kind::Stride, value, static_cast<int>(dim));
  return hoist(idx_t_, "st", "(" + idx_t_ + ")args.a[" + std::to_string(k) + "]");
}

void KernelWriter::add_extent(ArgCheck* check, int64_t value, size_t dim) {
  switch (size_class(value, dim)) {
    case SizeClass::Many: check->words.push_back(word(ArgSlot::Kind::Extent, value, static_cast<int>(dim))); break;
    case SizeClass::One: ++check->offset; break;
    case SizeClass::Zero: break;
  }
}

ArgCheck KernelWriter::extent_multiple(int64_t value, size_t dim, int modulus) {
  ArgCheck check{ArgCheck::Kind::Multiple, {}, 0, modulus};
  add_extent(&check, value, dim);
  return check;
}

std::string KernelWriter::pointer(int64_t value) {
  const int k = slot(ArgSlot::Kind::Data, value, 0);
  const std::string t = storage_type(f_.value(value).dtype);
  const std::string cq = is_output_[static_cast<size_t>(value)] ? "" : "const ";
  return hoist(cq + t + "*", "p", "(" + cq + t + "*)args.a[" + std::to_string(k) + "]");
}

std::string KernelWriter::numel(int64_t value) {
  std::string n;
  for (size_t d = 0; d < rank(value); ++d) {
    const std::string e = extent(value, d);
    if (e == "1") continue;
    n = n.empty() ? e : n + " * " + e;
  }
  if (n.empty()) return "1";
  return hoist("long long", "n", "(long long)" + n);
}

void KernelWriter::line(const std::string& s) {
  std::string& text = body_.back();
  text.append(static_cast<size_t>(2 * depth_), ' ');
  text += s;
  text += '\n';
  count_written(s.size() + static_cast<size_t>(2 * depth_) + 1);
}

void KernelWriter::count_written(size_t bytes) {
  written_ += bytes;
  if (written_ > max_written_)
    fail(KF_ERR_UNSUPPORTED, "codegen: the kernels of this segment would take more than ", max_written_ >> 20,
         " MiB of CUDA source (values read at many different indices, e.g. a chain of cats of one value, are "
         "computed once per index); split the definition");
}

KernelWriter::Section KernelWriter::reserve() {
  const Section s{body_.size(), depth_};
  body_.emplace_back();  // the section
  body_.emplace_back();  // what follows it
  return s;
}

void KernelWriter::fill(Section s, const std::vector<std::string>& lines) {
  std::string& text = body_.at(s.chunk);
  text.clear();
  for (const std::string& l : lines) {
    text.append(static_cast<size_t>(2 * s.depth), ' ');
    text += l;
    text += '\n';
  }
}

std::string KernelWriter::body() const {
  std::string b;
  for (const std::string& chunk : body_) b += chunk;
  return b;
}

void KernelWriter::open(const std::string& head) {
  line(head + " {");
  ++depth_;
  scopes_.emplace_back();
}

void KernelWriter::close() {
  scopes_.pop_back();
  --depth_;
  line("}");
}

void KernelWriter::close_open(const std::string& head) {
  scopes_.pop_back();
  --depth_;
  line("} " + head + " {");
  ++depth_;
  scopes_.emplace_back();
}

std::string KernelWriter::take_kernel() {
  std::string k = preamble_ + body();
  preamble_.clear();
  body_.assign(1, {});
  hoisted_.clear();
  scopes_.assign(1, {});
  depth_ = 1;
  // Registers and reads of the kernel just taken mean nothing in the next.
  unrounded_.clear();
  vector_regs.clear();
  tile_reads.clear();
  row_results.clear();
  result_arrays.clear();
  result_order.clear();
  views.clear();
  result_section_.reset();
  result_lines_.clear();
  result_regs_.clear();
  reciprocals.clear();
  lane = -1;
  group = section = 0;
  word_lanes = false;
  return k;
}

std::string KernelWriter::fresh(const std::string& prefix) { return prefix + std::to_string(counter_++); }

std::optional<std::string> KernelWriter::memo(const std::string& key) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto hit = it->find(key);
    if (hit != it->end()) return hit->second;
  }
  return std::nullopt;
}

void KernelWriter::remember(const std::string& key, const std::string& reg) { scopes_.back()[key] = reg; }

std::string KernelWriter::define(DType t, const std::string& expr) {
  const std::string name = fresh("v");
  // A half/bfloat16/float8 result keeps its float before rounding in a
  // register of its own: a store converts that one (one rounding instead of
  // two, and conversions are quarter-rate instructions; a float8 rounding
  // is a conversion there and back, each with its range test).
  const std::string saturated = t == DType::F8E4M3 ? "kf_r8e4s(" : t == DType::F8E5M2 ? "kf_r8e5s(" : "";
  const bool saturating = !saturated.empty() && expr.starts_with(saturated);
  const std::string round = t == DType::BF16       ? "kf_rbf("
                            : t == DType::F16      ? "kf_rh("
                            : saturating           ? saturated
                            : t == DType::F8E4M3   ? "kf_r8e4("
                            : t == DType::F8E5M2   ? "kf_r8e5("
                                                   : "";
  if (!round.empty() && expr.starts_with(round) && expr.ends_with(")") && balanced(expr, round.size() - 1)) {
    const std::string raw = fresh("u");
    line("const float " + raw + " = " + expr.substr(round.size(), expr.size() - round.size() - 1) + ";");
    line("const float " + name + " = " + round + raw + ");");
    unrounded_[name] = {raw, saturating};
    return name;
  }
  line("const " + std::string(reg_type(t)) + " " + name + " = " + expr + ";");
  return name;
}

std::string KernelWriter::stored(DType t, const std::string& reg) const {
  auto it = unrounded_.find(reg);
  if (it == unrounded_.end()) return store_form(t, reg);
  return it->second.saturating ? saturated_store_form(t, it->second.raw) : store_form(t, it->second.raw);
}

std::vector<std::string> KernelWriter::view_index(int64_t output, const std::vector<std::string>& idx) {
  const int64_t producer = f_.value(output).producer;
  const int64_t from = views.at(output);
  const OperandIndex terms = reshape_index(c_.reshapes.at(producer), false, c_.size_classes[static_cast<size_t>(from)],
                                           c_.size_classes[static_cast<size_t>(output)]);
  return regroup(terms, from, idx, output);
}

OperandIndex KernelWriter::rule(const Expr& e, size_t k) const {
  const ReshapeGroups* groups = nullptr;
  if (e.op == Op::RESHAPE)
    if (auto g = c_.reshapes.find(static_cast<int64_t>(&e - f_.exprs.data())); g != c_.reshapes.end())
      groups = &g->second;
  return operand_index(e, k, c_.size_classes[static_cast<size_t>(e.outputs[0])],
                       c_.size_classes[static_cast<size_t>(e.inputs[k])], groups);
}

std::vector<std::string> KernelWriter::plain_index(const OperandIndex& terms, const std::vector<std::string>& idx) {
  std::vector<std::string> sub(terms.size());
  for (size_t d = 0; d < terms.size(); ++d)
    if (terms[d].kind == IndexTerm::Kind::Zero) sub[d] = "0";
    else if (terms[d].kind == IndexTerm::Kind::Out) sub[d] = idx[static_cast<size_t>(terms[d].dim)];
  return sub;
}

std::vector<std::string> KernelWriter::regroup(const OperandIndex& terms, int64_t from,
                                               const std::vector<std::string>& idx, int64_t to) {
  std::vector<std::string> res(rank(to), "0");
  int done = -1;  // the first `from` dim of the last group emitted
  for (size_t td = 0; td < terms.size(); ++td) {
    const IndexTerm& g = terms[td];
    if (g.kind != IndexTerm::Kind::Regroup || g.dim == done) continue;
    done = g.dim;
    const size_t fd = static_cast<size_t>(g.dim), nf = static_cast<size_t>(g.dims);
    std::string lin;  // the group's linear index over `from`'s dims
    for (size_t d = fd; d < fd + nf; ++d) {
      if (size_class(from, d) != SizeClass::Many) continue;
      lin = lin.empty() ? idx[d] : "(" + lin + ") * " + extent(from, d) + " + " + idx[d];
    }
    std::vector<size_t> many;  // the group's `to` dims of size class Many
    for (size_t d = td; d < terms.size(); ++d)
      if (terms[d].kind == IndexTerm::Kind::Regroup && terms[d].dim == g.dim) many.push_back(d);
    if (many.size() == 1) {  // a dim kept whole, or split dims merging into one: no division
      res[many[0]] = lin.empty() ? "0" : "(" + lin + ")";
    } else if (!many.empty()) {
      const std::string rem = fresh("t");
      line(idx_t_ + " " + rem + " = " + (lin.empty() ? "0" : lin) + ";");
      for (size_t k = many.size(); k-- > 0;) {
        const std::string name = fresh("t");
        if (k == 0) line("const " + idx_t_ + " " + name + " = " + rem + ";");
        else divmod("const " + idx_t_, name, rem, to, many[k]);
        res[many[k]] = name;
      }
    }
  }
  return res;
}

void KernelWriter::divmod(const std::string& decl, const std::string& name, const std::string& rem, int64_t value,
                          size_t dim) {
  const std::string e = extent(value, dim);
  if (idx_t_ != "int" || size_class(value, dim) != SizeClass::Many) {
    line(decl + " " + name + " = " + rem + " % " + e + ";");
    line(rem + " /= " + e + ";");
    return;
  }
  const std::string quot = quotient(rem, value, dim);
  const std::string q = fresh("dq");
  line("const int " + q + " = " + quot + ";");
  line(decl + " " + name + " = " + rem + " - " + q + " * " + e + ";");
  line(rem + " = " + q + ";");
}

std::string KernelWriter::quotient(const std::string& n, int64_t value, size_t dim) {
  if (idx_t_ != "int" || size_class(value, dim) != SizeClass::Many) return "(" + n + ") / " + extent(value, dim);
  const int k = slot(ArgSlot::Kind::Divisor, value, static_cast<int>(dim));
  const std::string fd = hoist("kf_fastdiv", "fd", "kf_fastdiv_of(args.a[" + std::to_string(k) + "])");
  return "kf_fastdiv_div(" + fd + ", " + n + ")";
}

std::vector<std::string> KernelWriter::offset_terms(int64_t value, const std::vector<std::string>& idx) {
  // A view output's index is its source's, mapped once through the
  // reshape (once: a reshape that keeps the rank gives an index of the
  // same length, which must not be mapped again).
  if (views.contains(value) && idx.size() == rank(views.at(value))) return own_offset_terms(value, view_index(value, idx));
  return own_offset_terms(value, idx);
}

std::vector<std::string> KernelWriter::own_offset_terms(int64_t value, const std::vector<std::string>& idx) {
  std::vector<std::string> terms;
  for (size_t d = 0; d < idx.size(); ++d)
    if (size_class(value, d) == SizeClass::Many && idx[d] != "0") terms.push_back(idx[d] + " * " + stride(value, d));
  return terms;
}

std::string KernelWriter::offset(int64_t value, const std::vector<std::string>& idx) {
  const std::vector<std::string> terms = offset_terms(value, idx);
  return terms.empty() ? "0" : join(terms, " + ");
}

std::string KernelWriter::address(int64_t value, const std::vector<std::string>& idx) {
  const std::string p = pointer(value);
  const std::vector<std::string> terms = offset_terms(value, idx);
  if (terms.size() <= 2) return p + " + " + (terms.empty() ? "0" : join(terms, " + "));
  return p + " + " + terms[0] + " + (" + join(std::vector<std::string>(terms.begin() + 1, terms.end()), " + ") + ")";
}

std::string KernelWriter::element(int64_t value, const std::vector<std::string>& idx) {
  const std::string p = pointer(value);
  return p + "[" + offset(value, idx) + "]";
}

void KernelWriter::store(int64_t value, const std::vector<std::string>& idx, const std::string& reg) {
  const DType t = f_.value(value).dtype;
  const std::string at = element(value, idx);
  line(at + " = " + stored(t, reg) + ";");
}

std::string KernelWriter::value_at(int64_t value, const std::vector<std::string>& idx) {
  const Value& v = f_.value(value);
  if (v.kind == ValueKind::Constant)
    return is_float(v.dtype) ? literal_f64(v.dtype, v.f64) : literal_i64(v.dtype, v.i64);
  if (auto view = views.find(value); view != views.end() && idx.size() == rank(view->second))
    return value_at(view->second, idx);  // a view output, read at its source's index
  if (idx.size() != rank(value))
    fail(KF_ERR_INTERNAL, "codegen: value ", value, " read with ", idx.size(), " indices, rank ", rank(value));
  const std::string key = std::to_string(value) + "@" + join(idx, ",");
  if (auto hit = memo(key)) return *hit;
  std::string reg;
  if (auto tr = tile_reads.find(value); tr != tile_reads.end() && tr->second.first == idx) {
    reg = define(v.dtype, tr->second.second);  // staged in shared memory
  } else if (is_input_[static_cast<size_t>(value)]) {
    if (v.kind == ValueKind::ScalarInput) return scalar_input(value);
    reg = load_input(value, idx);
  } else if (produced_[static_cast<size_t>(value)]) {
    reg = compute(value, idx);
  } else {
    fail(KF_ERR_INTERNAL, "codegen: value ", value, " is neither produced by nor an input of the task");
  }
  remember(key, reg);
  return reg;
}

std::string KernelWriter::scalar_input(int64_t value) {
  const DType t = f_.value(value).dtype;
  const std::string a = "args.a[" + std::to_string(slot(ArgSlot::Kind::Scalar, value, 0)) + "]";
  if (is_float(t)) return hoist(reg_type(t), "s", convert(DType::F64, t, "__longlong_as_double(" + a + ")"));
  return hoist(reg_type(t), "s", convert(DType::I64, t, a));
}

std::string KernelWriter::load_input(int64_t value, const std::vector<std::string>& idx) {
  const DType t = f_.value(value).dtype;
  if (auto vi = vector_inputs.find(value); lane >= 0 && vi != vector_inputs.end()) {
    bool reshaped = false;
    std::optional<std::vector<std::string>> base = vector_base(vi->second, idx, &reshaped);
    if (base) {
      std::vector<int> dims = vi->second;
      if (reshaped)
        for (int& d : dims) d = d == static_cast<int>(lane_dim) ? d : kZeroIndex;
      auto it = vector_regs.find({value, group});
      if (it == vector_regs.end())
        it = vector_regs
                 .emplace(std::make_pair(value, group), VectorReg{fresh("xv"), *base, section,
                                                                  lane_ok_group_ >= 0 ? lane_ok_group_ : group,
                                                                  lane_guard_, dims})
                 .first;
      if (it->second.base == *base)  // (one vector per input and group)
        return define(t, word_lanes ? vector_lane_form(t, it->second.reg, lane)
                                    : load_form(t, it->second.reg + ".v[" + std::to_string(lane) + "]"));
    }
  }
  const std::string load = load_form(t, element(value, idx));
  if (lane >= 0 && !lane_limit.empty() && lane_dim < lane_index.size() && lane_dim < lane_base.size()) {
    // (an index that names the lanes' base varies with the lane)
    bool varies = false;
    for (const std::string& i : idx) varies = varies || i.find(lane_base[lane_dim]) != std::string::npos;
    if (varies)
      return define(t, "(" + lane_index[lane_dim] + " < " + lane_limit + " ? " + load + " : (" + reg_type(t) + ")0)");
  }
  return define(t, load);
}

// Where the current lane's element of an input (read at idx; dims: its
// dims' domain dims, kZeroIndex for none) sits in a vector: the vector's
// first element's index, or nothing when the lane's element is not at
// position `lane` of one. Either every index is the domain's lane index
// (or 0 where the input's dim maps to none), or, for an input read through
// a reshape that keeps the vector dim (group norm's [B, C, HW] read as
// [B, G, C/G, HW]), the vector dim's index is the lane index and every
// other index is an expression of the group's base indices and hoisted
// values only, so it is the same for every lane and defined before the
// group's loads.
std::optional<std::vector<std::string>> KernelWriter::vector_base(const std::vector<int>& dims,
                                                                  const std::vector<std::string>& idx,
                                                                  bool* reshaped) const {
  if (idx.size() != dims.size() || dims.empty()) return std::nullopt;
  std::vector<std::string> base(idx.size());
  bool exact = true;
  for (size_t j = 0; exact && j < idx.size(); ++j) {
    const int d = read_dim(dims[j]);
    exact = idx[j] == (d < 0 ? "0" : lane_index[static_cast<size_t>(d)]);
    base[j] = d < 0 ? "0" : lane_base[static_cast<size_t>(d)];
    // A dim the plan reads at a shift, only inside its bound (whose guard
    // the load then takes).
    if (is_shifted(dims[j]))
      exact = exact && static_cast<size_t>(d) < lane_shifted_.size() && lane_shifted_[static_cast<size_t>(d)];
  }
  if (exact) return base;
  if (std::any_of(dims.begin(), dims.end(), is_shifted)) return std::nullopt;
  if (exact_lanes) return std::nullopt;
  const auto pv = std::find(dims.begin(), dims.end(), static_cast<int>(lane_dim));
  if (pv == dims.end() || lane_dim >= lane_index.size()) return std::nullopt;
  const size_t v = static_cast<size_t>(pv - dims.begin());
  if (unwrapped(idx[v]) != unwrapped(lane_index[lane_dim])) return std::nullopt;
  std::set<std::string> known;  // names defined before the group's loads
  for (const std::string& b : lane_base) identifiers_of(b, &known);
  for (const auto& [key, name] : hoisted_) known.insert(name);
  for (size_t j = 0; j < idx.size(); ++j) {
    if (j == v) {
      base[j] = lane_base[lane_dim];
      continue;
    }
    std::set<std::string> used;
    identifiers_of(idx[j], &used);
    for (const std::string& u : used)
      if (!known.contains(u) && u != "long" && u != "int") return std::nullopt;
    base[j] = idx[j];
  }
  *reshaped = true;
  return base;
}

bool KernelWriter::lane_indexed(const std::string& i) const {
  return lane >= 0 && lane_width > 0 && lane_dim < lane_index.size() && i == lane_index[lane_dim];
}

std::optional<size_t> KernelWriter::lanes_dim_of(const std::string& i) const {
  if (lane_indexed(i)) return lane_dim;
  if (!shifted_reads || lane < 0 || lane_width == 0 || i == "0" || lane_index.size() != lane_base.size())
    return std::nullopt;
  for (size_t d = 0; d < lane_index.size(); ++d)
    if (d != lane_dim && lane_index[d] == i && lane_base[d] == i) return d;
  return std::nullopt;
}

std::string KernelWriter::shifted_lanes(size_t dim, const std::string& index, const std::string& base,
                                        const std::string& guard, const std::vector<std::string>& conditions,
                                        const std::vector<ArgCheck>& checks,
                                        const std::function<std::string()>& fn) {
  const std::vector<std::string> saved_index = lane_index, saved_base = lane_base;
  const std::vector<bool> saved_shifted = lane_shifted_;
  const std::string saved_guard = lane_guard_;
  const int saved_group = group, saved_ok = lane_ok_group_;
  lane_index[dim] = index;
  lane_base[dim] = base;
  lane_shifted_.resize(lane_index.size());
  lane_shifted_[dim] = true;
  if (!guard.empty()) lane_guard_ = lane_guard_.empty() ? guard : lane_guard_ + " && " + guard;
  if (lane_ok_group_ < 0) lane_ok_group_ = group;
  const std::string key = std::to_string(group) + "|" + base + "|" + lane_guard_;
  group = shifted_groups_.emplace(key, kShiftedGroups + static_cast<int>(shifted_groups_.size())).first->second;
  const size_t regs = vector_regs.size();
  const std::string r = fn();
  // The conditions only where a vector was loaded under the shift: lanes
  // read one by one need not take one branch together.
  if (vector_regs.size() > regs) {
    for (const std::string& c : conditions)
      if (std::find(lane_conditions.begin(), lane_conditions.end(), c) == lane_conditions.end()) lane_conditions.push_back(c);
    for (const ArgCheck& c : checks)
      if (std::find(lane_checks.begin(), lane_checks.end(), c) == lane_checks.end()) lane_checks.push_back(c);
  }
  lane_index = saved_index;
  lane_base = saved_base;
  lane_shifted_ = saved_shifted;
  lane_guard_ = saved_guard;
  group = saved_group;
  lane_ok_group_ = saved_ok;
  return r;
}

std::string KernelWriter::reduction_result(int64_t value, const std::vector<std::string>& idx) {
  if (!row_results.contains(value) && result_arrays.contains(value)) return stored_result(value, idx);
  // The result is only in registers for the current row: the index must be
  // the row's own (dims of size 1 read index 0 whatever the row).
  const size_t r = reduced.size();
  std::vector<std::string> expected;
  if (idx.size() == r) {
    for (size_t d = 0; d < r; ++d) expected.push_back(reduced[d] ? "0" : row_index[d]);
  } else {
    for (size_t d = 0; d < r; ++d)
      if (!reduced[d]) expected.push_back(row_index[d]);
  }
  if (expected.size() != idx.size()) unsupported("reduction result of value " + std::to_string(value) + " has an unexpected rank");
  for (size_t d = 0; d < idx.size(); ++d)
    if (size_class(value, d) == SizeClass::Many && idx[d] != expected[d])
      unsupported("the reduction result value " + std::to_string(value) +
                  " is read at an index other than its own row (" + join(idx, ", ") + ")");
  auto it = row_results.find(value);
  if (it == row_results.end())
    unsupported("the reduction result value " + std::to_string(value) + " is read before it is computed");
  return it->second;
}

void KernelWriter::begin_result_loads() {
  result_section_ = reserve();
  result_lines_.clear();
  result_regs_.clear();
}

void KernelWriter::end_result_loads() {
  if (result_section_) fill(*result_section_, result_lines_);
  result_section_.reset();
  result_lines_.clear();
  result_regs_.clear();
}

std::string KernelWriter::stored_result(int64_t value, const std::vector<std::string>& idx) {
  // The index of the result's own element among the domain's kept dims
  // (a keepdim result reads its reduced dims at 0).
  const size_t r = reduced.size();
  std::vector<std::string> kept_idx;
  for (size_t d = 0, k = 0; d < r; ++d) {
    if (reduced[d]) continue;
    kept_idx.push_back(idx.size() == r ? idx[d] : k < idx.size() ? idx[k] : "0");
    ++k;
  }
  std::vector<size_t> kept_dims;  // domain dim of each kept_idx entry
  for (size_t d = 0; d < r; ++d)
    if (!reduced[d]) kept_dims.push_back(d);
  std::vector<size_t> order = result_order;
  if (order.size() != kept_dims.size()) order = kept_dims;
  std::string col;
  for (size_t d : order) {
    const size_t k = static_cast<size_t>(std::find(kept_dims.begin(), kept_dims.end(), d) - kept_dims.begin());
    const std::string e = extent(result_domain, d), i = kept_idx.at(k);
    if (e == "1") continue;
    col = col.empty() ? i : "(" + col + ") * " + e + " + " + i;
  }
  if (col.empty()) col = "0";
  const std::string load = result_arrays.at(value) + "[" + col + "]";
  const std::string t = reg_type(f_.value(value).dtype);
  if (!result_section_) return define(f_.value(value).dtype, load);
  const std::string key = std::to_string(value) + "@" + col;
  if (auto it = result_regs_.find(key); it != result_regs_.end()) return it->second;
  const std::string reg = fresh("sr");
  result_lines_.push_back("const " + t + " " + reg + " = " + load + ";");
  if (f_.value(value).dtype == DType::F32) {  // divisions by it multiply (unused: dropped by the compiler)
    reciprocals[reg] = reg + "_rcp";
    result_lines_.push_back("[[maybe_unused]] const float " + reg + "_rcp = kf_rcp_for_div(" + reg + ");");
  }
  result_regs_[key] = reg;
  return reg;
}

std::string KernelWriter::compute(int64_t value, const std::vector<std::string>& idx) {
  const Value& v = f_.value(value);
  const Expr& e = f_.exprs[static_cast<size_t>(v.producer)];
  switch (op_info(e.op).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: return pointwise(e, idx);
    case OpCategory::Reduction: return reduction_result(value, idx);
    case OpCategory::Shape: return shape(e, idx);
    case OpCategory::Indexing: return indexing(e, idx);
    case OpCategory::Creation: return creation(e, idx);
    case OpCategory::Hint: return value_at(e.inputs[0], plain_index(rule(e, 0), idx));
    case OpCategory::Query:  // size: the extent argument, as int64
      return hoist("long long", "sz", "(long long)" + extent(e.inputs[0], static_cast<size_t>(e.attrs[0])));
    case OpCategory::Library: unsupported("matmul runs as a library segment (cuBLASLt)");
    case OpCategory::Communication: unsupported("communication runs through the call's communicator");
    case OpCategory::Scatter: unsupported("a scatter's result is read from memory (its segment writes it)");
    case OpCategory::Scan: unsupported("a scan's result is read from memory (its segment writes it)");
  }
  fail(KF_ERR_INTERNAL, "codegen: op ", op_name(e.op), " has no category");
}

std::string KernelWriter::pointwise(const Expr& e, const std::vector<std::string>& idx) {
  const int64_t out = e.outputs[0];
  const DType out_t = f_.value(out).dtype;
  if (e.op == Op::CAST)
    if (const std::optional<int64_t> x = saturated_operand(e))  // (read as the clamp reads it: right-aligned)
      return define(out_t, saturated_round_form(out_t, value_at(*x, plain_index(right_aligned_index(
                                                                 idx.size(), c_.size_classes[static_cast<size_t>(*x)]), idx))));
  std::vector<std::string> operands;
  std::vector<DType> dtypes;
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    operands.push_back(value_at(e.inputs[k], plain_index(rule(e, k), idx)));
    dtypes.push_back(f_.value(e.inputs[k]).dtype);
  }
  if (e.op == Op::CAST) return define(out_t, convert(dtypes[0], out_t, operands[0]));
  const DType cd = compute_dtype(f_, e);
  for (size_t k = 0; k < operands.size(); ++k)
    operands[k] = convert(dtypes[k], (e.op == Op::WHERE && k == 0) ? DType::Bool : cd, operands[k]);
  DType rd;
  const size_t at = static_cast<size_t>(&e - f_.exprs.data());
  const bool fast = at < fast_.size() && fast_[at];  // approx_math.h
  std::string expr = fast && e.op != Op::DIV ? approximate_form(e.op, operands, &rd) : pointwise_form(e.op, cd, operands, &rd);
  if (auto rcp = reciprocals.find(operands.size() == 2 ? operands[1] : ""); e.op == Op::DIV && cd == DType::F32 &&
                                                                           rcp != reciprocals.end())
    expr = std::string(fast ? "kf_div_approx(" : "kf_div_by(") + operands[0] + ", " + operands[1] + ", " + rcp->second + ")";
  if (rd == out_t && (is_narrow_float(out_t) || is_byte_int(out_t)))
    expr = round_form(out_t, expr);
  else
    expr = convert(rd, out_t, expr);
  return define(out_t, expr);
}

// A cast to float8 of clamp(x, -max, max) in float32, x float32 with the
// clamp's shape and the bounds constants equal to the format's largest
// finite value: x, which the saturating conversion takes in one step.
std::optional<int64_t> KernelWriter::saturated_operand(const Expr& cast) const {
  const DType t = f_.value(cast.outputs[0]).dtype;
  const Value& c = f_.value(cast.inputs[0]);
  if (!is_fp8(t) || c.dtype != DType::F32 || c.producer < 0) return std::nullopt;
  const Expr& clamp = f_.exprs[static_cast<size_t>(c.producer)];
  if (clamp.op != Op::CLAMP) return std::nullopt;
  const Value& x = f_.value(clamp.inputs[0]);
  if (x.dtype != DType::F32 || x.is_scalar != c.is_scalar || x.rank != c.rank) return std::nullopt;
  const auto is_constant = [&](int64_t id, double v) {
    const Value& b = f_.value(id);
    return b.kind == ValueKind::Constant && b.dtype == DType::F32 && b.f64 == v;
  };
  const double m = fp8_max_finite(t);
  if (!is_constant(clamp.inputs[1], -m) || !is_constant(clamp.inputs[2], m)) return std::nullopt;
  return clamp.inputs[0];
}

std::string KernelWriter::shape(const Expr& e, const std::vector<std::string>& idx) {
  const int64_t out = e.outputs[0];
  const DType out_t = f_.value(out).dtype;
  const int64_t in = e.inputs[0];
  const size_t r = idx.size();
  // Where each op reads its input: its index rule (core/ir/index_rules.h);
  // the computed terms' arithmetic below.
  switch (e.op) {
    case Op::BROADCAST_IN_DIM:
    case Op::EXPAND:
    case Op::PERMUTE:
    case Op::SQUEEZE:
    case Op::UNSQUEEZE: return value_at(in, plain_index(rule(e, 0), idx));
    case Op::SLICE: {
      const OperandIndex terms = rule(e, 0);
      std::vector<std::string> sub = plain_index(terms, idx);
      for (size_t dim = 0; dim < terms.size(); ++dim) {
        const IndexTerm& sl = terms[dim];  // start a, step b
        if (sl.kind != IndexTerm::Kind::Slice) continue;
        const std::string i = idx[static_cast<size_t>(sl.dim)];
        const std::string start =
            hoist(idx_t_, "sl", "(" + idx_t_ + ")kf_slice_start(" + extent(in, dim) + ", " +
                                    std::to_string(sl.a) + "LL)");
        const std::string step = sl.b == 1 ? "" : " * " + std::to_string(sl.b);
        sub[dim] = "(" + start + " + " + i + step + ")";
        // The lanes, shifted by the start, where it can keep a vector whole
        // (a start from the end is checked at run time); a start that
        // splits vectors reads per lane, not failing the loop's check.
        if (sl.b == 1 && lane_indexed(i) && (sl.a < 0 || sl.a % lane_width == 0))
          return shifted_lanes(lane_dim, sub[dim], "(" + start + " + " + lane_base[lane_dim] + ")", "",
                               {start + " % " + std::to_string(lane_width) + " == 0"},
                               {ArgCheck{ArgCheck::Kind::SliceMultiple, {word(ArgSlot::Kind::Extent, in, static_cast<int>(dim))},
                                         sl.a, lane_width}},
                               [&] { return value_at(in, sub); });
      }
      return value_at(in, sub);
    }
    case Op::RESHAPE:
      // Group by group (reshape_groups.h): a dim kept whole passes its
      // index through; a split dim reads the linear index of its output
      // dims; a merged dim unravels its output index over the input's.
      return value_at(in, regroup(rule(e, 0), out, idx, in));
    case Op::PAD: {
      std::vector<std::string> conds;
      // The padded dims, where the lanes' loads can follow them: each a
      // domain dim's lanes index shifted by the low pad, inside the input
      // (lanes along the vector dim: a low pad a multiple of the width and
      // an input extent checked to be one, so no vector straddles an edge).
      struct Shift {
        size_t dim;
        std::string index, base, guard;
        std::vector<std::string> conds;
        std::vector<ArgCheck> checks;
      };
      std::vector<Shift> shifts;
      bool shiftable = shifted_reads;
      const OperandIndex terms = rule(e, 0);
      std::vector<std::string> sub = plain_index(terms, idx);
      for (size_t d = 0; d < r; ++d) {
        if (terms[d].kind != IndexTerm::Kind::Pad) continue;
        const int64_t lo = terms[d].a;
        const std::string& i = idx[static_cast<size_t>(terms[d].dim)];
        const std::string t = lo == 0 ? i : "(" + i + " - " + std::to_string(lo) + ")";
        sub[d] = t;
        conds.push_back(t + " >= 0 && " + t + " < " + extent(in, d));
        const std::optional<size_t> dd = shiftable && size_class(in, d) == SizeClass::Many ? lanes_dim_of(i) : std::nullopt;
        if (!dd || (*dd == lane_dim && lo % lane_width != 0)) {
          shiftable = false;
          continue;
        }
        const std::string b = lane_base[*dd];
        const std::string tb = lo == 0 ? b : "(" + b + " - " + std::to_string(lo) + ")";
        Shift sh{*dd, t, tb, (lo == 0 ? "" : tb + " >= 0 && ") + tb + " < " + extent(in, d), {}, {}};
        if (*dd == lane_dim) {
          sh.conds.push_back(extent(in, d) + " % " + std::to_string(lane_width) + " == 0");
          sh.checks.push_back(extent_multiple(in, d, lane_width));
        }
        shifts.push_back(std::move(sh));
      }
      const std::string pad = convert(f_.value(e.inputs[1]).dtype, out_t, value_at(e.inputs[1], {}));
      if (conds.empty()) return value_at(in, sub);
      const std::string name = fresh("v");
      line(std::string(reg_type(out_t)) + " " + name + ";");
      open("if (" + join(conds, " && ") + ")");
      std::function<std::string(size_t)> read = [&](size_t k) -> std::string {
        if (!shiftable || k == shifts.size()) return value_at(in, sub);
        const Shift& sh = shifts[k];
        return shifted_lanes(sh.dim, sh.index, sh.base, sh.guard, sh.conds, sh.checks, [&] { return read(k + 1); });
      };
      line(name + " = " + convert(f_.value(in).dtype, out_t, read(0)) + ";");
      close_open("else");
      line(name + " = " + pad + ";");
      close();
      return name;
    }
    case Op::CAT: {
      const size_t dim = DimAttr(e).index();
      const std::string name = fresh("v");
      line(std::string(reg_type(out_t)) + " " + name + ";");
      // Lanes along the cat dim take one branch together when every bound
      // is a multiple of the width: their loads are then guarded by it.
      // Along another dim (shifted reads) they always do.
      const std::optional<size_t> dd = lanes_dim_of(idx[dim]);
      const bool lanes = dd.has_value();
      const bool along = lanes && *dd == lane_dim;  // the cat's dim is the lanes'
      const std::string lane0 = lanes ? lane_base[*dd] : "";
      std::string begin = "0";
      ArgCheck end_check{ArgCheck::Kind::Multiple, {}, 0, lane_width};  // `end` % lane_width == 0, for the host
      for (size_t k = 0; k < e.inputs.size(); ++k) {
        const int64_t a = e.inputs[k];
        const bool last = k + 1 == e.inputs.size();
        const std::string ext = last ? std::string() : extent(a, dim);  // (the last one's is not read)
        const ArgCheck begin_check = end_check;  // (the parts before this one)
        add_extent(&end_check, a, dim);
        const std::string end = last ? "" : begin == "0" ? ext : hoist(idx_t_, "cat", begin + " + " + ext);
        const std::string cond = idx[dim] + " < " + end;
        if (k == 0) open("if (" + cond + ")");
        else if (last) close_open("else");
        else close_open("else if (" + cond + ")");
        const OperandIndex terms = rule(e, k);
        std::vector<std::string> s = plain_index(terms, idx);
        const bool part = terms[dim].kind == IndexTerm::Kind::CatPart;  // (a dim of size class Many)
        if (part) s[dim] = idx[dim];
        if (part && begin != "0") {
          s[dim] = fresh("t");
          // (lanes reading a vector register leave it unused)
          line(std::string(lanes ? "[[maybe_unused]] " : "") + "const " + idx_t_ + " " + s[dim] + " = " + idx[dim] +
               " - " + begin + ";");
        }
        std::string v;
        if (lanes && part) {
          std::vector<std::string> guard, conds;
          std::vector<ArgCheck> checks;
          // Both bounds of the part, when along the lanes: a vector loaded
          // under this part's shift alone (an earlier part read per lane)
          // must not straddle its start either.
          if (begin != "0") {
            guard.push_back(lane0 + " >= " + begin);
            if (along) {
              conds.push_back(begin + " % " + std::to_string(lane_width) + " == 0");
              checks.push_back(begin_check);
            }
          }
          if (!last) {
            guard.push_back(lane0 + " < " + end);
            if (along) {
              conds.push_back(end + " % " + std::to_string(lane_width) + " == 0");
              checks.push_back(end_check);
            }
          }
          const std::string base = begin == "0" ? lane0 : "(" + lane0 + " - " + begin + ")";
          v = shifted_lanes(*dd, s[dim], base, join(guard, " && "), conds, checks, [&] { return value_at(a, s); });
        } else {
          v = value_at(a, s);
        }
        line(name + " = " + convert(f_.value(a).dtype, out_t, v) + ";");
        begin = end;
      }
      close();
      return name;
    }
    default: break;
  }
  fail(KF_ERR_INTERNAL, "codegen: shape op ", op_name(e.op), " has no index rule");
}

std::string KernelWriter::indexing(const Expr& e, const std::vector<std::string>& idx) {
  const int64_t out = e.outputs[0], in = e.inputs[0], index = e.inputs[1];
  const DType out_t = f_.value(out).dtype;
  const size_t dim = DimAttr(e).index();
  const std::string j = value_at(index, plain_index(rule(e, 1), idx));
  const std::string name = fresh("v");
  line(std::string(reg_type(out_t)) + " " + name + ";");
  // Out-of-range indices read nothing: the element becomes NaN (floats) or 0.
  open("if (" + j + " >= 0 && " + j + " < " + extent(in, dim) + ")");
  const OperandIndex terms = rule(e, 0);
  std::vector<std::string> sub = plain_index(terms, idx);
  if (terms[dim].kind == IndexTerm::Kind::Gathered) {
    sub[dim] = fresh("t");
    line("const " + idx_t_ + " " + sub[dim] + " = (" + idx_t_ + ")" + j + ";");
  }
  line(name + " = " + value_at(in, sub) + ";");
  close_open("else");
  line(name + " = " + (is_float(out_t) ? literal_f64(out_t, __builtin_nan("")) : literal_i64(out_t, 0)) + ";");
  close();
  return name;
}

std::string KernelWriter::linear_index(int64_t value, const std::vector<std::string>& idx) {
  std::string lin;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (size_class(value, d) != SizeClass::Many) continue;
    const std::string i = "(unsigned long long)" + idx[d];
    lin = lin.empty() ? i : "(" + lin + ") * (unsigned long long)" + extent(value, d) + " + " + i;
  }
  return lin.empty() ? "0ull" : lin;
}

std::string KernelWriter::creation(const Expr& e, const std::vector<std::string>& idx) {
  const int64_t out = e.outputs[0];
  const DType out_t = f_.value(out).dtype;
  auto scalar = [&](size_t k, DType as) {
    const int64_t id = e.inputs[k];
    return convert(f_.value(id).dtype, as, value_at(id, {}));
  };
  const size_t n = e.inputs.size();
  switch (e.op) {
    case Op::FULL: return scalar(n - 1, out_t);
    case Op::IOTA: {
      const std::string i = size_class(out, 0) == SizeClass::One ? "0" : idx[0];
      const bool exact = is_integer(out_t) && !is_float(f_.value(e.inputs[1]).dtype) &&
                         !is_float(f_.value(e.inputs[2]).dtype);
      if (exact)
        return define(out_t, convert(DType::I64, out_t, "kf_add(" + scalar(1, DType::I64) + ", kf_mul((long long)" + i + ", " + scalar(2, DType::I64) + "))"));
      return define(out_t, convert(DType::F64, out_t, "__dadd_rn(" + scalar(1, DType::F64) + ", __dmul_rn((double)" + i + ", " + scalar(2, DType::F64) + "))"));
    }
    case Op::UNIFORM:
    case Op::NORMAL: {
      const std::string w = fresh("w");
      line("const kf_u4 " + w + " = kf_philox((unsigned long long)" + scalar(n - 2, DType::I64) +
           ", (unsigned long long)" + scalar(n - 1, DType::I64) + ", " + linear_index(out, idx) + ");");
      const std::string fn = e.op == Op::UNIFORM ? "kf_uniform" : "kf_normal";
      if (out_t == DType::F64)
        return define(out_t, fn + "_f64(" + w + ", " + scalar(n - 4, DType::F64) + ", " + scalar(n - 3, DType::F64) + ")");
      return define(out_t, convert(DType::F32, out_t, fn + "_f32(" + w + ", (float)" + scalar(n - 4, DType::F64) + ", (float)" + scalar(n - 3, DType::F64) + ")"));
    }
    default: break;
  }
  fail(KF_ERR_INTERNAL, "codegen: creation op ", op_name(e.op), " has no rule");
}

}  // namespace kf
