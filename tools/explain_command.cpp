// `kfuse explain`: what kfuse makes of a fusion file, stage by stage: the
// definition, its concretization for the given shapes, the segments in run
// order with their schedules and nested tasks (recognized patterns such as
// linear + bias + gelu_tanh, run as one library call) and (with --cuda) the
// CUDA C++ generated for each segment.
#include <cstdio>
#include <cstring>
#include <map>
#include <string_view>

#include "commands.h"
#include "fusion_file.h"

namespace kfcli {

namespace {

std::string id_list(const int64_t* ids, size_t n, const std::map<int64_t, std::string>& names) {
  if (n == 0) return "(none)";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
    auto it = names.find(ids[i]);
    if (it != names.end()) s += " " + it->second;
  }
  return s;
}

void print_indented(const std::string& text, int indent = 2) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::printf("%*s%.*s\n", indent, "", static_cast<int>(end - start), text.c_str() + start);
    start = end + 1;
  }
}

}  // namespace

int explain_command(const Options& options) {
  const FusionFile file = load_fusion_file(options.file);
  const Fusion fusion(file.text);
  std::printf("== definition (%s) ==\n", file.path.c_str());
  print_indented(fusion.text());

  std::string description;
  std::vector<HostTensor> inputs = make_inputs(fusion, file, options, &description);
  std::vector<DLTensor> dl;
  for (HostTensor& t : inputs) {
    dl.push_back(t.dl());
    // Concretization reads metadata only (never tensor data, except scalars),
    // so host buffers can stand in for GPU tensors here.
    if (options.cuda && !t.shape.empty()) dl.back().device = {kDLCUDA, 0};
  }
  std::vector<const DLTensor*> args;
  for (const DLTensor& t : dl) args.push_back(&t);

  std::printf("\n== concretization (%s; layout %s; outputs %s; %s tensors) ==\n", description.c_str(),
              layouts_name(options).c_str(), out_layout_name(options.out_layout),
              options.cuda ? "kDLCUDA" : "kDLCPU");
  Concrete concrete;
  if (options.out_layout == OutLayout::Kfuse) {
    check(kf_concretize(fusion.get(), args.data(), args.size(), &concrete.c), "kf_concretize");
  } else {
    // The plan kf_execute_into makes for outputs the caller allocated in
    // that order (host buffers stand in for GPU ones, as for the inputs).
    std::vector<HostTensor> own = caller_outputs(fusion, args, options.out_layout);
    const DLDevice device = options.cuda ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0};
    std::vector<DLTensor> outs = output_tensors(fusion, own, args, device);
    std::vector<DLTensor*> out_args;
    for (DLTensor& t : outs) out_args.push_back(&t);
    check(kf_concretize_into(fusion.get(), args.data(), args.size(), out_args.data(), out_args.size(), &concrete.c),
          "kf_concretize_into");
  }
  OwnedString described;
  check(kf_concrete_describe(concrete.c, &described.s), "kf_concrete_describe");
  print_indented(described.s);

  Segmentation seg;
  check(kf_segment(concrete.c, &seg.s), "kf_segment");
  size_t count = 0;
  check(kf_segmentation_count(seg.s, &count), "kf_segmentation_count");
  const auto names = value_names(fusion);
  std::printf("\n== segments: %zu ==\n", count);
  for (size_t k = 0; k < count; ++k) {
    kf_segment_info info{};
    info.struct_size = sizeof info;
    check(kf_segmentation_get(seg.s, k, &info), "kf_segmentation_get");
    std::printf("segment %zu: run order %zu, scheduler %s\n", k, info.run_order, info.scheduler);
    std::printf("  inputs:     %s\n", id_list(info.inputs, info.num_inputs, names).c_str());
    std::printf("  outputs:    %s\n", id_list(info.outputs, info.num_outputs, names).c_str());
    std::printf("  dead after: %s\n", id_list(info.dead_after, info.num_dead_after, names).c_str());
    for (size_t child = 0; child < info.num_children; ++child) {
      kf_task_info task{};
      task.struct_size = sizeof task;
      check(kf_segment_child(seg.s, k, child, &task), "kf_segment_child");
      std::printf("  nested task %zu: %s\n", child, task.pattern);
      std::printf("    inputs:   %s\n", id_list(task.inputs, task.num_inputs, names).c_str());
      std::printf("    outputs:  %s\n", id_list(task.outputs, task.num_outputs, names).c_str());
    }
    OwnedString schedule;
    if (kf_segment_schedule(seg.s, k, &schedule.s) == KF_OK)
      std::printf("  schedule:   %s%s\n", info.num_children > 0 ? "(epilogue fallback) " : "", schedule.s);
    // The schedulers that declined it first, each with its reason.
    OwnedString asked;
    if (kf_segment_schedulers(seg.s, k, &asked.s) == KF_OK)
      for (const char* line = asked.s; *line != '\0';) {
        const char* end = std::strchr(line, '\n');
        const std::string_view text(line, end != nullptr ? static_cast<size_t>(end - line) : std::strlen(line));
        constexpr std::string_view kDeclined = ": declined: ";
        if (const size_t at = text.find(kDeclined); at != std::string_view::npos) {
          const std::string_view why = text.substr(at + kDeclined.size());
          std::printf("  declined:   %.*s: %.*s\n", static_cast<int>(at), text.data(), static_cast<int>(why.size()), why.data());
        }
        if (end == nullptr) break;
        line = end + 1;
      }
    OwnedString text;
    check(kf_segment_to_text(seg.s, k, &text.s), "kf_segment_to_text");
    std::printf("  text:\n");
    print_indented(text.s, 4);
    if (!options.cuda) continue;
    std::printf("  cuda:\n");
    OwnedString source;
    const kf_status status = kf_segment_cuda_source(seg.s, k, &source.s);
    if (status == KF_OK) print_indented(source.s, 4);
    else std::printf("    %s: %s\n", kf_status_name(status), kf_last_error());
  }
  return 0;
}

}  // namespace kfcli
