// What `kfuse run` and `kfuse explain` share: the command-line options, a
// fusion file with its `#!` directives, the inputs made for it, and errors
// from the C API carried as exceptions inside the CLI.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_tensor.h"
#include "kfuse/kfuse.h"

namespace kfcli {

struct Options {
  std::string command;
  std::string file;
  std::optional<std::string> shapes;   // overrides `#! shapes:`
  std::optional<std::string> scalars;  // overrides `#! scalars:`
  Layout layout = Layout::Contiguous;
  // --layout with a comma-separated list: one layout per tensor input, in
  // order (empty: `layout` for every input).
  std::vector<Layout> layouts;
  // --out-layout: the outputs kfuse allocates itself (kf_execute), or
  // outputs the caller allocates (kf_execute_into) row-major or transposed.
  OutLayout out_layout = OutLayout::Kfuse;
  uint64_t seed = 0;
  std::string device = "auto";  // auto | cpu | cuda
  bool cuda = false;            // explain --cuda
  // compile: every FILE, each --shapes (a shape class each), --arch, -o.
  std::vector<std::string> files;
  std::vector<std::string> shapes_list;
  int arch = 0;  // 10 * major + minor
  std::string output;
};

// A failed kfuse call (status and message) or a CLI-level problem
// (status KF_OK, message only).
class CliError : public std::runtime_error {
 public:
  CliError(kf_status status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  kf_status status;
};

// Throws CliError with kf_last_error() when `status` is not KF_OK.
void check(kf_status status, const char* call);

struct FusionFile {
  std::string path;
  std::string text;
  std::optional<std::string> shapes;   // from `#! shapes: ...`
  std::optional<std::string> scalars;  // from `#! scalars: ...`
  std::vector<std::string> input_names;  // from `input NAME: ...`, in order
  std::map<std::string, std::string> directives;  // every `#! KEY: VALUE` line
};

FusionFile load_fusion_file(const std::string& path);

// The --layout option as given: one name, or one per tensor input.
std::string layouts_name(const Options& options);

// The text with every whole word in `from` spelled `to`, comments left alone.
std::string replace_words(const std::string& text, const std::vector<std::string>& from,
                          const std::string& to);

// The text with every floating dtype (float32, float16, bfloat16) spelled
// float64, comments left alone: the independent reference of `kfuse run`.
std::string float64_text(const std::string& text);

// An owning fusion handle.
class Fusion {
 public:
  explicit Fusion(const std::string& text);
  ~Fusion() { kf_fusion_release(f_); }
  Fusion(const Fusion&) = delete;
  Fusion& operator=(const Fusion&) = delete;
  kf_fusion get() const { return f_; }
  std::vector<kf_value_info> inputs() const;
  std::vector<kf_value_info> outputs() const;
  std::string text() const;

 private:
  kf_fusion f_ = nullptr;
};

// Owning holders of C API results, released (or freed) on scope exit.
struct OwnedString {
  char* s = nullptr;
  ~OwnedString() { kf_string_free(s); }
};

struct Concrete {
  kf_concrete c = nullptr;
  ~Concrete() { kf_concrete_release(c); }
};

struct Segmentation {
  kf_segmentation s = nullptr;
  ~Segmentation() { kf_segmentation_release(s); }
};

// Host inputs for `fusion` in input order: tensor inputs get the shapes of
// `shapes` ("32x64, 64"; "" or "()" for rank 0) in `layout` with seeded
// random data; scalar inputs get the values of `scalars` ("1e-5, 2").
std::vector<HostTensor> make_inputs(const Fusion& fusion, const FusionFile& file,
                                    const Options& options, std::string* description);

// "t0", "v5", ... (the names of kf_fusion_to_text) for value ids >= 0, and
// "t0.size(1)" for the negative ids of input extents.
std::map<int64_t, std::string> value_names(const Fusion& fusion);

// Per output: the input it updates in place (kf_output_alias), or -1.
std::vector<int64_t> output_aliases(const Fusion& fusion);

// Zero-filled host outputs in `layout` (not OutLayout::Kfuse) for these
// inputs, one per output: an output written in place (alias=k) gets no
// tensor of its own (empty shape and storage): callers pass input k there.
std::vector<HostTensor> caller_outputs(const Fusion& fusion, const std::vector<const DLTensor*>& inputs,
                                       OutLayout layout);
// The output DLTensors for kf_execute_into and kf_concretize_into: `own[i]`
// (placed on `device`), or input k's tensor for an output aliasing input k.
std::vector<DLTensor> output_tensors(const Fusion& fusion, std::vector<HostTensor>& own,
                                     const std::vector<const DLTensor*>& inputs, DLDevice device);

}  // namespace kfcli
