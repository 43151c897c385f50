// The `kfuse` command line: run and check a fusion file, explain what kfuse
// makes of it, benchmark the suite on a GPU, print the version. Uses libkfuse through its C API only.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "args.h"
#include "commands.h"

namespace {

constexpr const char* kUsage = R"USAGE(usage:
  kfuse run FILE [options]      execute FILE on random inputs and check it
                                against a float64 evaluation on the CPU
                                (inputs drawn from --seed: floats uniform
                                in [-2, 2), integers 0 to 3, bools 0 or 1)
  kfuse explain FILE [options]  print the definition, its concretization and
                                its segments (--cuda: their CUDA C++ too)
  kfuse compile FILE... --arch sm_XY -o OUT [options]
                                write a kernel bundle: every kernel of each
                                FILE at each --shapes (repeatable; default
                                the file's '#! shapes:'), compiled for sm_XY
                                with NVRTC (no GPU needed); an application
                                loads it with kf_bundle_load and never
                                compiles those kernels (docs/cuda-runtime.md)
  kfuse bench [options]         time the benchmark suite on the GPU (kfuse
                                bench --help lists its options; exit status
                                3 when there is no GPU)
  kfuse version, kfuse --version
                                print the library's API version
  kfuse --help                  this text

options:
  --shapes "32x64, 64"   shapes of the tensor inputs, in input order ("()" for
                         rank 0); default: the file's '#! shapes:' line
  --scalars "1e-5, 2"    values of the scalar inputs, in input order; default:
                         the file's '#! scalars:' line
  --layout L             contiguous | transposed (reversed memory order) |
                         strided (every other element) | broadcast (stride 0
                         in dim 0 where its size is > 1); default contiguous;
                         a comma-separated list gives each tensor input its own
  --out-layout L         kfuse (default: kf_execute allocates the outputs in
                         the layout kfuse picks) | row-major | transposed
                         (reversed memory order): outputs the caller
                         allocates in that order (kf_execute_into; explain:
                         kf_concretize_into); in-place outputs stay their
                         inputs
  --seed N               seed of the random inputs (default 0)
  --device D             run: auto | cpu | cuda (default auto: the GPU when
                         the CUDA driver finds one, else the CPU)
  --cuda                 explain: concretize for kDLCUDA tensors and print
                         each segment's generated CUDA C++

exit status: 0 PASS (run) or success, 1 FAIL, 2 usage or input error (out
of memory too: shapes too large for the host or the device)
)USAGE";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "kfuse: %s\n(kfuse --help for usage)\n", message.c_str());
  return 2;
}

int version() {
  std::printf("kfuse: library API version %u, CLI built against API version %d\n", kf_version(),
              KF_API_VERSION);
  if (kf_check_version(KF_API_VERSION) != KF_OK) {
    std::printf("%s\n", kf_last_error());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using kfcli::Options;
  if (argc < 2) return usage_error("missing command");
  Options options;
  options.command = argv[1];
  if (options.command == "--help" || options.command == "-h" || options.command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (options.command == "version" || options.command == "--version") return version();
  if (options.command == "bench") return kfcli::bench_command(argc - 2, argv + 2);
  if (options.command != "run" && options.command != "explain" && options.command != "compile")
    return usage_error("unknown command '" + options.command + "'");
  const bool compile = options.command == "compile";

  kfcli::ArgReader args(argc, argv, 2);
  while (args.next()) {
    const std::string arg = args.name();
    auto next = [&] { return args.value(); };
    const bool has_value = args.has_value();
    try {
      if (arg == "--shapes" && compile) options.shapes_list.push_back(next());
      else if (arg == "--shapes") options.shapes = next();
      else if (arg == "--arch" && compile) {
        std::string v = next();
        if (v.rfind("sm_", 0) == 0) v = v.substr(3);
        char* end = nullptr;
        const long sm = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || sm < 80 || sm > 127)
          return usage_error("--arch expects sm_XY from sm_80 to sm_127 (or XY), got '" + args.raw() + "'");
        options.arch = static_cast<int>(sm);
      } else if ((arg == "-o" || arg == "--output") && compile) options.output = next();
      else if (arg == "--scalars") options.scalars = next();
      else if (arg == "--seed") {
        const std::string v = next();
        char* end = nullptr;
        options.seed = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0') return usage_error("--seed expects a number, got '" + v + "'");
      } else if (arg == "--layout") {
        const std::string v = next();
        options.layouts.clear();
        for (size_t at = 0; at <= v.size();) {
          const size_t comma = std::min(v.find(',', at), v.size());
          std::string one = v.substr(at, comma - at);
          one.erase(0, one.find_first_not_of(' '));
          one.erase(one.find_last_not_of(' ') + 1);
          if (!kfcli::parse_layout(one, &options.layout))
            return usage_error("unknown layout '" + one + "' (contiguous, transposed, strided, broadcast)");
          options.layouts.push_back(options.layout);
          at = comma + 1;
        }
        if (options.layouts.size() == 1) options.layouts.clear();
      } else if (arg == "--out-layout") {
        const std::string v = next();
        if (!kfcli::parse_out_layout(v, &options.out_layout))
          return usage_error("unknown output layout '" + v + "' (kfuse, row-major, transposed)");
      } else if (arg == "--device") {
        options.device = next();
        if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
          return usage_error("unknown device '" + options.device + "' (auto, cpu, cuda)");
      } else if (arg == "--cuda" && !has_value) {
        options.cuda = true;
      } else if (arg == "--help" || arg == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (arg.rfind("-", 0) == 0 || (!options.file.empty() && !compile)) {
        return usage_error("unexpected argument '" + args.raw() + "'");
      } else {
        if (options.file.empty()) options.file = arg;
        options.files.push_back(arg);
      }
    } catch (const std::string& message) {
      return usage_error(message);
    }
  }
  if (options.file.empty()) return usage_error(options.command + ": missing FILE");
  if (options.cuda && options.command != "explain") return usage_error("--cuda is an explain option");
  if (compile && options.arch == 0) return usage_error("compile: missing --arch sm_XY (the GPU's architecture)");
  if (compile && options.output.empty()) return usage_error("compile: missing -o OUT (the bundle to write)");

  try {
    return options.command == "run"       ? kfcli::run_command(options)
           : options.command == "compile" ? kfcli::compile_command(options)
                                          : kfcli::explain_command(options);
  } catch (const kfcli::CliError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "kfuse %s: %s: %s\n", options.command.c_str(), options.file.c_str(), e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // The CLI's own buffers (random inputs, the float64 reference): shapes
    // too large for this host are an input error, said like the library's
    // KF_ERR_OUT_OF_MEMORY, not a bare "std::bad_alloc" and a FAIL.
    std::fflush(stdout);
    std::fprintf(stderr, "kfuse %s: %s: KF_ERR_OUT_OF_MEMORY: out of host memory (the shapes are too large)\n",
                 options.command.c_str(), options.file.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "kfuse %s: %s: %s\n", options.command.c_str(), options.file.c_str(), e.what());
    return 1;
  }
}
