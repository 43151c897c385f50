#include "core/runtime/cuda/kernel_cache.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/runtime/cuda/bundle.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/util/debug_log.h"
#include "core/util/error.h"

namespace kf::cuda {

namespace {

std::atomic<uint64_t> memory_hits{0}, disk_hits{0}, compiles{0}, disk_stores{0};

// One loaded module; its mutex makes concurrent first uses compile once.
struct ModuleEntry {
  std::mutex mutex;
  CUmodule module = nullptr;
};

}  // namespace

Digest kernel_key(const std::string& source, int sm) {
  Sha256 h;
  h.update_field("kfuse kernel v" + std::to_string(kDiskFormatVersion));
  h.update_field(source);
  h.update_field("sm_" + std::to_string(sm));
  NvrtcVersion v = nvrtc_version();
  h.update_field("nvrtc " + std::to_string(v.major) + "." + std::to_string(v.minor));
  for (const std::string& o : nvrtc_options(sm))
    if (o.rfind("--include-path=", 0) != 0) h.update_field(o);
  return h.finish();
}

KernelImage kernel_image(const std::string& source, const std::string& name, int sm,
                         const DiskCache& disk) {
  return kernel_image(kernel_key(source, sm), source, name, sm, disk);
}

KernelImage kernel_image(const Digest& key, const std::string& source, const std::string& name,
                         int sm, const DiskCache& disk) {
  KernelImage out;
  const DebugStep lookup("compile");
  if (auto cached = disk.load(key)) {
    disk_hits.fetch_add(1, std::memory_order_relaxed);
    out.code = std::move(*cached);
    out.origin = ImageOrigin::Disk;
    if (lookup) lookup.done("disk cache hit " + name);
    return out;
  }
  if (lookup) lookup.done("disk cache miss " + name);
  const DebugStep compile("compile");
  CompiledCode compiled = nvrtc_compile(source, name, sm);
  compiles.fetch_add(1, std::memory_order_relaxed);
  if (compile) compile.done("nvrtc " + name + " (" + std::to_string(source.size()) + " bytes of source)");
  out.code.image = std::move(compiled.image);
  out.code.is_ptx = compiled.is_ptx;
  out.origin = ImageOrigin::Compiled;
  const DebugStep store("compile");
  out.stored = disk.store(key, out.code);
  if (out.stored) disk_stores.fetch_add(1, std::memory_order_relaxed);
  if (store) store.done("disk cache store " + name);
  return out;
}

const DiskCache& process_disk_cache() {
  static const DiskCache cache = DiskCache::from_environment();
  return cache;
}

namespace {

// The memory cache's entry for (device, key), created empty when missing.
std::shared_ptr<ModuleEntry> module_entry(int device, const Digest& key) {
  static std::mutex map_mutex;
  static std::map<std::pair<int, Digest>, std::shared_ptr<ModuleEntry>> modules;
  std::lock_guard lock(map_mutex);
  auto& slot = modules[{device, key}];
  if (!slot) slot = std::make_shared<ModuleEntry>();
  return slot;
}

}  // namespace

bool kernel_loaded(int device, const Digest& key) {
  std::shared_ptr<ModuleEntry> entry = module_entry(device, key);
  std::lock_guard lock(entry->mutex);
  return entry->module != nullptr;
}

CUfunction load_kernel(int device, const std::string& source, const std::string& name) {
  const int sm = device_info(device).sm;
  Digest key;
  if (const CachedImage* bundled = bundled_image(source, sm, &key)) {  // (no NVRTC: bundle.h)
    const KernelImage image{*bundled, ImageOrigin::Bundle, false};
    return load_kernel(device, key, source, name, &image);
  }
  return load_kernel(device, kernel_key(source, sm), source, name, nullptr);
}

CUfunction load_kernel(int device, const Digest& key, const std::string& source,
                       const std::string& name, const KernelImage* compiled) {
  ScopedContext context(device);
  const Driver& d = driver();
  const int sm = context.info().sm;
  std::shared_ptr<ModuleEntry> entry = module_entry(device, key);
  std::lock_guard lock(entry->mutex);
  if (entry->module != nullptr) {
    memory_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    KernelImage fresh;
    if (compiled == nullptr) fresh = kernel_image(key, source, name, sm, process_disk_cache());
    const KernelImage& image = compiled ? *compiled : fresh;
    const DebugStep step("compile");
    CUresult r = d.cuModuleLoadData_(&entry->module, image.code.image.data());
    if (step) step.done("cuModuleLoadData " + name);
    if (r != CUDA_SUCCESS) {
      entry->module = nullptr;
      fail(KF_ERR_BACKEND, "CUDA driver could not load kernel ", name, " (",
           image.origin == ImageOrigin::Disk     ? "from the disk cache " + process_disk_cache().path_of(key)
           : image.origin == ImageOrigin::Bundle ? std::string("from a loaded bundle")
                                                 : std::string("just compiled"),
           "): ", describe_result("cuModuleLoadData", r));
    }
  }
  CUfunction function = nullptr;
  check(d.cuModuleGetFunction_(&function, entry->module, name.c_str()), "cuModuleGetFunction");
  return function;
}

KernelCacheStats kernel_cache_stats() {
  return {memory_hits.load(), disk_hits.load(), compiles.load(), disk_stores.load()};
}

}  // namespace kf::cuda
