// Command-line options of the `kfuse` subcommands: `--name value` or
// `--name=value`, read one argument at a time.
#pragma once

#include <string>

namespace kfcli {

class ArgReader {
 public:
  // Reads argv[first], argv[first + 1], ...
  ArgReader(int argc, char** argv, int first) : argc_(argc), argv_(argv), i_(first - 1) {}

  // Moves to the next argument; false past the last.
  bool next() {
    if (++i_ >= argc_) return false;
    name_ = argv_[i_];
    has_value_ = name_.rfind("--", 0) == 0 && name_.find('=') != std::string::npos;
    if (has_value_) {
      value_ = name_.substr(name_.find('=') + 1);
      name_ = name_.substr(0, name_.find('='));
    }
    return true;
  }
  // The argument, without any `=value`.
  const std::string& name() const { return name_; }
  // The argument as given.
  std::string raw() const { return argv_[i_]; }
  // True when the argument carried `=value`.
  bool has_value() const { return has_value_; }
  // The option's value: after `=`, else the next argument (consumed).
  // Throws std::string when there is none.
  std::string value() {
    if (has_value_) return value_;
    if (i_ + 1 >= argc_) throw std::string("option " + name_ + " needs a value");
    return argv_[++i_];
  }

 private:
  int argc_;
  char** argv_;
  int i_;
  std::string name_, value_;
  bool has_value_ = false;
};

}  // namespace kfcli
