// Every generated unit of many fusions, compiled twice by NVRTC: as
// generated (the prelude part it uses, prelude_parts.h) and with the whole
// prelude instead; the CUBINs must be the same, byte for byte. Also the
// compile time of each. No GPU needed (CUBIN for sm_90).
//
// The fusions come from a manifest (bench/corpus/manifest.py: the corpus
// fusions with their inputs' and outputs' DLPack metadata, layouts
// included), planned as kf_concretize_into plans them (no output lines:
// kf_concretize; --files: fusion files, scalars 0). Units equal across fusions compile once. They compile in
// an order that takes every (corpus class, scheduler, kernel suffix) in
// turn, so a run cut short by --budget still covers every kind.
//
//   python3 bench/corpus/manifest.py --seed 730114261 > corpus.txt
//   build/bench/prelude_parts_bench [--jobs 2] [--budget SECONDS] [--dump DIR] [--list] corpus.txt...
//
// One line per unit (SAME, DIFF, FAIL: the part does not compile, FAIL_BOTH:
// neither compiles, SPLIT: the unit is not part + body), then a summary.
// Exit status 1 when any unit is DIFF, FAIL or SPLIT.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/codegen/emitters.h"
#include "core/codegen/prelude.h"
#include "core/codegen/prelude_parts.h"
#include "core/pipeline/plan.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/schedule/scheduler_kind.h"
#include "core/text/text_parser.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct TensorMeta {
  bool scalar = false;  // a scalar input: on the host, value 0
  uint8_t code = 0, bits = 0;
  std::vector<int64_t> shape, strides;
  uint64_t address = 0;
};

struct Entry {
  std::string name, cls, text;
  std::vector<TensorMeta> inputs, outputs;
  bool has_outputs = false;
};

TensorMeta tensor_meta(std::istringstream& in) {
  TensorMeta t;
  int code = 0, bits = 0, ndim = 0;
  in >> code >> bits >> ndim;
  t.code = static_cast<uint8_t>(code);
  t.bits = static_cast<uint8_t>(bits);
  t.shape.resize(ndim);
  t.strides.resize(ndim);
  for (auto& s : t.shape) in >> s;
  for (auto& s : t.strides) in >> s;
  in >> t.address;
  if (!in) throw std::runtime_error("malformed tensor line");
  return t;
}

std::vector<Entry> read_manifest(const char* file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read ") + file);
  std::vector<Entry> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "fusion") {
      out.emplace_back();
      ls >> out.back().name >> out.back().cls;
    } else if (word == "text") {
      size_t n = 0;
      ls >> n;
      out.back().text.resize(n);
      in.read(out.back().text.data(), static_cast<std::streamsize>(n));
    } else if (word == "in") {
      out.back().inputs.push_back(tensor_meta(ls));
    } else if (word == "scalar") {
      TensorMeta t;
      int code = 0, bits = 0;
      ls >> code >> bits;
      t.scalar = true;
      t.code = static_cast<uint8_t>(code);
      t.bits = static_cast<uint8_t>(bits);
      out.back().inputs.push_back(t);
    } else if (word == "out") {
      out.back().outputs.push_back(tensor_meta(ls));
      out.back().has_outputs = true;
    } else if (word != "end") {
      throw std::runtime_error(std::string(file) + ": unexpected line: " + line);
    }
  }
  return out;
}

DLTensor dl_of(TensorMeta& t) {
  alignas(16) static char zero[16] = {};
  DLTensor d{};
  d.data = t.scalar ? static_cast<void*>(zero) : reinterpret_cast<void*>(t.address);
  d.device = {t.scalar ? kDLCPU : kDLCUDA, 0};
  d.ndim = static_cast<int32_t>(t.shape.size());
  d.dtype = {t.code, t.bits, 1};
  d.shape = t.shape.data();
  d.strides = t.strides.data();
  return d;
}

// The plan kf_concretize_into (outputs given) or kf_concretize makes.
std::shared_ptr<kf::Plan> plan_entry(const kf::Fusion& fusion, Entry& e) {
  std::vector<DLTensor> ins, outs;
  for (auto& t : e.inputs) ins.push_back(dl_of(t));
  for (auto& t : e.outputs) outs.push_back(dl_of(t));
  std::vector<const DLTensor*> in_ptrs;
  std::vector<DLTensor*> out_ptrs;
  for (auto& t : ins) in_ptrs.push_back(&t);
  for (auto& t : outs) out_ptrs.push_back(&t);
  kf::Binding b = kf::bind_inputs(fusion, in_ptrs.data(), in_ptrs.size());
  auto p = kf::plan_for(fusion, b);
  if (e.has_outputs && !kf::outputs_in_plan_layout(fusion, *p->concrete, out_ptrs.data(), out_ptrs.size(), b)) {
    kf::bind_output_layouts(fusion, out_ptrs.data(), out_ptrs.size(), &b);
    p = kf::plan_for(fusion, b);
  }
  return p;
}

struct Unit {
  std::string fusion, cls, scheduler, suffix, kernel, source;
  size_t body = 0;  // where the prelude part ends
  bool split_ok = true;
};

// "kf_0123456789abcdef_long_edges" -> "_long_edges"
std::string suffix_of(const std::string& kernel) {
  return kernel.size() > 19 ? kernel.substr(19) : std::string();
}

struct Result {
  enum Kind { Same, Diff, Fail, FailBoth, Split } kind = Same;
  double part_ms = 0, whole_ms = 0;
  std::string why;
};

const char* kind_name(Result::Kind k) {
  switch (k) {
    case Result::Same: return "SAME";
    case Result::Diff: return "DIFF";
    case Result::Fail: return "FAIL";
    case Result::FailBoth: return "FAIL_BOTH";
    case Result::Split: return "SPLIT";
  }
  return "?";
}

// The first error lines of an NVRTC log.
std::string first_errors(const std::string& log) {
  std::istringstream in(log);
  std::string line, out;
  int n = 0;
  while (std::getline(in, line) && n < 3)
    if (line.find("error") != std::string::npos) {
      out += (out.empty() ? "" : " | ") + line;
      ++n;
    }
  return out.empty() ? log.substr(0, 300) : out;
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 2;
  double budget_s = 0;
  const char* dump = nullptr;
  bool list_only = false;
  std::vector<const char*> files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--jobs") && i + 1 < argc) jobs = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--budget") && i + 1 < argc) budget_s = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
    else if (!std::strcmp(argv[i], "--list")) list_only = true;
    else files.push_back(argv[i]);
  }
  setenv("CUDA_CACHE_DISABLE", "1", 1);  // NVRTC's own program cache: every compile is a compile
  const auto t_start = Clock::now();

  // Generate every unit of every fusion; equal units once.
  std::vector<Unit> units;
  std::unordered_map<std::string, size_t> seen;
  size_t fusions = 0, plan_errors = 0, emit_errors = 0, segments = 0, uses = 0;
  std::map<std::string, size_t> fusions_per_class;
  for (const char* file : files) {
    std::vector<Entry> entries = read_manifest(file);
    for (Entry& e : entries) {
      ++fusions;
      ++fusions_per_class[e.cls];
      std::shared_ptr<kf::Plan> plan;
      std::shared_ptr<const kf::Fusion> fusion;
      try {
        fusion = kf::parse_fusion(e.text);
        plan = plan_entry(*fusion, e);
      } catch (const std::exception& ex) {
        ++plan_errors;
        std::printf("PLAN_ERROR %s: %s\n", e.name.c_str(), ex.what());
        continue;
      }
      const kf::Segmentation& s = plan->segmentation;
      for (size_t k = 0; k < s.segments.size(); ++k) {
        const kf::Segment& seg = s.segments[k];
        if (!seg.schedule || seg.task.exprs.empty() || seg.scheduler == kf::SchedulerKind::Library) continue;
        ++segments;
        kf::KernelPlan kp;
        try {
          kp = kf::emit_segment_kernel(*plan->concrete, seg);
        } catch (const std::exception& ex) {
          ++emit_errors;
          std::printf("EMIT_ERROR %s segment %zu: %s\n", e.name.c_str(), k, ex.what());
          continue;
        }
        std::vector<const kf::KernelPlan::Unit*> all;
        for (const auto& u : kp.units) all.push_back(&u);
        for (const kf::KernelPlan& split : kp.split_rows)
          for (const auto& u : split.units) all.push_back(&u);
        for (const auto* u : all) {
          ++uses;
          if (seen.contains(u->source)) continue;
          seen.emplace(u->source, units.size());
          Unit x{e.name, e.cls, std::string(kf::scheduler_name(seg.scheduler)), suffix_of(u->kernel), u->kernel,
                 u->source};
          x.body = x.source.find("struct KfArgs {");
          x.split_ok = x.body != std::string::npos &&
                       x.source.compare(0, x.body, kf::prelude_for(std::string_view(x.source).substr(x.body))) == 0;
          units.push_back(std::move(x));
        }
      }
    }
  }
  const double generate_ms = ms_since(t_start);

  // Round robin over (class, scheduler, suffix): every kind early.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<size_t>> buckets;
  for (size_t i = 0; i < units.size(); ++i) buckets[{units[i].cls, units[i].scheduler, units[i].suffix}].push_back(i);
  std::vector<size_t> order;
  for (size_t round = 0; order.size() < units.size(); ++round)
    for (auto& [key, idx] : buckets)
      if (round < idx.size()) order.push_back(idx[round]);

  std::printf("# %zu fusions (%zu plan errors), %zu generated segments (%zu emit errors), %zu unit uses, %zu distinct "
              "units in %zu (class, scheduler, suffix) kinds; generated in %.1f s\n",
              fusions, plan_errors, segments, emit_errors, uses, units.size(), buckets.size(), generate_ms / 1000);
  for (const auto& [cls, n] : fusions_per_class) std::printf("#   class %s: %zu fusions\n", cls.c_str(), n);
  if (list_only) {
    for (const auto& [key, idx] : buckets)
      std::printf("#   kind %s %s %s: %zu units\n", std::get<0>(key).c_str(), std::get<1>(key).c_str(),
                  std::get<2>(key).empty() ? "(main)" : std::get<2>(key).c_str(), idx.size());
    for (size_t i : order) std::printf("UNIT %s %s\n", units[i].kernel.c_str(), units[i].fusion.c_str());
    return 0;
  }
  std::string why;
  if (!kf::cuda::nvrtc_available(&why)) {
    std::fprintf(stderr, "NVRTC is not available: %s\n", why.c_str());
    return 1;
  }
  std::fflush(stdout);

  const std::string whole(kf::cuda_prelude());
  std::vector<Result> results(units.size());
  std::vector<char> done(units.size(), 0);
  std::atomic<size_t> next{0};
  std::mutex print;
  const auto t_compile = Clock::now();
  auto worker = [&] {
    while (true) {
      if (budget_s > 0 && ms_since(t_start) > budget_s * 1000) return;
      const size_t n = next.fetch_add(1);
      if (n >= order.size()) return;
      const size_t i = order[n];
      const Unit& u = units[i];
      Result r;
      if (!u.split_ok) {
        r.kind = Result::Split;
      } else {
        kf::cuda::CompiledCode part, all;
        bool part_ok = true, all_ok = true;
        std::string part_log, all_log;
        auto t = Clock::now();
        try {
          part = kf::cuda::nvrtc_compile(u.source, u.kernel, 90);
        } catch (const std::exception& ex) {
          part_ok = false;
          part_log = ex.what();
        }
        r.part_ms = ms_since(t);
        t = Clock::now();
        try {
          all = kf::cuda::nvrtc_compile(whole + u.source.substr(u.body), u.kernel, 90);
        } catch (const std::exception& ex) {
          all_ok = false;
          all_log = ex.what();
        }
        r.whole_ms = ms_since(t);
        if (!part_ok && !all_ok) r.kind = Result::FailBoth, r.why = first_errors(all_log);
        else if (!part_ok) r.kind = Result::Fail, r.why = first_errors(part_log);
        else if (!all_ok) r.kind = Result::Diff, r.why = "the whole prelude fails: " + first_errors(all_log);
        else if (part.image != all.image || part.is_ptx != all.is_ptx || part.image.empty())
          r.kind = Result::Diff, r.why = std::to_string(part.image.size()) + " against " + std::to_string(all.image.size()) + " bytes";
      }
      if (dump != nullptr && r.kind != Result::Same) {
        std::ofstream(std::string(dump) + "/" + u.kernel + ".part.cu") << u.source;
        if (u.body != std::string::npos)
          std::ofstream(std::string(dump) + "/" + u.kernel + ".whole.cu") << whole + u.source.substr(u.body);
      }
      std::lock_guard<std::mutex> lock(print);
      results[i] = r;
      done[i] = 1;
      std::printf("%s %s %s %s %s %s %zu/%zu bytes %.1f/%.1f ms%s%s\n", kind_name(r.kind), u.kernel.c_str(),
                  u.fusion.c_str(), u.cls.c_str(), u.scheduler.c_str(), u.suffix.empty() ? "(main)" : u.suffix.c_str(),
                  u.source.size(), u.body == std::string::npos ? 0 : whole.size() + u.source.size() - u.body, r.part_ms,
                  r.whole_ms, r.why.empty() ? "" : ": ", r.why.c_str());
      std::fflush(stdout);
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  size_t counts[5] = {}, compiled = 0;
  double part_ms = 0, whole_ms = 0;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<size_t, size_t>> kinds;  // compiled, of
  std::map<std::string, size_t> schedulers;
  for (size_t i = 0; i < units.size(); ++i) {
    auto& k = kinds[{units[i].cls, units[i].scheduler, units[i].suffix}];
    ++k.second;
    if (!done[i]) continue;
    ++compiled;
    ++k.first;
    ++schedulers[units[i].scheduler];
    ++counts[results[i].kind];
    part_ms += results[i].part_ms;
    whole_ms += results[i].whole_ms;
  }
  size_t kinds_covered = 0;
  for (const auto& [key, c] : kinds) kinds_covered += c.first > 0;
  std::printf("# compiled %zu of %zu distinct units (%zu of %zu kinds) in %.1f s on %d threads: SAME %zu, DIFF %zu, "
              "FAIL %zu, FAIL_BOTH %zu, SPLIT %zu; NVRTC time with the part %.1f s, with the whole prelude %.1f s\n",
              compiled, units.size(), kinds_covered, kinds.size(), ms_since(t_compile) / 1000, jobs, counts[0], counts[1],
              counts[2], counts[3], counts[4], part_ms / 1000, whole_ms / 1000);
  for (const auto& [name, n] : schedulers) std::printf("#   scheduler %s: %zu units compiled\n", name.c_str(), n);
  return counts[Result::Diff] + counts[Result::Fail] + counts[Result::Split] > 0 ? 1 : 0;
}
