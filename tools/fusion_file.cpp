#include "fusion_file.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kfcli {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) parts.push_back(trim(item));
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// "32x64" -> {32, 64}; "" or "()" -> {} (rank 0).
std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  if (text.empty() || text == "()") return shape;
  for (const std::string& part : split(text, 'x')) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0')
      throw CliError(KF_OK, "bad shape '" + text + "': expected sizes like 32x64");
    shape.push_back(v);  // negative sizes go through: kfuse reports them
  }
  return shape;
}

double parse_number(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw CliError(KF_OK, "bad scalar '" + text + "': expected a number");
  return v;
}

std::string input_label(const FusionFile& file, size_t index) {
  std::string s = "input " + std::to_string(index);
  if (index < file.input_names.size()) s += " (" + file.input_names[index] + ")";
  return s;
}

}  // namespace

void check(kf_status status, const char* call) {
  if (status != KF_OK)
    throw CliError(status, std::string(call) + " -> " + kf_status_name(status) + ": " + kf_last_error());
}

FusionFile load_fusion_file(const std::string& path) {
  // An ifstream opens a directory and reads it as empty text, which the
  // parser would report as "no outputs": say what the path is instead.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw CliError(KF_OK, "cannot read " + path + ": it is a directory, expected a fusion file (.kf)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CliError(KF_OK, "cannot read " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  FusionFile file;
  file.path = path;
  file.text = buffer.str();
  std::istringstream lines(file.text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::string t = trim(line);
    if (t.rfind("#!", 0) == 0) {
      const std::string directive = trim(t.substr(2));
      const size_t colon = directive.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = trim(directive.substr(0, colon));
      const std::string value = trim(directive.substr(colon + 1));
      if (key == "shapes") file.shapes = value;
      else if (key == "scalars") file.scalars = value;
      file.directives[key] = value;
      continue;
    }
    // `input NAME: ...` names inputs for messages; the parser is the judge.
    std::istringstream words(t);
    std::string keyword, name;
    if (words >> keyword >> name && keyword == "input") {
      if (name.back() == ':') name.pop_back();
      file.input_names.push_back(name);
    }
  }
  return file;
}

std::string replace_words(const std::string& text, const std::vector<std::string>& from,
                          const std::string& to) {
  std::string out;
  out.reserve(text.size());
  bool comment = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') comment = false;
    if (c == '#') comment = true;
    if (comment || !is_word_char(c) || (i > 0 && is_word_char(text[i - 1]))) {
      out += c;
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && is_word_char(text[end])) ++end;
    const std::string word = text.substr(i, end - i);
    out += std::find(from.begin(), from.end(), word) != from.end() ? to : word;
    i = end;
  }
  return out;
}

std::string float64_text(const std::string& text) {
  return replace_words(text, {"float32", "float16", "bfloat16"}, "float64");
}

// With the length: a NUL inside a file is reported, not taken as its end.
Fusion::Fusion(const std::string& text) {
  check(kf_fusion_from_text_n(text.data(), text.size(), &f_), "kf_fusion_from_text_n");
}

std::vector<kf_value_info> Fusion::inputs() const {
  size_t n = 0;
  check(kf_fusion_num_inputs(f_, &n), "kf_fusion_num_inputs");
  std::vector<kf_value_info> infos(n);
  for (size_t i = 0; i < n; ++i) {
    infos[i].struct_size = sizeof(kf_value_info);
    check(kf_fusion_input(f_, i, &infos[i]), "kf_fusion_input");
  }
  return infos;
}

std::vector<kf_value_info> Fusion::outputs() const {
  size_t n = 0;
  check(kf_fusion_num_outputs(f_, &n), "kf_fusion_num_outputs");
  std::vector<kf_value_info> infos(n);
  for (size_t i = 0; i < n; ++i) {
    infos[i].struct_size = sizeof(kf_value_info);
    check(kf_fusion_output(f_, i, &infos[i]), "kf_fusion_output");
  }
  return infos;
}

std::string Fusion::text() const {
  char* s = nullptr;
  check(kf_fusion_to_text(f_, &s), "kf_fusion_to_text");
  std::string text(s);
  kf_string_free(s);
  return text;
}

std::vector<HostTensor> make_inputs(const Fusion& fusion, const FusionFile& file,
                                    const Options& options, std::string* description) {
  const std::vector<kf_value_info> infos = fusion.inputs();
  size_t num_tensors = 0, num_scalars = 0;
  for (const kf_value_info& info : infos) (info.is_scalar ? num_scalars : num_tensors)++;

  const std::optional<std::string>& shapes_text = options.shapes ? options.shapes : file.shapes;
  const std::optional<std::string>& scalars_text = options.scalars ? options.scalars : file.scalars;
  std::vector<std::string> shapes, scalars;
  if (num_tensors > 0) {
    if (!shapes_text)
      throw CliError(KF_OK, "the fusion has " + std::to_string(num_tensors) +
                                " tensor inputs: give --shapes or a '#! shapes:' line");
    shapes = split(*shapes_text, ',');
  }
  if (num_scalars > 0) {
    if (!scalars_text)
      throw CliError(KF_OK, "the fusion has " + std::to_string(num_scalars) +
                                " scalar inputs: give --scalars or a '#! scalars:' line");
    scalars = split(*scalars_text, ',');
  }
  if (shapes.size() != num_tensors)
    throw CliError(KF_OK, "got " + std::to_string(shapes.size()) + " shapes for " +
                              std::to_string(num_tensors) + " tensor inputs");
  if (scalars.size() != num_scalars)
    throw CliError(KF_OK, "got " + std::to_string(scalars.size()) + " scalars for " +
                              std::to_string(num_scalars) + " scalar inputs");
  if (!options.layouts.empty() && options.layouts.size() != num_tensors)
    throw CliError(KF_OK, "--layout lists " + std::to_string(options.layouts.size()) + " layouts for " +
                              std::to_string(num_tensors) + " tensor inputs");

  Rng rng(options.seed);
  std::vector<HostTensor> inputs;
  size_t next_shape = 0, next_scalar = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    const kf_value_info& info = infos[i];
    if (!description->empty()) *description += ", ";
    *description += input_label(file, i) + " " + kf_dtype_name(info.dtype);
    if (info.is_scalar) {
      const std::string& text = scalars[next_scalar++];
      inputs.push_back(scalar_tensor(info.dtype, parse_number(text)));
      *description += " = " + text;
      continue;
    }
    std::vector<int64_t> shape = parse_shape(shapes[next_shape++]);
    if (shape.size() != static_cast<size_t>(info.rank))
      throw CliError(KF_OK, input_label(file, i) + " has rank " + std::to_string(info.rank) +
                                ", its shape " + shape_string(shape.data(), static_cast<int>(shape.size())) +
                                " has " + std::to_string(shape.size()) + " dims");
    for (int64_t s : shape)
      if (s < 0) throw CliError(KF_OK, input_label(file, i) + ": negative size " + std::to_string(s));
    const size_t tensor = next_shape - 1;
    inputs.push_back(random_tensor(
        info.dtype, shape, tensor < options.layouts.size() ? options.layouts[tensor] : options.layout, rng));
    // Appended in two steps: `" " + std::string` trips GCC 12's -Wrestrict false positive.
    *description += ' ';
    *description += shape_string(shape.data(), static_cast<int>(shape.size()));
  }
  return inputs;
}

std::map<int64_t, std::string> value_names(const Fusion& fusion) {
  std::map<int64_t, std::string> names;
  const std::string text = fusion.text();
  for (size_t i = 0; i < text.size();) {
    if (!is_word_char(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && is_word_char(text[end])) ++end;
    const std::string word = text.substr(i, end - i);
    const bool numbered = word.size() > 1 && std::string("tscv").find(word[0]) != std::string::npos &&
                          word.find_first_not_of("0123456789", 1) == std::string::npos;
    if (numbered) names[std::stoll(word.substr(1))] = word;
    i = end;
  }
  int64_t first_extent = 0;
  for (const kf_value_info& info : fusion.inputs()) {
    if (info.is_scalar) continue;
    for (int d = 0; d < info.rank; ++d)
      names[-1 - (first_extent + d)] = names[info.id] + ".size(" + std::to_string(d) + ")";
    first_extent += info.rank;
  }
  return names;
}

std::vector<int64_t> output_aliases(const Fusion& fusion) {
  std::vector<int64_t> alias(fusion.outputs().size(), -1);
  for (size_t i = 0; i < alias.size(); ++i) check(kf_output_alias(fusion.get(), i, &alias[i]), "kf_output_alias");
  return alias;
}

std::vector<HostTensor> caller_outputs(const Fusion& fusion, const std::vector<const DLTensor*>& inputs,
                                       OutLayout layout) {
  const std::vector<kf_value_info> infos = fusion.outputs();
  const std::vector<int64_t> alias = output_aliases(fusion);
  std::vector<HostTensor> out;
  for (size_t i = 0; i < infos.size(); ++i) {
    if (alias[i] >= 0) {
      out.emplace_back();
      continue;
    }
    std::vector<int64_t> shape(static_cast<size_t>(infos[i].rank));
    check(kf_output_shape(fusion.get(), inputs.data(), inputs.size(), i, shape.data(), shape.size()),
          "kf_output_shape");
    out.push_back(zeros(infos[i].dtype, shape, layout == OutLayout::Transposed));
  }
  return out;
}

std::vector<DLTensor> output_tensors(const Fusion& fusion, std::vector<HostTensor>& own,
                                     const std::vector<const DLTensor*>& inputs, DLDevice device) {
  const std::vector<int64_t> alias = output_aliases(fusion);
  std::vector<DLTensor> out;
  for (size_t i = 0; i < own.size(); ++i) {
    if (alias[i] >= 0) {
      out.push_back(*inputs[static_cast<size_t>(alias[i])]);
      continue;
    }
    out.push_back(own[i].dl());
    out.back().device = device;
  }
  return out;
}

std::string layouts_name(const Options& options) {
  if (options.layouts.empty()) return layout_name(options.layout);
  std::string out;
  for (Layout l : options.layouts) out += (out.empty() ? "" : ", ") + std::string(layout_name(l));
  return out;
}

}  // namespace kfcli
