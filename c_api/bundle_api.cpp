// Ahead-of-time kernel bundles: kf_bundle_* (core/runtime/kernel_bundle.h).
#include <memory>
#include <string>

#include "c_api/api_guard.h"
#include "c_api/handles.h"
#include "core/runtime/kernel_bundle.h"
#include "core/util/handle_registry.h"

struct kf_bundle_s {
  std::shared_ptr<kf::KernelBundle> bundle;
};

namespace {

using kf::capi::guard;
using kf::capi::require;

// The core's messages name the argument ("path: ..."); the C API's start
// with the function too.
template <typename F>
void named(const char* fn, F&& body) {
  try {
    body();
  } catch (const kf::Error& e) {
    throw kf::Error(e.status(), std::string(fn) + ": " + e.what());
  }
}

kf_bundle_s* bundle_of(kf_bundle b, const char* fn) { return require(b, fn, "bundle"); }

}  // namespace

KF_API kf_status kf_bundle_create(int sm, kf_bundle* out) {
  return guard([&] {
    const char* fn = "kf_bundle_create";
    require(out, fn, "out");
    auto handle = std::make_unique<kf_bundle_s>();
    named(fn, [&] { handle->bundle = kf::make_kernel_bundle(sm); });
    kf::handles::hold_locked(handle.get());
    *out = handle.release();
  });
}

KF_API void kf_bundle_destroy(kf_bundle b) {
  if (b == nullptr) return;
  if (!kf::handles::drop_locked(b)) return kf::capi::report_not_held("kf_bundle_destroy", "b", b);
  delete b;
}

KF_API kf_status kf_bundle_add(kf_bundle b, kf_concrete c) {
  return guard([&] {
    const char* fn = "kf_bundle_add";
    kf_bundle_s* h = bundle_of(b, fn);
    const kf::Plan* plan = kf::capi::plan_of(c, fn);
    named(fn, [&] { kf::bundle_add_plan(*h->bundle, *plan); });
  });
}

KF_API kf_status kf_bundle_count(kf_bundle b, size_t* out) {
  return guard([&] {
    const char* fn = "kf_bundle_count";
    kf_bundle_s* h = bundle_of(b, fn);
    *require(out, fn, "out") = kf::bundle_kernel_count(*h->bundle);
  });
}

KF_API kf_status kf_bundle_save(kf_bundle b, const char* path) {
  return guard([&] {
    const char* fn = "kf_bundle_save";
    kf_bundle_s* h = bundle_of(b, fn);
    require(path, fn, "path");
    named(fn, [&] { kf::save_kernel_bundle(*h->bundle, path); });
  });
}

KF_API kf_status kf_bundle_load(const char* path, int device, size_t* kernels) {
  return guard([&] {
    const char* fn = "kf_bundle_load";
    require(path, fn, "path");
    size_t n = 0;
    named(fn, [&] { n = kf::load_kernel_bundle(path, device); });
    if (kernels != nullptr) *kernels = n;
  });
}
