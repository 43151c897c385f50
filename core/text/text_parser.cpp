#include "core/text/text_parser.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/define/builder.h"
#include "core/ir/op_attrs.h"
#include "core/text/text_printer.h"
#include "core/util/error.h"

namespace kf {

namespace {

// ---------------------------------------------------------------------------
// Lexer: one token at a time, never reading past the end of the text.

enum class Tok : uint8_t { Ident, Number, Punct, Newline, End, Invalid };

struct Token {
  Tok kind = Tok::End;
  std::string_view text;
  size_t line = 1;
  size_t column = 1;

  bool is(char c) const { return kind == Tok::Punct && text[0] == c; }
  bool is_word(std::string_view w) const { return kind == Tok::Ident && text == w; }
};

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Token next() {
    skip_blanks();
    Token t;
    t.line = line_;
    t.column = pos_ - line_start_ + 1;
    if (pos_ >= text_.size()) return t;
    const size_t start = pos_;
    const char c = text_[pos_++];
    if (c == '\n' || c == ';') {
      t.kind = Tok::Newline;
      if (c == '\n') {
        ++line_;
        line_start_ = pos_;
      }
    } else if (is_ident_start(c)) {
      while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
      t.kind = Tok::Ident;
    } else if (is_digit(c) || (c == '.' && pos_ < text_.size() && is_digit(text_[pos_]))) {
      scan_number();
      t.kind = Tok::Number;
    } else {
      t.kind = std::string_view("()[]{},=:<>-").find(c) != std::string_view::npos ? Tok::Punct
                                                                                 : Tok::Invalid;
    }
    t.text = text_.substr(start, pos_ - start);
    return t;
  }

 private:
  void skip_blanks() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // A number token runs over every identifier character and dot (and a sign
  // right after an exponent's 'e'), so a malformed literal such as "12ab" is
  // one token and is reported whole.
  void scan_number() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      const char prev = text_[pos_ - 1];
      const bool exponent_sign = (c == '+' || c == '-') && (prev == 'e' || prev == 'E');
      if (!is_ident_char(c) && c != '.' && !exponent_sign) break;
      ++pos_;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 1;
  size_t line_start_ = 0;
};

// How a token reads in "got ..." of a message.
std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of input";
    case Tok::Newline: return t.text == ";" ? "';'" : "end of line";
    case Tok::Invalid: {
      const auto byte = static_cast<unsigned char>(t.text[0]);
      if (byte >= 0x20 && byte < 0x7f) return "'" + std::string(t.text) + "'";
      const char* hex = "0123456789abcdef";
      return std::string("byte 0x") + hex[byte >> 4] + hex[byte & 15];
    }
    default: {
      constexpr size_t kShown = 40;  // long garbage tokens would drown the message
      if (t.text.size() <= kShown) return "'" + std::string(t.text) + "'";
      return "'" + std::string(t.text.substr(0, kShown)) + "...'";
    }
  }
}

std::string position(const Token& t) {
  return "line " + std::to_string(t.line) + ", column " + std::to_string(t.column) + ": ";
}

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// Output statements take attributes like ops do; their record layout is
// [alias_input, stride_order...].
constexpr TextAttr kOutputAttrs[] = {{"stride_order", TextAttrKind::IntList, 0, false, 0},
                                     {"alias", TextAttrKind::Int, 0, false, -1}};
const TextSignature kOutputSignature{-1, 1, 1, kOutputAttrs, 1};
// `shard x {dim=1}`: attrs [dim].
constexpr TextAttr kShardAttrs[] = {{"dim", TextAttrKind::Int, 0, true, 0}};
const TextSignature kShardSignature{-1, 1, 1, kShardAttrs, 1};

// An op has at most this many results (var_mean); bounds the result list.
constexpr size_t kMaxResults = 2;

// ---------------------------------------------------------------------------
// Parser: one loop over statements, each read left to right with one token of
// lookahead (two to tell a keyword from a value named like one). No recursion.

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), lexer_(text), tok_(lexer_.next()) {}

  std::shared_ptr<Fusion> run() {
    reject_nul();
    while (tok_.kind != Tok::End) statement();
    if (builder_.draft().outputs.empty()) error(tok_, "the text defines no outputs");
    return builder_.finalize();
  }

 private:
  struct Binding {
    int64_t id;
    size_t line;
  };

  // --- tokens and errors ---------------------------------------------------

  // A NUL is never text: it marks a binary or damaged file, and a C string
  // taken from such a buffer would end there silently. Checked before any
  // statement so that one in a comment is caught too.
  void reject_nul() {
    const size_t at = text_.find('\0');
    if (at == std::string_view::npos) return;
    const std::string_view before = text_.substr(0, at);
    const size_t newline = before.rfind('\n');
    Token t;
    t.line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
    t.column = newline == std::string_view::npos ? at + 1 : at - newline;
    error(t, "NUL byte (0x00) in the text, expected only text (is the file binary or damaged?)");
  }

  Token take() {
    Token t = tok_;
    if (ahead_) {
      tok_ = *ahead_;
      ahead_.reset();
    } else {
      tok_ = lexer_.next();
    }
    return t;
  }

  const Token& peek() {
    if (!ahead_) ahead_ = lexer_.next();
    return *ahead_;
  }

  template <typename... Args>
  [[noreturn]] void error(const Token& at, const Args&... args) {
    fail(KF_ERR_PARSE, position(at), args...);
  }

  template <typename... Args>
  [[noreturn]] void expected(const Args&... what) {
    error(tok_, "expected ", what..., ", got ", describe(tok_));
  }

  // `a, b, c` up to (not including) `close`; no trailing comma.
  template <typename F>
  void comma_separated(char close, F&& item) {
    if (tok_.is(close)) return;
    for (;;) {
      item();
      if (!tok_.is(',')) return;
      take();
    }
  }

  Token expect(char c, std::string_view context) {
    if (!tok_.is(c)) expected("'", c, "' ", context);
    return take();
  }

  // Builder errors keep their status and gain the position they concern.
  template <typename F>
  auto build(const Token& at, F&& call) {
    try {
      return call();
    } catch (const Error& e) {
      throw Error(e.status(), position(at) + e.what());
    }
  }

  // --- statements ----------------------------------------------------------

  void statement() {
    if (tok_.kind == Tok::Newline) {
      take();
      return;
    }
    if (tok_.kind != Tok::Ident) expected("a statement");
    // `input x ...` is a statement; `input = neg(x)` defines a value named input.
    const bool keyword = peek().kind == Tok::Ident;
    if (tok_.text == "mesh" && peek().kind == Tok::Number) mesh_statement();
    else if (keyword && tok_.text == "input") input_statement();
    else if (keyword && (tok_.text == "shard" || tok_.text == "replicate")) shard_statement();
    else if (keyword && tok_.text == "const") const_statement();
    else if (keyword && tok_.text == "output") output_statement();
    else if (keyword) unknown_statement();
    else op_statement();
    if (tok_.kind == Tok::Newline) take();
    else if (tok_.kind != Tok::End) expected("end of line after the statement");
  }

  // Two names in a row start no statement but a misspelt keyword's
  // (`inptu x: ...`); without this the parser would expect `=` after `inptu`.
  [[noreturn]] void unknown_statement() {
    std::string hint = " (expected input, const, output, mesh, shard, replicate or 'name = op(...)')";
    for (std::string_view keyword : {"input", "const", "output", "shard", "replicate"})
      if (edit_distance(tok_.text, keyword) <= 2) hint = " (did you mean '" + std::string(keyword) + "'?)";
    error(tok_, "unknown statement '", tok_.text, "'", hint);
  }

  // Levenshtein distance, for the suggestion above (short words only).
  static size_t edit_distance(std::string_view a, std::string_view b) {
    if (a.size() > 32 || b.size() > 32) return std::max(a.size(), b.size());
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
        diagonal = row[j];
        row[j] = std::min({substitute, row[j] + 1, row[j - 1] + 1});
      }
    }
    return row[b.size()];
  }

  void input_statement() {
    take();
    const Token name = new_name();
    expect(':', "after the input's name");
    if (tok_.is_word("tensor")) {
      take();
      expect('<', "after 'tensor'");
      const DType t = dtype();
      expect(',', "after the tensor's dtype");
      const Token rank_tok = tok_;
      const int64_t rank = integer("a rank");
      // The builder checks the range; this only keeps the value intact for it.
      if (rank < std::numeric_limits<int>::min() || rank > std::numeric_limits<int>::max())
        error(rank_tok, "rank ", rank, " is out of range");
      expect('>', "after the tensor's rank");
      bind(name, build(rank_tok, [&] { return builder_.tensor_input(static_cast<int>(rank), t); }));
    } else if (tok_.is_word("scalar")) {
      take();
      expect('<', "after 'scalar'");
      const DType t = dtype();
      expect('>', "after the scalar's dtype");
      bind(name, build(name, [&] { return builder_.scalar_input(t); }));
    } else {
      expected("'tensor' or 'scalar'");
    }
  }

  void const_statement() {
    take();
    const Token name = new_name();
    expect(':', "after the constant's name");
    const DType t = dtype();
    expect('=', "after the constant's dtype");
    const Token literal = tok_;
    int64_t id;
    if (is_float(t)) {
      const double v = float_literal();
      id = build(literal, [&] { return builder_.constant_f64(v, t); });
    } else if (is_bool(t)) {
      const int64_t v = boolean("true or false");
      id = build(literal, [&] { return builder_.constant_i64(v, t); });
    } else {
      const int64_t v = integer("an integer literal");
      id = build(literal, [&] { return builder_.constant_i64(v, t); });
    }
    bind(name, id);
  }

  void op_statement() {
    std::vector<Token> results{new_name()};
    while (tok_.is(',')) {
      take();
      if (results.size() == kMaxResults) error(tok_, "an op has at most ", kMaxResults, " results");
      const Token name = new_name();
      for (const Token& earlier : results)
        if (earlier.text == name.text) error(name, "'", name.text, "' is named twice");
      results.push_back(name);
    }
    expect('=', "after the result names");
    const Token op_tok = tok_;
    if (tok_.kind != Tok::Ident) expected("an op name");
    const std::optional<Op> op = op_from_name(tok_.text);
    if (!op) error(tok_, "unknown op '", tok_.text, "'");
    take();
    const auto num_results = static_cast<size_t>(op_info(*op).num_outputs);
    if (results.size() != num_results)
      error(op_tok, op_tok.text, " has ", num_results, num_results == 1 ? " result" : " results",
            ", got ", results.size(), results.size() == 1 ? " name" : " names");
    const TextSignature& sig = text_signature(*op);
    std::vector<int64_t> args = arguments(sig, op_tok);
    std::vector<int64_t> attrs = attributes(sig, op_tok);
    const std::vector<int64_t> outs =
        build(op_tok, [&] { return builder_.op(*op, std::move(args), std::move(attrs)); });
    for (size_t i = 0; i < results.size(); ++i) bind(results[i], outs[i]);
  }

  void output_statement() {
    const Token output_tok = take();
    const Token name = tok_;
    const int64_t id = value_ref("a value name");
    // attrs: [alias_input, stride_order...], the output record's layout.
    std::vector<int64_t> attrs = attributes(kOutputSignature, output_tok);
    std::vector<int64_t> order(attrs.begin() + 1, attrs.end());
    build(name, [&] {
      builder_.output(id, std::move(order), attrs[0]);
      return 0;
    });
  }

  // `mesh 4`: the device mesh (docs/multidevice.md).
  void mesh_statement() {
    const Token mesh_tok = take();
    const int64_t ranks = integer("a rank count");
    build(mesh_tok, [&] {
      builder_.mesh(ranks);
      return 0;
    });
  }

  // `shard x {dim=1}`, `replicate y`: an input's or the latest output's sharding.
  void shard_statement() {
    const Token kw = take();
    const Token name = tok_;
    const int64_t id = value_ref("a value name");
    const bool replicated = kw.text == "replicate";
    const int64_t dim = replicated ? 0 : attributes(kShardSignature, kw)[0];
    build(name, [&] {
      builder_.shard(id, dim, replicated);
      return 0;
    });
  }

  // --- names ---------------------------------------------------------------

  Token new_name() {
    if (tok_.kind != Tok::Ident) expected("a name");
    if (auto it = names_.find(tok_.text); it != names_.end())
      error(tok_, "'", tok_.text, "' is already defined on line ", it->second.line);
    return take();
  }

  void bind(const Token& name, int64_t id) { names_.emplace(name.text, Binding{id, name.line}); }

  int64_t value_ref(std::string_view what) {
    if (tok_.kind != Tok::Ident) expected(what);
    auto it = names_.find(tok_.text);
    if (it == names_.end()) {
      if (peek().is('('))
        error(tok_, "unknown name '", tok_.text, "' (calls do not nest: bind ", call_text(tok_),
              " to a name first)");
      error(tok_, "unknown name '", tok_.text, "'");
    }
    take();
    return it->second.id;
  }

  // The source of the call that starts at `name`, up to its closing ')' on
  // the same line, for the hint above; "name(...)" when long or unclosed.
  std::string call_text(const Token& name) const {
    constexpr size_t kShown = 40;
    const size_t start = static_cast<size_t>(name.text.data() - text_.data());
    int depth = 0;
    for (size_t i = start + name.text.size(); i < text_.size() && i - start < kShown; ++i) {
      const char c = text_[i];
      if (c == '\n' || c == ';' || c == '#') break;
      if (c == '(') ++depth;
      if (c == ')' && --depth == 0) return std::string(text_.substr(start, i + 1 - start));
    }
    return std::string(name.text) + "(...)";
  }

  // --- op arguments ----------------------------------------------------------

  // `(a, [n, m], b)`: value names, and a bracketed shape list where the op's
  // signature has one. Returns the flat argument ids of the op record.
  std::vector<int64_t> arguments(const TextSignature& sig, const Token& op_tok) {
    expect('(', "after the op name");
    const size_t list_items = sig.list_position < 0 ? 0 : 1;
    const size_t max_items = sig.max_names + list_items;
    std::vector<int64_t> ids;
    size_t count = 0;
    comma_separated(')', [&] {
      if (count == max_items)
        error(tok_, "too many arguments for ", op_tok.text, " (it takes ", arity(sig), ")");
      const std::string what = "argument " + std::to_string(count + 1) + " of " +
                               std::string(op_tok.text);
      if (static_cast<int>(count) == sig.list_position) shape_list(ids, what);
      else ids.push_back(value_ref("a value name as " + what));
      ++count;
    });
    const Token close = expect(')', "after argument list");
    if (count < sig.min_names + list_items)
      error(close, op_tok.text, " takes ", arity(sig), ", got ", count);
    return ids;
  }

  void shape_list(std::vector<int64_t>& ids, const std::string& what) {
    if (!tok_.is('[')) expected("a shape list '[...]' as ", what);
    take();
    comma_separated(']', [&] { ids.push_back(value_ref("a value name in the shape list")); });
    expect(']', "after the shape list");
  }

  static std::string arity(const TextSignature& sig) {
    const size_t list_items = sig.list_position < 0 ? 0 : 1;
    const size_t lo = sig.min_names + list_items;
    const size_t hi = sig.max_names + list_items;
    const std::string noun = hi == 1 ? " argument" : " arguments";
    if (hi == std::numeric_limits<size_t>::max()) return "at least " + std::to_string(lo) + noun;
    if (lo == hi) return std::to_string(lo) + noun;
    return std::to_string(lo) + " to " + std::to_string(hi) + noun;
  }

  // --- attributes ------------------------------------------------------------

  // `{name=value, ...}` in any order; returns the record's attribute layout:
  // the fixed slots (defaults where not given) followed by the list, if any.
  std::vector<int64_t> attributes(const TextSignature& sig, const Token& owner) {
    std::vector<int64_t> fixed(sig.fixed_slots, 0);
    std::vector<int64_t> tail;
    std::vector<bool> given(sig.attrs.size(), false);
    if (tok_.is('{')) {
      take();
      comma_separated('}', [&] { attribute(sig, owner, given, fixed, tail); });
      expect('}', "after the attributes");
    }
    for (size_t i = 0; i < sig.attrs.size(); ++i) {
      const TextAttr& a = sig.attrs[i];
      if (given[i]) continue;
      if (a.required) error(owner, owner.text, " requires attribute '", a.name, "'");
      if (a.kind != TextAttrKind::IntList) fixed[static_cast<size_t>(a.slot)] = a.default_value;
    }
    fixed.insert(fixed.end(), tail.begin(), tail.end());
    return fixed;
  }

  void attribute(const TextSignature& sig, const Token& owner, std::vector<bool>& given,
                 std::vector<int64_t>& fixed, std::vector<int64_t>& tail) {
    if (tok_.kind != Tok::Ident) expected("an attribute name");
    const Token name = take();
    size_t i = 0;
    while (i < sig.attrs.size() && sig.attrs[i].name != name.text) ++i;
    if (i == sig.attrs.size())
      error(name, "unknown attribute '", name.text, "' for ", owner.text, " (", attr_names(sig),
            ")");
    if (given[i]) error(name, "attribute '", name.text, "' is given twice");
    given[i] = true;
    expect('=', "after the attribute name");
    const TextAttr& a = sig.attrs[i];
    const std::string of = " for attribute '" + std::string(a.name) + "'";
    if (a.kind == TextAttrKind::IntList) {
      tail = int_list(of);
      return;
    }
    int64_t& slot = fixed[static_cast<size_t>(a.slot)];
    switch (a.kind) {
      case TextAttrKind::Int: slot = integer("an integer" + of); break;
      case TextAttrKind::Bool: slot = boolean("true or false" + of); break;
      case TextAttrKind::DType: slot = static_cast<int64_t>(dtype()); break;
      case TextAttrKind::Stop:
        if (tok_.is_word("end")) {
          take();
          slot = kEnd;
        } else {
          slot = integer("an integer or 'end'" + of);
        }
        break;
      case TextAttrKind::ScatterReduce: {
        if (tok_.kind != Tok::Ident) expected("none, sum, prod, mean, amax or amin" + of);
        const Token word = take();
        slot = -1;
        for (int r = 0; r <= static_cast<int>(ScatterReduce::Amin); ++r)
          if (word.text == scatter_reduce_name(static_cast<ScatterReduce>(r))) slot = r;
        if (slot < 0) error(word, "unknown reduce '", word.text, "'", of, " (expected none, sum, prod, mean, amax or amin)");
        break;
      }
      case TextAttrKind::IntList: break;  // read above
    }
  }

  static std::string attr_names(const TextSignature& sig) {
    if (sig.attrs.empty()) return "it takes none";
    std::string s = "expected ";
    for (size_t i = 0; i < sig.attrs.size(); ++i) {
      if (i) s += i + 1 == sig.attrs.size() ? " or " : ", ";
      s += sig.attrs[i].name;
    }
    return s;
  }

  std::vector<int64_t> int_list(const std::string& of) {
    if (!tok_.is('[')) expected("a list '[...]'", of);
    take();
    std::vector<int64_t> items;
    comma_separated(']', [&] { items.push_back(integer("an integer in the list" + of)); });
    expect(']', "after the list");
    return items;
  }

  // --- literals --------------------------------------------------------------

  DType dtype() {
    if (tok_.kind == Tok::Ident)
      if (std::optional<DType> t = dtype_from_name(tok_.text)) {
        take();
        return *t;
      }
    expected("a dtype (", dtype_name_list(), ")");  // (the table's list: a hand-kept one lacked 4 dtypes)
  }

  int64_t boolean(const std::string& what) {
    if (tok_.is_word("true") || tok_.is_word("false")) return take().text == "true" ? 1 : 0;
    expected(what);
  }

  // ['-'] digits, checked against int64's range digit by digit.
  int64_t integer(const std::string& what) {
    const Token start = tok_;
    const bool negative = tok_.is('-');
    if (negative) take();
    if (tok_.kind != Tok::Number) expected(what);
    for (char c : tok_.text)
      if (!is_digit(c)) expected(what);
    const Token digits = take();
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    uint64_t v = 0;
    for (char c : digits.text) {
      const auto d = static_cast<uint64_t>(c - '0');
      if (v > (limit - d) / 10)
        error(start, "integer literal '", negative ? "-" : "", digits.text,
              "' does not fit in int64");
      v = v * 10 + d;
    }
    // Two's complement wrap makes 0 - 2^63 read as INT64_MIN.
    return static_cast<int64_t>(negative ? 0 - v : v);
  }

  // ['-'] (number | inf | nan ['(' 0xPAYLOAD ')']).
  double float_literal() {
    const bool negative = tok_.is('-');
    if (negative) take();
    double v;
    if (tok_.is_word("inf")) {
      take();
      v = std::numeric_limits<double>::infinity();
    } else if (tok_.is_word("nan")) {
      take();
      v = nan_literal();
    } else if (tok_.kind == Tok::Number) {
      v = number();
    } else {
      expected("a number, inf or nan");
    }
    return negative ? -v : v;
  }

  double number() {
    const Token t = take();
    double v = 0;
    const char* end = t.text.data() + t.text.size();
    const auto [ptr, ec] = std::from_chars(t.text.data(), end, v);
    if (ec == std::errc::result_out_of_range)
      error(t, "float literal '", t.text, "' is out of range for float64");
    if (ec != std::errc() || ptr != end) error(t, "malformed number '", t.text, "'");
    return v;
  }

  // The payload is the 52-bit fraction in hex; without one, the quiet NaN.
  double nan_literal() {
    constexpr uint64_t kExponent = uint64_t{0x7ff} << 52;
    constexpr uint64_t kFraction = (uint64_t{1} << 52) - 1;
    if (!tok_.is('(')) return std::bit_cast<double>(kExponent | (uint64_t{1} << 51));
    take();
    const Token t = tok_;
    const std::string what = "a NaN payload 0x1 to 0xfffffffffffff";
    if (t.kind != Tok::Number || t.text.size() < 3 || t.text.size() > 15 ||
        t.text.substr(0, 2) != "0x")
      expected(what);
    uint64_t fraction = 0;
    const char* end = t.text.data() + t.text.size();
    const auto [ptr, ec] = std::from_chars(t.text.data() + 2, end, fraction, 16);
    if (ec != std::errc() || ptr != end || fraction == 0 || fraction > kFraction) expected(what);
    take();
    expect(')', "after the NaN payload");
    return std::bit_cast<double>(kExponent | fraction);
  }

  std::string_view text_;
  Lexer lexer_;
  Token tok_;
  std::optional<Token> ahead_;
  Builder builder_;
  std::unordered_map<std::string_view, Binding> names_;
};

}  // namespace

std::shared_ptr<Fusion> parse_fusion(std::string_view text) { return Parser(text).run(); }

}  // namespace kf
