// `kfuse bench`: the benchmark suite of BENCHMARKS.md through the public C
// API. For each case (bench/cases/NAME.kf, the texts bench_torch.py runs too),
// dtype and shape: a check of the GPU result against kfuse's CPU backend on
// a few rows, then kf_execute_into timed with CUDA events on one stream
// (warm-up, then the median of --iters runs) on data far larger than L2.
// Bandwidth counts each input read once and each output written once; % SOL
// is against a device-to-device copy of 1 GiB measured here on the same GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numbers>
#include <sstream>

#include "args.h"
#include "commands.h"
#include "cuda_driver.h"
#include "fusion_file.h"

#ifndef KFUSE_BENCH_CASES_DIR
#define KFUSE_BENCH_CASES_DIR "bench/cases"
#endif

namespace kfcli {

namespace {

constexpr int kExitNoGpu = 3;

constexpr const char* kBenchUsage = R"USAGE(usage: kfuse bench [options]

Runs the benchmark suite (bench/cases/suite.txt) on GPU 0 through the C API:
per case a check against the CPU backend on a few rows, then the median time
of kf_execute_into over CUDA events, its GB/s and % of the copy bandwidth.

options (lists are comma-separated; every combination runs):
  --cases a,b         case names (default: the whole suite, in suite order)
  --rows M            rows M (default 32768)
  --cols N            columns N (default 8192)
  --dtype D           storage dtypes: bfloat16 | float16 | float32
                      (default bfloat16; math is float32 in every case)
  --iters K           timed runs per case, median reported (default 50)
  --warmup W          untimed runs before them (default 10)
  --check-rows R      rows of the checked shape (default 64; 0: no check)
  --out FILE          also write the table (markdown) to FILE
  --suite NAME        the case list NAME.txt in the cases folder (default
                      suite: the headline cases; training: the training
                      fusions)
  --cases-dir DIR     where the case lists and the NAME.kf files are
                      (default )USAGE" KFUSE_BENCH_CASES_DIR R"USAGE()
  --out-layout L      kfuse (default): each output in the layout kfuse
                      chooses (kf_execute's); row-major: compact row-major
                      outputs, as a framework allocates them
  --dry-run           no GPU needed: parse, concretize for kDLCUDA and
                      segment every configuration; print the table without
                      timings (CI runs this for every dtype)

exit status: 0 every case checked ok and timed, 1 a MISMATCH or an error in
some case (the others still run), 2 usage or case-file error, 3 no GPU
)USAGE";

// The storage dtype in the case files: replaced by the dtype under test.
constexpr const char* kTemplateDtype = "bfloat16";

struct BenchOptions {
  std::vector<std::string> cases;
  std::vector<int64_t> rows{32768};
  std::vector<int64_t> cols{8192};
  std::vector<kf_dtype> dtypes{KF_BFLOAT16};
  int iters = 50;
  int warmup = 10;
  int64_t check_rows = 64;
  std::string out;
  std::string cases_dir = KFUSE_BENCH_CASES_DIR;
  std::string suite = "suite";
  bool dry_run = false;
  // --out-layout row-major: the outputs are compact row-major tensors (what
  // a framework's torch.empty(shape) gives), whatever layout kfuse would
  // choose; the default gives each output kfuse's own layout.
  bool row_major_outputs = false;
};

struct BenchCase {
  std::string name;
  FusionFile file;                  // storage dtype written bfloat16
  std::vector<std::string> shapes;  // per tensor input: "MxN", "N", ...
};

struct Row {
  std::string name, shape, dtype, scheduler, check = "-", error;
  double ms = 0, bytes = 0;
  bool mismatch = false;
};

std::vector<std::string> split_list(const std::string& text, char sep = ',') {
  std::vector<std::string> parts;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) parts.push_back(item);
  }
  return parts;
}

int64_t parse_count(const std::string& text, const std::string& option, int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min)
    throw std::string(option + " expects whole numbers >= " + std::to_string(min) + ", got '" + text + "'");
  return v;
}

kf_dtype parse_storage(const std::string& name) {
  for (kf_dtype d : {KF_BFLOAT16, KF_FLOAT16, KF_FLOAT32})
    if (name == kf_dtype_name(d)) return d;
  throw std::string("unknown dtype '" + name + "' (bfloat16, float16, float32)");
}

// --- the cases -------------------------------------------------------------

std::vector<BenchCase> load_cases(const BenchOptions& o) {
  const std::string list = o.cases_dir + "/" + o.suite + ".txt";
  std::ifstream suite(list);
  if (!suite) throw CliError(KF_OK, "cannot read " + list + " (--suite, --cases-dir)");
  std::vector<std::string> names;
  std::string line;
  while (std::getline(suite, line)) {
    const std::vector<std::string> words = split_list(line, ' ');
    if (!words.empty() && words[0][0] != '#') names.push_back(words[0]);
  }
  if (!o.cases.empty()) {
    for (const std::string& c : o.cases)
      if (std::find(names.begin(), names.end(), c) == names.end())
        throw CliError(KF_OK, "unknown case '" + c + "' (not in " + list + ")");
    names = o.cases;
  }
  std::vector<BenchCase> cases;
  for (const std::string& name : names) {
    BenchCase c{name, load_fusion_file(o.cases_dir + "/" + name + ".kf"), {}};
    const auto bench = c.file.directives.find("bench");
    if (bench == c.file.directives.end())
      throw CliError(KF_OK, c.file.path + ": no '#! bench: MxN, ...' line");
    c.shapes = split_list(bench->second);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string case_text(const BenchCase& c, kf_dtype storage) {
  return replace_words(c.file.text, {kTemplateDtype}, kf_dtype_name(storage));
}

std::vector<std::vector<int64_t>> input_shapes(const BenchCase& c, int64_t m, int64_t n) {
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string& s : c.shapes) {
    std::vector<int64_t> shape;
    for (const std::string& d : split_list(s, 'x')) {
      if (d == "M" || d == "N") {
        shape.push_back(d == "M" ? m : n);
        continue;
      }
      char* end = nullptr;
      const long long literal = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || literal < 0)
        throw CliError(KF_OK, c.file.path + ": '#! bench:' sizes are M, N or whole numbers, got '" + d + "'");
      shape.push_back(literal);
    }
    shapes.push_back(shape);
  }
  return shapes;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// kDLCUDA tensors of `shapes` at the given addresses (compact strides).
std::vector<DLTensor> device_tensors(const Fusion& f, std::vector<std::vector<int64_t>>& shapes,
                                     const std::vector<void*>& data) {
  const std::vector<kf_value_info> infos = f.inputs();
  if (infos.size() != shapes.size())
    throw CliError(KF_OK, "the '#! bench:' line gives " + std::to_string(shapes.size()) +
                              " shapes for " + std::to_string(infos.size()) + " inputs");
  std::vector<DLTensor> t(infos.size());
  for (size_t i = 0; i < infos.size(); ++i)
    t[i] = DLTensor{data[i], {kDLCUDA, 0}, static_cast<int>(shapes[i].size()), dlpack_type(infos[i].dtype),
                    shapes[i].data(), nullptr, 0};
  return t;
}

std::vector<const DLTensor*> pointers(const std::vector<DLTensor>& t) {
  std::vector<const DLTensor*> p;
  for (const DLTensor& x : t) p.push_back(&x);
  return p;
}

// Output shapes for these inputs.
std::vector<std::vector<int64_t>> output_shapes(const Fusion& f, const std::vector<const DLTensor*>& in) {
  std::vector<std::vector<int64_t>> shapes;
  const std::vector<kf_value_info> outs = f.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    shapes.emplace_back(static_cast<size_t>(outs[i].rank));
    check(kf_output_shape(f.get(), in.data(), in.size(), i, shapes.back().data(), shapes.back().size()),
          "kf_output_shape");
  }
  return shapes;
}

// "pointwise", or "reduction+pointwise" for several segments in run order.
std::string schedulers(const Fusion& f, const std::vector<const DLTensor*>& in) {
  Concrete concrete;
  check(kf_concretize(f.get(), in.data(), in.size(), &concrete.c), "kf_concretize");
  Segmentation seg;
  check(kf_segment(concrete.c, &seg.s), "kf_segment");
  size_t count = 0;
  check(kf_segmentation_count(seg.s, &count), "kf_segmentation_count");
  std::string s;
  for (size_t k = 0; k < count; ++k) {
    kf_segment_info info{};
    info.struct_size = sizeof info;
    check(kf_segmentation_get(seg.s, k, &info), "kf_segmentation_get");
    s += (k ? "+" : "") + std::string(info.scheduler);
  }
  return s;
}

// --- device memory and data -----------------------------------------------

struct DeviceBuffers {
  CudaDriver& driver;
  std::vector<void*> ptrs;
  explicit DeviceBuffers(CudaDriver& d) : driver(d) {}
  ~DeviceBuffers() {
    for (void* p : ptrs) driver.release(p);
  }
  void* allocate(size_t bytes) {
    ptrs.push_back(driver.allocate(bytes));
    return ptrs.back();
  }
};

// Normally distributed values (mean 0, std 1, like torch.randn in
// bench_torch.py) stored as one dtype. Large inputs are filled with chunks
// of this pool at seeded offsets: deterministic, and fast enough for
// gigabytes, where generating every element on the host would take minutes.
class ValuePool {
 public:
  static constexpr size_t kElements = size_t{1} << 22;
  static constexpr size_t kChunk = size_t{1} << 18;

  explicit ValuePool(kf_dtype dtype) : dtype_(dtype), bytes_(static_cast<size_t>(dtype_bytes(dtype))) {
    Rng rng(0x6b66757365);
    data_.resize(kElements * bytes_);
    for (size_t i = 0; i < kElements; i += 2) {
      const double r = std::sqrt(-2.0 * std::log(1.0 - rng.uniform(0.0, 1.0)));
      const double a = 2.0 * std::numbers::pi * rng.uniform(0.0, 1.0);
      store_element(dtype, &data_[i * bytes_], r * std::cos(a));
      store_element(dtype, &data_[(i + 1) * bytes_], r * std::sin(a));
    }
  }

  // Writes `elements` values to device memory at `dst`.
  void fill(CudaDriver& driver, void* dst, size_t elements, Rng& rng) const {
    for (size_t done = 0; done < elements; done += kChunk) {
      const size_t n = std::min(kChunk, elements - done);
      const size_t start = rng.next() % (kElements - kChunk + 1);
      driver.to_device(static_cast<std::byte*>(dst) + done * bytes_, &data_[start * bytes_], n * bytes_);
    }
  }

 private:
  kf_dtype dtype_;
  size_t bytes_;
  std::vector<std::byte> data_;
};

const ValuePool& pool_for(kf_dtype dtype) {
  static std::map<kf_dtype, std::unique_ptr<ValuePool>> pools;
  auto& p = pools[dtype];
  if (!p) p = std::make_unique<ValuePool>(dtype);
  return *p;
}

// --- timing -----------------------------------------------------------------

// Median milliseconds of `iters` runs of `launch` on `stream`, each between
// two CUDA events, after `warmup` untimed runs.
double median_ms(CudaDriver& d, void* stream, int warmup, int iters, const std::function<void()>& launch) {
  for (int i = 0; i < warmup; ++i) launch();
  d.synchronize_stream(stream);
  std::vector<void*> events;
  struct Release {
    CudaDriver& d;
    std::vector<void*>& e;
    ~Release() {
      for (void* x : e) d.destroy_event(x);
    }
  } release{d, events};
  for (int i = 0; i < 2 * iters; ++i) events.push_back(d.create_event());
  for (int i = 0; i < iters; ++i) {
    d.record_event(events[2 * i], stream);
    launch();
    d.record_event(events[2 * i + 1], stream);
  }
  d.synchronize_stream(stream);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) ms.push_back(d.elapsed_ms(events[2 * i], events[2 * i + 1]));
  std::sort(ms.begin(), ms.end());
  const size_t h = ms.size() / 2;
  return ms.size() % 2 ? ms[h] : (ms[h - 1] + ms[h]) / 2;
}

// GB/s of a device-to-device copy of 1 GiB, counting bytes read + written.
double copy_ceiling_gbs(CudaDriver& d, void* stream, const BenchOptions& o) {
  constexpr size_t kBytes = size_t{1} << 30;
  DeviceBuffers b(d);
  void* src = b.allocate(kBytes);
  void* dst = b.allocate(kBytes);
  d.fill_async(src, 0, kBytes, stream);
  const double ms = median_ms(d, stream, o.warmup, o.iters, [&] { d.copy_async(dst, src, kBytes, stream); });
  return 2.0 * kBytes / (ms * 1e-3) / 1e9;
}

// --- one configuration ----------------------------------------------------

// Relative error allowed between the GPU and the CPU backend, by output
// dtype, against max(1, max |reference|): the rule of bench_torch.py.
double tolerance(kf_dtype dtype) {
  switch (dtype) {
    case KF_FLOAT32: return 1e-4;
    case KF_FLOAT16: return 5e-3;
    case KF_BFLOAT16: return 2e-2;
    case KF_FLOAT8_E4M3FN: return 0.15;
    case KF_FLOAT8_E5M2: return 0.3;
    default: return 0;
  }
}

// Device outputs laid out as kf_execute lays them out for these inputs (it
// runs once to see): outputs follow their inputs' layouts, e.g. x^T + z
// writes column-major like torch's eager result, so kfuse bench and
// bench_torch.py time the same layout. kf_execute_into then writes them.
// An output that updates an input in place (kf_output_alias) is that
// input's own tensor, as a framework's in-place op passes it.
struct DeviceOutputs {
  std::vector<std::vector<int64_t>> shapes, strides;
  std::vector<size_t> bytes;  // span of each, from its strides
  std::vector<int64_t> alias;  // per output: the input it updates, or -1
  std::vector<DLTensor> tensors;
  std::vector<DLTensor*> args;
};

void allocate_outputs(CudaDriver& d, void* stream, DeviceBuffers& mem, const Fusion& f,
                      const std::vector<const DLTensor*>& in, DeviceOutputs* out, bool row_major) {
  const std::vector<kf_value_info> infos = f.outputs();
  std::vector<DLManagedTensor*> produced(infos.size(), nullptr);
  struct Release {
    std::vector<DLManagedTensor*>& t;
    ~Release() {
      for (DLManagedTensor* x : t)
        if (x != nullptr && x->deleter != nullptr) x->deleter(x);
    }
  } release{produced};
  const kf_exec_options opts{sizeof(kf_exec_options), stream, nullptr, nullptr};
  check(kf_execute(f.get(), in.data(), in.size(), produced.data(), produced.size(), &opts), "kf_execute");
  d.synchronize_stream(stream);
  for (DLManagedTensor* m : produced) {
    const DLTensor& t = m->dl_tensor;
    out->shapes.emplace_back(t.shape, t.shape + t.ndim);
    out->strides.emplace_back(static_cast<size_t>(t.ndim), 1);
    auto& st = out->strides.back();
    for (int k = t.ndim - 1; k >= 0; --k)
      st[k] = t.strides && !row_major ? t.strides[k] : (k + 1 < t.ndim ? st[k + 1] * std::max<int64_t>(t.shape[k + 1], 1) : 1);
  }
  out->alias = output_aliases(f);
  for (size_t i = 0; i < infos.size(); ++i) {  // the vectors above no longer move
    DLTensor t{nullptr, {kDLCUDA, 0}, infos[i].rank, dlpack_type(infos[i].dtype), out->shapes[i].data(),
               out->strides[i].data(), 0};
    if (out->alias[i] >= 0) t = *in[static_cast<size_t>(out->alias[i])];
    out->bytes.push_back(span_bytes(t));
    if (out->alias[i] < 0) t.data = mem.allocate(out->bytes.back());
    out->tensors.push_back(t);
  }
  for (DLTensor& t : out->tensors) out->args.push_back(&t);
}

// The GPU result against the CPU backend's on `rows` x N (the same inputs,
// uniform in [-2, 2)): "ok" or "MISMATCH <max error in tolerances>".
std::string check_case(CudaDriver& d, void* stream, const Fusion& f, const BenchCase& c, int64_t rows,
                       int64_t cols, bool row_major, bool* mismatch) {
  std::vector<std::vector<int64_t>> shapes = input_shapes(c, rows, cols);
  const std::vector<kf_value_info> infos = f.inputs();
  Rng rng(0);
  std::vector<HostTensor> host;
  for (size_t i = 0; i < shapes.size() && i < infos.size(); ++i)
    host.push_back(random_tensor(infos[i].dtype, shapes[i], Layout::Contiguous, rng));
  std::vector<DLTensor> cpu_in;
  for (HostTensor& t : host) cpu_in.push_back(t.dl());
  const std::vector<const DLTensor*> cpu_args = pointers(cpu_in);

  DeviceBuffers mem(d);
  std::vector<void*> data;
  for (const HostTensor& t : host) {
    data.push_back(mem.allocate(t.storage.size()));
    d.to_device(data.back(), t.storage.data(), t.storage.size());
  }
  const std::vector<DLTensor> gpu_in = device_tensors(f, shapes, data);
  const std::vector<const DLTensor*> gpu_args = pointers(gpu_in);
  DeviceOutputs got;
  allocate_outputs(d, stream, mem, f, gpu_args, &got, row_major);
  // Its kf_execute updated in-place inputs: start again from the same values.
  for (size_t i = 0; i < host.size(); ++i) d.to_device(data[i], host[i].storage.data(), host[i].storage.size());
  for (size_t i = 0; i < got.tensors.size(); ++i)
    if (got.alias[i] < 0) d.fill_async(got.tensors[i].data, 0xff, got.bytes[i], stream);  // NaN where never written
  const kf_exec_options opts{sizeof(kf_exec_options), stream, nullptr, nullptr};
  check(kf_execute_into(f.get(), gpu_args.data(), gpu_args.size(), got.args.data(), got.args.size(), &opts),
        "kf_execute_into (check shape)");
  d.synchronize_stream(stream);

  // The reference: the CPU backend, compact outputs.
  const std::vector<kf_value_info> outs = f.outputs();
  std::vector<HostTensor> want;
  std::vector<DLTensor> want_dl;
  std::vector<DLTensor*> want_args;
  for (size_t i = 0; i < outs.size(); ++i) want.push_back(zeros(outs[i].dtype, got.shapes[i]));
  for (size_t i = 0; i < outs.size(); ++i)  // in place on the CPU too
    want_dl.push_back(got.alias[i] >= 0 ? cpu_in[static_cast<size_t>(got.alias[i])] : want[i].dl());
  for (DLTensor& t : want_dl) want_args.push_back(&t);
  check(kf_execute_into(f.get(), cpu_args.data(), cpu_args.size(), want_args.data(), want_args.size(), nullptr),
        "kf_execute_into (CPU backend)");

  double worst = 0;  // in units of the tolerance: > 1 fails
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<std::byte> bytes(got.bytes[i]);
    d.to_host(bytes.data(), got.tensors[i].data, bytes.size());
    DLTensor host_got = got.tensors[i];
    host_got.data = bytes.data();
    host_got.device = {kDLCPU, 0};
    const std::vector<double> a = read_values(host_got), r = read_values(want_dl[i]);
    double err = 0, scale = 1;
    for (size_t k = 0; k < a.size(); ++k) {
      if (std::isfinite(r[k])) scale = std::max(scale, std::fabs(r[k]));
      if (a[k] == r[k] || (std::isnan(a[k]) && std::isnan(r[k]))) continue;
      const double e = std::fabs(a[k] - r[k]);  // NaN or inf where only one is finite
      err = std::isfinite(e) ? std::max(err, e) : INFINITY;
    }
    if (err > 0) worst = std::max(worst, err / (scale * tolerance(outs[i].dtype)));
  }
  *mismatch = !(worst <= 1);
  if (!*mismatch) return "ok";
  if (!std::isfinite(worst)) return "MISMATCH (NaN or inf)";
  char text[64];
  std::snprintf(text, sizeof text, "MISMATCH %.3gx tol", worst);
  return text;
}

void run_config(CudaDriver* d, void* stream, const BenchOptions& o, const BenchCase& c, kf_dtype dtype,
                int64_t m, int64_t n, Row* row) {
  const Fusion f(case_text(c, dtype));
  std::vector<std::vector<int64_t>> shapes = input_shapes(c, m, n);
  const std::vector<kf_value_info> infos = f.inputs();
  std::vector<void*> data(shapes.size(), nullptr);
  std::unique_ptr<DeviceBuffers> mem;
  if (d != nullptr) {
    mem = std::make_unique<DeviceBuffers>(*d);
    Rng rng(1);
    for (size_t i = 0; i < shapes.size() && i < infos.size(); ++i) {
      const size_t elements = static_cast<size_t>(numel(shapes[i]));
      data[i] = mem->allocate(elements * static_cast<size_t>(dtype_bytes(infos[i].dtype)));
      if (infos[i].dtype == KF_INT64) {
        // Class labels and indices: uniform in [0, the first input's last
        // dim), as bench_torch.py draws them (training.txt).
        const int64_t classes = shapes[0].empty() ? 1 : std::max<int64_t>(shapes[0].back(), 1);
        std::vector<int64_t> labels(elements);
        for (int64_t& l : labels) l = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(classes));
        d->to_device(data[i], labels.data(), elements * sizeof(int64_t));
      } else {
        pool_for(infos[i].dtype).fill(*d, data[i], elements, rng);
      }
    }
  } else {
    // --dry-run: concretization reads metadata only; this address (aligned
    // like a cuMemAlloc result) is never dereferenced.
    for (void*& p : data) p = reinterpret_cast<void*>(uintptr_t{1} << 32);
  }
  const std::vector<DLTensor> in = device_tensors(f, shapes, data);
  const std::vector<const DLTensor*> args = pointers(in);
  row->scheduler = schedulers(f, args);

  const std::vector<std::vector<int64_t>> out_shapes = output_shapes(f, args);
  const std::vector<kf_value_info> outs = f.outputs();
  for (size_t i = 0; i < in.size(); ++i) row->bytes += double(numel(shapes[i])) * dtype_bytes(infos[i].dtype);
  for (size_t i = 0; i < outs.size(); ++i) row->bytes += double(numel(out_shapes[i])) * dtype_bytes(outs[i].dtype);
  if (d == nullptr) return;

  if (o.check_rows > 0)
    row->check = check_case(*d, stream, f, c, std::min(o.check_rows, m), n, o.row_major_outputs, &row->mismatch);

  DeviceOutputs out;
  allocate_outputs(*d, stream, *mem, f, args, &out, o.row_major_outputs);  // the first call compiles (or loads the kernel cache)
  const kf_exec_options opts{sizeof(kf_exec_options), stream, nullptr, nullptr};
  auto launch = [&] {
    check(kf_execute_into(f.get(), args.data(), args.size(), out.args.data(), out.args.size(), &opts),
          "kf_execute_into");
  };
  launch();
  d->synchronize_stream(stream);
  row->ms = median_ms(*d, stream, o.warmup, o.iters, launch);
}

// --- the table --------------------------------------------------------------

std::string table(const std::vector<Row>& rows, const std::vector<std::string>& header, double ceiling,
                  double l2_bytes, bool dry_run) {
  std::string t;
  for (const std::string& h : header) t += h + "\n";
  t += "\n| case | shape | dtype | scheduler | check | ms | GB/s | % SOL | MB moved |\n";
  t += "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  bool in_l2 = false;
  char buf[512];
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      t += "| " + r.name + " | " + r.shape + " | " + r.dtype + " | " + r.scheduler + " | ERROR: " + r.error +
           " | | | | |\n";
      continue;
    }
    if (dry_run || r.ms <= 0) {
      std::snprintf(buf, sizeof buf, "| %s | %s | %s | %s | %s | - | - | - | %.1f |\n", r.name.c_str(),
                    r.shape.c_str(), r.dtype.c_str(), r.scheduler.c_str(), r.check.c_str(), r.bytes / 1e6);
    } else {
      const double gbs = r.bytes / (r.ms * 1e-3) / 1e9;
      const bool small = r.bytes < 4 * l2_bytes;
      in_l2 = in_l2 || small;
      std::snprintf(buf, sizeof buf, "| %s | %s | %s | %s | %s | %.3f | %.0f%s | %.1f | %.1f |\n",
                    r.name.c_str(), r.shape.c_str(), r.dtype.c_str(), r.scheduler.c_str(), r.check.c_str(),
                    r.ms, gbs, small ? "*" : "", gbs / ceiling * 100, r.bytes / 1e6);
    }
    t += buf;
  }
  if (in_l2) {
    std::snprintf(buf, sizeof buf, "\n* moves less than 4x the L2 cache (%.0f MiB): cache hits may inflate GB/s\n",
                  l2_bytes / (1 << 20));
    t += buf;
  }
  return t;
}

BenchOptions parse_bench_options(int argc, char** argv, bool* help) {
  BenchOptions o;
  ArgReader args(argc, argv, 0);
  while (args.next()) {
    const std::string arg = args.name();
    auto next = [&] { return args.value(); };
    auto counts = [&](int64_t min) {
      std::vector<int64_t> v;
      for (const std::string& s : split_list(next())) v.push_back(parse_count(s, arg, min));
      if (v.empty()) throw std::string(arg + " needs at least one value");
      return v;
    };
    if (arg == "--cases") o.cases = split_list(next());
    else if (arg == "--rows") o.rows = counts(1);
    else if (arg == "--cols") o.cols = counts(1);
    else if (arg == "--dtype") {
      o.dtypes.clear();
      for (const std::string& s : split_list(next())) o.dtypes.push_back(parse_storage(s));
      if (o.dtypes.empty()) throw std::string("--dtype needs at least one value");
    } else if (arg == "--iters") o.iters = static_cast<int>(parse_count(next(), arg, 1));
    else if (arg == "--warmup") o.warmup = static_cast<int>(parse_count(next(), arg, 0));
    else if (arg == "--check-rows") o.check_rows = parse_count(next(), arg, 0);
    else if (arg == "--out") o.out = next();
    else if (arg == "--cases-dir") o.cases_dir = next();
    else if (arg == "--suite") o.suite = next();
    else if (arg == "--out-layout") {
      const std::string v = next();
      if (v != "kfuse" && v != "row-major") throw std::string("--out-layout: expected kfuse or row-major, got '" + v + "'");
      o.row_major_outputs = v == "row-major";
    }
    else if (arg == "--dry-run" && !args.has_value()) o.dry_run = true;
    else if (arg == "--help" || arg == "-h") *help = true;
    else throw std::string("unexpected argument '" + args.raw() + "'");
  }
  return o;
}

}  // namespace

int bench_command(int argc, char** argv) {
  BenchOptions o;
  try {
    bool help = false;
    o = parse_bench_options(argc, argv, &help);
    if (help) {
      std::fputs(kBenchUsage, stdout);
      return 0;
    }
  } catch (const std::string& message) {
    std::fprintf(stderr, "kfuse bench: %s\n(kfuse bench --help for usage)\n", message.c_str());
    return 2;
  }
  std::vector<BenchCase> cases;
  try {
    cases = load_cases(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfuse bench: %s\n", e.what());
    return 2;
  }

  std::unique_ptr<CudaDriver> driver;
  void* stream = nullptr;
  std::vector<std::string> header;
  double ceiling = 0, l2 = 0;
  if (!o.dry_run) {
    std::string why;
    driver = CudaDriver::open(&why);
    if (!driver) {
      std::fprintf(stderr,
                   "kfuse bench: no GPU: %s.\nkfuse bench times kernels on a CUDA device; --dry-run "
                   "lists the configurations and their segments without one.\n",
                   why.c_str());
      return kExitNoGpu;
    }
  }
  struct StreamGuard {
    CudaDriver* d;
    void*& s;
    ~StreamGuard() {
      if (d != nullptr && s != nullptr) d->destroy_stream(s);
    }
  } guard{driver.get(), stream};
  char line[256];
  try {
    if (driver) {
      stream = driver->create_stream();
      l2 = driver->attribute(CudaDriver::kL2CacheSize);
      std::snprintf(line, sizeof line, "device: %s (L2 %.0f MiB)", driver->device_name().c_str(), l2 / (1 << 20));
      header.push_back(line);
      ceiling = copy_ceiling_gbs(*driver, stream, o);
      std::snprintf(line, sizeof line,
                    "copy ceiling: %.0f GB/s (cuMemcpyDtoDAsync of 1 GiB, read + write, median of %d)",
                    ceiling, o.iters);
      header.push_back(line);
      std::snprintf(line, sizeof line,
                    "timing: CUDA events around each kf_execute_into on one stream, %d warm-up runs, "
                    "median of %d",
                    o.warmup, o.iters);
      header.push_back(line);
      std::snprintf(line, sizeof line, "check: GPU against the CPU backend on %lld rows x N",
                    static_cast<long long>(o.check_rows));
      header.push_back(o.check_rows > 0 ? line : "check: off (--check-rows 0)");
      header.push_back(o.row_major_outputs ? "outputs: compact row-major (--out-layout row-major)"
                                           : "outputs: in kfuse's own layout (kf_execute's)");
    } else {
      header.push_back("dry run: no GPU used (scheduler from segmenting for kDLCUDA inputs)");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfuse bench: %s\n", e.what());
    return 1;
  }
  for (const std::string& h : header) std::fprintf(stderr, "%s\n", h.c_str());

  std::vector<Row> rows;
  bool failed = false;
  for (const BenchCase& c : cases)
    for (kf_dtype dtype : o.dtypes)
      for (int64_t m : o.rows)
        for (int64_t n : o.cols) {
          Row r;
          r.name = c.name;
          r.shape = std::to_string(m) + "x" + std::to_string(n);
          r.dtype = kf_dtype_name(dtype);
          try {
            run_config(driver.get(), stream, o, c, dtype, m, n, &r);
          } catch (const std::exception& e) {
            r.error = e.what();
            for (char& ch : r.error)  // one table cell
              if (ch == '|' || ch == '\n') ch = ch == '|' ? '/' : ' ';
            // One failing case must not hide the others; leave the stream usable.
            if (driver) {
              try {
                driver->synchronize_stream(stream);
              } catch (const std::exception&) {
              }
            }
          }
          failed = failed || r.mismatch || !r.error.empty();
          std::fprintf(stderr, "%s %s %s: %s\n", r.name.c_str(), r.shape.c_str(), r.dtype.c_str(),
                       !r.error.empty() ? ("ERROR: " + r.error).c_str()
                       : o.dry_run      ? r.scheduler.c_str()
                                        : (r.check + ", " + std::to_string(r.ms) + " ms").c_str());
          rows.push_back(std::move(r));
        }

  const std::string text = table(rows, header, ceiling, l2, o.dry_run);
  std::fputs(text.c_str(), stdout);
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    out << text;
    if (!out) {
      std::fprintf(stderr, "kfuse bench: cannot write %s\n", o.out.c_str());
      return 2;
    }
  }
  return failed ? 1 : 0;
}

}  // namespace kfcli
