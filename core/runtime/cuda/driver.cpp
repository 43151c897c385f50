#include "core/runtime/cuda/driver.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "core/runtime/cuda/dynlib.h"
#include "core/util/error.h"

namespace kf::cuda {

namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);
using InitFn = CUresult (*)(unsigned int);

struct LoadResult {
  Driver driver;
  kf_status status = KF_OK;
  std::string message;
};

std::string result_text(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName_) d.cuGetErrorName_(r, &name);
  if (d.cuGetErrorString_) d.cuGetErrorString_(r, &text);
  // The stub library cannot name its own error.
  if (name == nullptr && r == CUDA_ERROR_STUB_LIBRARY) name = "CUDA_ERROR_STUB_LIBRARY";
  std::string s = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

// Loads libcuda and resolves every function; fills `out.status` on failure.
void load(LoadResult& out) {
  const DynLib lib = open_library(CudaLibrary::Driver);
  if (lib.handle == nullptr) {
    out.status = KF_ERR_NO_DEVICE;
    out.message = "no CUDA driver: libcuda.so.1 could not be loaded (" + lib.errors.front() +
                  "); kDLCUDA tensors need an NVIDIA driver";
    return;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(find_symbol(lib, "cuGetProcAddress_v2"));
  auto resolve = [&](const char* name, const char* versioned) -> void* {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
    if (get_proc && get_proc(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) ==
                        CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS)
      return fn;
    return find_symbol(lib, versioned);  // drivers without cuGetProcAddress_v2
  };
  auto init = reinterpret_cast<InitFn>(resolve("cuInit", "cuInit"));
  Driver& d = out.driver;
#define KF_STR2(x) #x
#define KF_STR(x) KF_STR2(x)
#define KF_CUDA_RESOLVE(name)                                                   \
  d.name##_ = reinterpret_cast<decltype(d.name##_)>(resolve(#name, KF_STR(name))); \
  if (d.name##_ == nullptr) missing.push_back(#name);
  std::vector<std::string> missing;
  KF_CUDA_DRIVER_FUNCTIONS(KF_CUDA_RESOLVE)
#undef KF_CUDA_RESOLVE
#undef KF_STR
#undef KF_STR2
  if (init == nullptr) missing.insert(missing.begin(), "cuInit");
  if (!missing.empty()) {
    out.status = KF_ERR_NO_DEVICE;
    out.message = "no CUDA driver: libcuda.so.1 lacks " + missing.front() +
                  " (driver too old for kfuse, which needs CUDA 12 or newer)";
    return;
  }
  CUresult r = init(0);
  if (r != CUDA_SUCCESS) {
    // The stub library, no device, an old driver: all mean "no usable GPU".
    out.status = KF_ERR_NO_DEVICE;
    out.message = (r == CUDA_ERROR_STUB_LIBRARY
                       ? "no CUDA driver: libcuda.so.1 is the CUDA toolkit's stub, not a real driver (cuInit: "
                       : "no CUDA device: libcuda.so.1 loaded, but cuInit failed (") +
                  result_text(d, r) + ")";
    return;
  }
  d.cuDriverGetVersion_(&d.version);
  r = d.cuDeviceGetCount_(&d.device_count);
  if (r != CUDA_SUCCESS || d.device_count <= 0) {
    out.status = KF_ERR_NO_DEVICE;
    out.message = "no CUDA device: the driver reports " +
                  (r == CUDA_SUCCESS ? std::string("0 devices") : result_text(d, r));
  }
}

const LoadResult& loaded() {
  static const LoadResult* result = [] {
    auto* r = new LoadResult;  // never freed: the driver outlives static destructors
    load(*r);
    return r;
  }();
  return *result;
}

// kfuse's pool on `device` (DeviceInfo::pool): device memory, keeping what
// KFUSE_POOL_RELEASE_THRESHOLD says (bytes; default all) past a
// synchronization. nullptr where the driver refuses one: allocations then
// take the default pool.
CUmemoryPool create_pool(CUdevice device) {
  const Driver& d = driver();
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool = nullptr;
  if (d.cuMemPoolCreate_(&pool, &props) != CUDA_SUCCESS) return nullptr;
  cuuint64_t keep = ~cuuint64_t{0};
  if (const char* v = std::getenv("KFUSE_POOL_RELEASE_THRESHOLD"); v != nullptr && *v != '\0')
    keep = std::strtoull(v, nullptr, 10);
  d.cuMemPoolSetAttribute_(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  return pool;
}

}  // namespace

const Driver& driver() {
  const LoadResult& r = loaded();
  if (r.status != KF_OK) throw Error(r.status, r.message);
  return r.driver;
}

bool driver_available(std::string* why) {
  const LoadResult& r = loaded();
  if (why) *why = r.message;
  return r.status == KF_OK;
}

std::string describe_result(const char* function, CUresult r) {
  return std::string(function) + ": " + result_text(loaded().driver, r);
}

void check(CUresult r, const char* function) {
  if (r == CUDA_SUCCESS) return;
  throw Error(r == CUDA_ERROR_OUT_OF_MEMORY ? KF_ERR_OUT_OF_MEMORY : KF_ERR_BACKEND,
              "CUDA driver call failed: " + describe_result(function, r));
}

const DeviceInfo& device_info(int device) {
  const Driver& d = driver();
  if (device < 0 || device >= d.device_count)
    fail(KF_ERR_NO_DEVICE, "no CUDA device ", device, ": the driver reports ", d.device_count,
         " device(s)");
  // One slot per device, filled once under the mutex and then read without
  // it (every launch asks); entries are never freed (contexts stay retained
  // for the life of the process).
  static std::mutex mutex;
  static const std::unique_ptr<std::atomic<const DeviceInfo*>[]> infos(
      new std::atomic<const DeviceInfo*>[static_cast<size_t>(d.device_count)]());
  std::atomic<const DeviceInfo*>& slot = infos[static_cast<size_t>(device)];
  if (const DeviceInfo* known = slot.load(std::memory_order_acquire)) return *known;
  std::lock_guard lock(mutex);
  if (const DeviceInfo* known = slot.load(std::memory_order_acquire)) return *known;
  auto info = std::make_unique<DeviceInfo>();
  check(d.cuDeviceGet_(&info->device, device), "cuDeviceGet");
  auto attribute = [&](CUdevice_attribute a) {
    int v = 0;
    check(d.cuDeviceGetAttribute_(&v, a, info->device), "cuDeviceGetAttribute");
    return v;
  };
  info->sm = 10 * attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
             attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info->multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info->max_grid_x = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  info->max_shared_optin = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info->memory_pools = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0;
  check(d.cuDevicePrimaryCtxRetain_(&info->context, info->device), "cuDevicePrimaryCtxRetain");
  if (info->memory_pools) info->pool = create_pool(info->device);
  slot.store(info.get(), std::memory_order_release);
  return *info.release();
}

ScopedContext::ScopedContext(int device) : info_(device_info(device)) {
  const Driver& d = driver();
  check(d.cuCtxGetCurrent_(&previous_), "cuCtxGetCurrent");
  if (previous_ != info_.context) check(d.cuCtxSetCurrent_(info_.context), "cuCtxSetCurrent");
}

ScopedContext::~ScopedContext() {
  if (previous_ != info_.context) driver().cuCtxSetCurrent_(previous_);
}

}  // namespace kf::cuda
