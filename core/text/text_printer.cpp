#include "core/text/text_printer.h"

#include "core/ir/op_attrs.h"

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>

namespace kf {

namespace {

using K = TextAttrKind;
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

constexpr TextAttr kDTypeAttrs[] = {{"dtype", K::DType, 0, true, 0}};
// Reductions store [keepdim, correction?, axis...]; the text lists axes first.
constexpr TextAttr kReduceAttrs[] = {{"axes", K::IntList, 0, false, 0},
                                     {"keepdim", K::Bool, 0, false, 0}};
constexpr TextAttr kVarAttrs[] = {{"axes", K::IntList, 0, false, 0},
                                  {"keepdim", K::Bool, 0, false, 0},
                                  {"correction", K::Int, 1, false, 1}};
constexpr TextAttr kDimsAttrs[] = {{"dims", K::IntList, 0, true, 0}};
constexpr TextAttr kPermAttrs[] = {{"perm", K::IntList, 0, true, 0}};
constexpr TextAttr kDimAttrs[] = {{"dim", K::Int, 0, true, 0}};
constexpr TextAttr kSliceAttrs[] = {{"dim", K::Int, 0, true, 0},
                                    {"start", K::Int, 1, false, 0},
                                    {"stop", K::Stop, 2, false, kEnd},
                                    {"step", K::Int, 3, false, 1}};
constexpr TextAttr kPadsAttrs[] = {{"pads", K::IntList, 0, true, 0}};
// Communication ops (inserted by the shard stage; printed by explain).
constexpr TextAttr kAllreduceAttrs[] = {{"reduce", K::Int, 0, true, 0}, {"ranks", K::Int, 1, true, 0}};
constexpr TextAttr kDimRanksAttrs[] = {{"dim", K::Int, 0, true, 0}, {"ranks", K::Int, 1, true, 0}};
constexpr TextAttr kReduceScatterAttrs[] = {
    {"dim", K::Int, 0, true, 0}, {"reduce", K::Int, 1, true, 0}, {"ranks", K::Int, 2, true, 0}};

constexpr TextAttr kScatterAttrs[] = {{"dim", K::Int, 0, true, 0},
                                      {"reduce", K::ScatterReduce, 1, false, 0},
                                      {"include_self", K::Bool, 2, false, 1},
                                      {"deterministic", K::Bool, 3, false, 0}};

constexpr TextAttr kScanAttrs[] = {{"dim", K::Int, 0, true, 0}, {"exclusive", K::Bool, 1, false, 0}};

TextSignature signature(int list_position, size_t min_names, size_t max_names,
                        std::span<const TextAttr> attrs) {
  TextSignature s{list_position, min_names, max_names, attrs, 0};
  for (const TextAttr& a : attrs)
    if (a.kind != K::IntList) ++s.fixed_slots;
  return s;
}

TextSignature names(size_t n, std::span<const TextAttr> attrs = {}) {
  return signature(-1, n, n, attrs);
}

TextSignature with_list(int list_position, size_t n, std::span<const TextAttr> attrs = {}) {
  return signature(list_position, n, n, attrs);
}

TextSignature make_signature(Op op) {
  switch (op) {
    case Op::CAST: return names(1, kDTypeAttrs);
    case Op::VAR:
    case Op::VAR_MEAN: return names(1, kVarAttrs);
    case Op::BROADCAST_IN_DIM: return with_list(1, 1, kDimsAttrs);
    case Op::EXPAND:
    case Op::RESHAPE: return with_list(1, 1);
    case Op::PERMUTE: return names(1, kPermAttrs);
    case Op::SQUEEZE: return names(1, kDimsAttrs);
    case Op::UNSQUEEZE: return names(1, kDimAttrs);
    case Op::SLICE: return names(1, kSliceAttrs);
    case Op::PAD: return names(2, kPadsAttrs);
    case Op::CAT: return signature(-1, 1, std::numeric_limits<size_t>::max(), kDimAttrs);
    case Op::INDEX_SELECT:
    case Op::GATHER: return names(2, kDimAttrs);
    case Op::SIZE: return names(1, kDimAttrs);
    case Op::SCATTER:
    case Op::INDEX_REDUCE: return names(3, kScatterAttrs);
    case Op::CUMSUM:
    case Op::CUMPROD:
    case Op::CUMMAX: return names(1, kScanAttrs);
    case Op::ALLREDUCE: return names(1, kAllreduceAttrs);
    case Op::ALLGATHER:
    case Op::SHARD_SLICE: return names(1, kDimRanksAttrs);
    case Op::REDUCE_SCATTER: return names(1, kReduceScatterAttrs);
    case Op::FULL: return with_list(0, 1, kDTypeAttrs);
    case Op::IOTA: return names(3, kDTypeAttrs);
    case Op::UNIFORM:
    case Op::NORMAL: return with_list(0, 4, kDTypeAttrs);
    case Op::LINEAR: return signature(-1, 2, 3, {});
    default:
      if (op_info(op).category == OpCategory::Reduction) return names(1, kReduceAttrs);
      // Every other op has a fixed arity in the op table.
      return names(static_cast<size_t>(op_info(op).num_inputs));
  }
}

void append_int(std::string& out, int64_t v) { out += std::to_string(v); }

// Locale-independent %.17g; NaNs keep their sign and payload so that the
// constant's record (its bit pattern) survives a round trip.
void append_float(std::string& out, double d) {
  const uint64_t bits = std::bit_cast<uint64_t>(d);
  if (std::signbit(d) && !std::isfinite(d)) out += '-';
  if (std::isinf(d)) {
    out += "inf";
  } else if (std::isnan(d)) {
    constexpr uint64_t kFraction = (uint64_t{1} << 52) - 1;
    constexpr uint64_t kQuietBit = uint64_t{1} << 51;
    out += "nan";
    if ((bits & kFraction) != kQuietBit) {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, bits & kFraction, 16);
      out += "(0x";
      out.append(buf, r.ptr);
      out += ')';
    }
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::general, 17);
    out.append(buf, r.ptr);
  }
}

void append_list(std::string& out, std::span<const int64_t> items) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_int(out, items[i]);
  }
  out += ']';
}

class Printer {
 public:
  explicit Printer(const Fusion& f) : f_(f) {}

  // Ops print from their records, not from Fusion::exprs: the simplify
  // stage (core/simplify) rewrites the exprs, while the text is the
  // definition as written (parsing it gives back the same fusion).
  std::string run() {
    for (const Record& r : f_.records) {
      switch (r.kind) {
        case RecordKind::TensorInput:
        case RecordKind::ScalarInput: input(r); break;
        case RecordKind::Constant: constant(r); break;
        case RecordKind::Op: op(r); break;
        case RecordKind::Output: output(r); break;
        case RecordKind::Mesh:
          out_ += "mesh ";
          append_int(out_, r.attrs.at(0));
          break;
        case RecordKind::Shard:
          out_ += r.attrs.at(0) == kReplicated ? "replicate " : "shard ";
          name(r.args.at(0));
          if (r.attrs.at(0) != kReplicated) {
            out_ += " {dim=";
            append_int(out_, r.attrs.at(0));
            out_ += '}';
          }
          break;
      }
      out_ += '\n';
    }
    return std::move(out_);
  }

 private:
  // Values are defined in record order, so the next value id is a counter.
  const Value& next_value() { return f_.value(next_id_++); }

  void name(int64_t id) {
    const Value& v = f_.value(id);
    switch (v.kind) {
      case ValueKind::TensorInput: out_ += 't'; break;
      case ValueKind::ScalarInput: out_ += 's'; break;
      case ValueKind::Constant: out_ += 'c'; break;
      case ValueKind::Computed: out_ += 'v'; break;
    }
    append_int(out_, id);
  }

  void names(std::span<const int64_t> ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out_ += ", ";
      name(ids[i]);
    }
  }

  void input(const Record& r) {
    const Value& v = next_value();
    out_ += "input ";
    name(v.id);
    out_ += r.kind == RecordKind::TensorInput ? ": tensor<" : ": scalar<";
    out_ += dtype_name(v.dtype);
    if (r.kind == RecordKind::TensorInput) {
      out_ += ", ";
      append_int(out_, v.rank);
    }
    out_ += '>';
  }

  void constant(const Record& r) {
    const Value& v = next_value();
    out_ += "const ";
    name(v.id);
    out_ += ": ";
    out_ += dtype_name(v.dtype);
    out_ += " = ";
    const int64_t stored = r.attrs.at(0);
    if (is_float(v.dtype)) append_float(out_, std::bit_cast<double>(stored));
    else if (is_bool(v.dtype)) out_ += stored ? "true" : "false";
    else append_int(out_, stored);
  }

  // An op record holds the builder call: op, argument ids, normalized
  // attributes; its results are the next value ids.
  void op(const Record& r) {
    const int outputs = op_info(r.op).num_outputs;
    for (int i = 0; i < outputs; ++i) {
      if (i) out_ += ", ";
      name(next_id_++);
    }
    out_ += " = ";
    out_ += op_name(r.op);
    out_ += '(';
    arguments(text_signature(r.op), r.args);
    out_ += ')';
    attributes(text_signature(r.op), r.attrs);
  }

  void arguments(const TextSignature& sig, std::span<const int64_t> args) {
    if (sig.list_position < 0) {
      names(args);
      return;
    }
    // The shape list holds whatever the fixed names leave.
    const size_t before = static_cast<size_t>(sig.list_position);
    const size_t list_size = args.size() - sig.min_names;
    names(args.subspan(0, before));
    if (before) out_ += ", ";
    out_ += '[';
    names(args.subspan(before, list_size));
    out_ += ']';
    if (before + list_size < args.size()) {
      out_ += ", ";
      names(args.subspan(before + list_size));
    }
  }

  void attributes(const TextSignature& sig, std::span<const int64_t> attrs) {
    if (sig.attrs.empty()) return;
    out_ += " {";
    for (size_t i = 0; i < sig.attrs.size(); ++i) {
      const TextAttr& a = sig.attrs[i];
      if (i) out_ += ", ";
      out_ += a.name;
      out_ += '=';
      const int64_t v = a.kind == K::IntList ? 0 : attrs[static_cast<size_t>(a.slot)];
      switch (a.kind) {
        case K::Int: append_int(out_, v); break;
        case K::Bool: out_ += v ? "true" : "false"; break;
        case K::DType: out_ += dtype_name(static_cast<DType>(v)); break;
        case K::ScatterReduce: out_ += scatter_reduce_name(static_cast<ScatterReduce>(v)); break;
        case K::Stop:
          if (v == kEnd) out_ += "end";
          else append_int(out_, v);
          break;
        case K::IntList: append_list(out_, attrs.subspan(sig.fixed_slots)); break;
      }
    }
    out_ += '}';
  }

  // Output records hold [alias_input, stride_order...].
  void output(const Record& r) {
    out_ += "output ";
    name(r.args.at(0));
    const int64_t alias = r.attrs.at(0);
    const bool pinned = r.attrs.size() > 1;
    if (!pinned && alias == -1) return;
    out_ += " {";
    if (pinned) {
      out_ += "stride_order=";
      append_list(out_, std::span<const int64_t>(r.attrs).subspan(1));
    }
    if (alias != -1) {
      if (pinned) out_ += ", ";
      out_ += "alias=";
      append_int(out_, alias);
    }
    out_ += '}';
  }

  const Fusion& f_;
  std::string out_;
  int64_t next_id_ = 0;
};

}  // namespace

const TextSignature& text_signature(Op op) {
  static const auto table = [] {
    std::array<TextSignature, static_cast<size_t>(Op::COUNT)> t;
    for (size_t i = 0; i < t.size(); ++i) t[i] = make_signature(static_cast<Op>(i));
    return t;
  }();
  return table[static_cast<size_t>(op)];
}

std::string print_fusion(const Fusion& fusion) { return Printer(fusion).run(); }

}  // namespace kf
