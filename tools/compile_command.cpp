// `kfuse compile`: an ahead-of-time kernel bundle (kf_bundle_*) for fusion
// files at given shape classes, so that an application loading it
// (kf_bundle_load) never compiles on a call's path. Needs NVRTC, no GPU.
#include <cstdio>

#include "commands.h"
#include "fusion_file.h"

namespace kfcli {

namespace {

struct Bundle {
  kf_bundle b = nullptr;
  ~Bundle() { kf_bundle_destroy(b); }
};

}  // namespace

int compile_command(const Options& options) {
  Bundle bundle;
  check(kf_bundle_create(options.arch, &bundle.b), "kf_bundle_create");
  size_t before = 0;
  for (const std::string& path : options.files) {
    const FusionFile file = load_fusion_file(path);
    const Fusion fusion(file.text);
    // Each --shapes a shape class of its own; none: the file's own shapes.
    std::vector<std::optional<std::string>> classes(options.shapes_list.begin(), options.shapes_list.end());
    if (classes.empty()) classes.push_back(std::nullopt);
    for (const std::optional<std::string>& shapes : classes) {
      Options one = options;
      one.shapes = shapes;
      std::string description;
      std::vector<HostTensor> inputs = make_inputs(fusion, file, one, &description);
      std::vector<DLTensor> dl;
      for (HostTensor& t : inputs) {
        dl.push_back(t.dl());
        // (Concretization reads metadata only: host buffers stand in for
        // GPU tensors, as for `kfuse explain --cuda`.)
        if (!t.shape.empty()) dl.back().device = {kDLCUDA, 0};
      }
      std::vector<const DLTensor*> args;
      for (const DLTensor& t : dl) args.push_back(&t);
      Concrete concrete;
      check(kf_concretize(fusion.get(), args.data(), args.size(), &concrete.c), "kf_concretize");
      check(kf_bundle_add(bundle.b, concrete.c), "kf_bundle_add");
      size_t now = 0;
      check(kf_bundle_count(bundle.b, &now), "kf_bundle_count");
      std::printf("%s (%s; layout %s): %zu kernels\n", file.path.c_str(), description.c_str(),
                  layouts_name(one).c_str(), now - before);
      before = now;
    }
  }
  check(kf_bundle_save(bundle.b, options.output.c_str()), "kf_bundle_save");
  std::printf("wrote %s: %zu kernels for sm_%d\n", options.output.c_str(), before, options.arch);
  return 0;
}

}  // namespace kfcli
