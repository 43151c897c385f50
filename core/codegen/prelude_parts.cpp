#include "core/codegen/prelude_parts.h"

#include <cctype>
#include <map>
#include <set>
#include <vector>

#include "core/codegen/prelude.h"

namespace kf {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool prelude_name(std::string_view id) { return id.starts_with("kf_") || id.starts_with("KF_"); }

struct Decl {
  size_t begin = 0, end = 0;
  std::set<std::string> declares, uses;
};

// The kf_/KF_ names in `text`, outside comments and literals.
void names_in(std::string_view text, std::set<std::string>& out) {
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == std::string_view::npos) return;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      i = text.find("*/", i + 2);
      if (i == std::string_view::npos) return;
      i += 2;
    } else if (c == '"' || c == '\'') {
      for (++i; i < text.size() && text[i] != c; ++i)
        if (text[i] == '\\') ++i;
      ++i;
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < text.size() && ident_char(text[j])) ++j;
      if (prelude_name(text.substr(i, j - i))) out.insert(std::string(text.substr(i, j - i)));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < text.size() && ident_char(text[i])) ++i;  // 1e5f, 0x1fu: no names
    } else {
      ++i;
    }
  }
}

// The names a declaration's head (its text before the body) declares: a
// struct's or an operator's every kf_ name (operators are found through
// their types), else the function's name (a kf_ name followed by '('), else
// (a variable, a specialization) every kf_ name. Macros are declared by
// their #define only.
std::set<std::string> head_names(std::string_view head, const std::set<std::string>& macros) {
  std::set<std::string> all, called;
  bool aggregate = false;
  for (size_t i = 0; i < head.size();) {
    if (head.substr(i, 2) == "//") {
      i = head.find('\n', i);
      if (i == std::string_view::npos) break;
    } else if (ident_start(head[i])) {
      size_t j = i;
      while (j < head.size() && ident_char(head[j])) ++j;
      const std::string id(head.substr(i, j - i));
      if (id == "struct" || id == "union" || id == "operator") aggregate = true;
      if (prelude_name(id) && !macros.contains(id)) {
        all.insert(id);
        size_t k = j;
        while (k < head.size() && std::isspace(static_cast<unsigned char>(head[k]))) ++k;
        if (k < head.size() && head[k] == '(') called.insert(id);
      }
      i = j;
    } else {
      ++i;
    }
  }
  return aggregate || called.empty() ? all : called;
}

// Where a declaration ending at `i` ends with what follows it on its line:
// blanks and a // comment ("{ ... }  // why") and the newline go with it;
// anything else (another declaration on the same line) does not.
size_t line_rest(std::string_view p, size_t i) {
  size_t j = i;
  while (j < p.size() && (p[j] == ' ' || p[j] == '\t')) ++j;
  if (p.substr(j, 2) == "//") j = std::min(p.find('\n', j), p.size());
  if (j < p.size() && p[j] == '\n') return j + 1;
  return j == p.size() ? j : i;
}

// The prelude's top-level declarations, in order, covering the whole text.
std::vector<Decl> declarations(std::string_view p, const std::set<std::string>& all_macros) {
  std::vector<Decl> decls;
  size_t begin = 0, head_end = std::string_view::npos;
  int depth = 0, pp_depth = 0;
  std::set<std::string> macros;  // defined by the directives of the current declaration
  const auto close = [&](size_t end) {
    Decl d;
    d.begin = begin;
    d.end = end;
    const std::string_view text = p.substr(begin, end - begin);
    names_in(text, d.uses);
    if (!macros.empty()) d.declares = macros;
    else d.declares = head_names(p.substr(begin, (head_end == std::string_view::npos ? end : head_end) - begin), all_macros);
    decls.push_back(std::move(d));
    begin = end;
    head_end = std::string_view::npos;
    macros.clear();
  };
  bool line_start = true;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '#' && line_start) {  // a directive: to the end of its (continued) line
      size_t end = i;
      while (true) {
        end = p.find('\n', end);
        if (end == std::string_view::npos) end = p.size();
        if (end > 0 && p[end - 1] == '\\' && end < p.size()) {
          ++end;
          continue;
        }
        break;
      }
      std::string_view d = p.substr(i + 1, end - i - 1);
      while (!d.empty() && std::isspace(static_cast<unsigned char>(d.front()))) d.remove_prefix(1);
      if (depth == 0) {
        if (d.starts_with("if")) ++pp_depth;
        else if (d.starts_with("endif")) --pp_depth;
        else if (d.starts_with("define")) {
          size_t a = 6;
          while (a < d.size() && std::isspace(static_cast<unsigned char>(d[a]))) ++a;
          size_t b = a;
          while (b < d.size() && ident_char(d[b])) ++b;
          macros.insert(std::string(d.substr(a, b - a)));
        }
      }
      i = end;
      if (depth == 0 && pp_depth == 0) close(std::min(end + 1, p.size()));
      continue;
    }
    line_start = false;
    if (c == '/' && i + 1 < p.size() && p[i + 1] == '/') {
      i = p.find('\n', i);
      if (i == std::string_view::npos) i = p.size();
    } else if (c == '/' && i + 1 < p.size() && p[i + 1] == '*') {
      i = p.find("*/", i + 2);
      i = i == std::string_view::npos ? p.size() : i + 2;
    } else if (c == '"' || c == '\'') {
      for (++i; i < p.size() && p[i] != c; ++i)
        if (p[i] == '\\') ++i;
      ++i;
    } else if (c == '{') {
      if (depth == 0 && pp_depth == 0 && head_end == std::string_view::npos) head_end = i;
      ++depth;
      ++i;
    } else if (c == '}') {
      --depth;
      ++i;
      if (depth == 0 && pp_depth == 0) {
        size_t j = i;  // "};" and "} name;" end with the ';'
        while (j < p.size() && p[j] != '\n' && std::isspace(static_cast<unsigned char>(p[j]))) ++j;
        if (j < p.size() && p[j] == ';') i = j + 1;
        // Declarations like "struct x {...} y;" are not in the prelude.
        i = line_rest(p, i);
        close(i);
        line_start = true;
      }
    } else if (c == ';') {
      ++i;
      if (depth == 0 && pp_depth == 0) {
        i = line_rest(p, i);
        close(i);
        line_start = true;
      }
    } else {
      ++i;
    }
  }
  if (begin < p.size()) close(p.size());
  return decls;
}

// A prelude cut into declarations, with the declarations of each name.
struct Parsed {
  std::string_view text;
  std::vector<Decl> decls;
  std::map<std::string, std::vector<size_t>, std::less<>> declared_by;
};

// The names `prelude` #defines (at any depth).
std::set<std::string> macro_names(std::string_view prelude) {
  std::set<std::string> out;
  for (size_t at = prelude.find("#define"); at != std::string_view::npos; at = prelude.find("#define", at + 1)) {
    size_t a = at + 7;
    while (a < prelude.size() && std::isspace(static_cast<unsigned char>(prelude[a]))) ++a;
    size_t b = a;
    while (b < prelude.size() && ident_char(prelude[b])) ++b;
    out.insert(std::string(prelude.substr(a, b - a)));
  }
  return out;
}

Parsed parse(std::string_view prelude) {
  Parsed p{prelude, declarations(prelude, macro_names(prelude)), {}};
  for (size_t k = 0; k < p.decls.size(); ++k)
    for (const std::string& n : p.decls[k].declares) p.declared_by[n].push_back(k);
  return p;
}

std::string part_of(const Parsed& p, std::string_view body) {
  std::vector<bool> keep(p.decls.size(), false);
  std::set<std::string> wanted;
  names_in(body, wanted);
  std::vector<std::string> todo(wanted.begin(), wanted.end());
  while (!todo.empty()) {
    const std::string name = std::move(todo.back());
    todo.pop_back();
    auto it = p.declared_by.find(name);
    if (it == p.declared_by.end()) continue;
    for (size_t k : it->second) {
      if (keep[k]) continue;
      keep[k] = true;
      for (const std::string& n : p.decls[k].uses)
        if (wanted.insert(n).second) todo.push_back(n);
    }
  }
  std::string out;
  size_t last = p.decls.size();  // the last declaration kept
  for (size_t k = 0; k < p.decls.size(); ++k)
    if (keep[k] || p.decls[k].declares.empty()) {
      // Where declarations in between are left out, a new line: a
      // directive must start its line even after a declaration that
      // shared its line with one left out.
      if (last + 1 != k && !out.empty() && out.back() != '\n') out += '\n';
      out += p.text.substr(p.decls[k].begin, p.decls[k].end - p.decls[k].begin);
      last = k;
    }
  return out;
}

}  // namespace

std::string prelude_part(std::string_view prelude, std::string_view body) { return part_of(parse(prelude), body); }

std::string prelude_for(std::string_view body) {
  static const Parsed parsed = parse(cuda_prelude());
  return part_of(parsed, body);
}

}  // namespace kf
