#include "core/runtime/cuda/bundle.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "core/codegen/kernel_plan.h"
#include "core/codegen/prelude.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/runtime/cuda/segment_kernels.h"
#include "core/util/error.h"
#include "core/util/parallel.h"

namespace kf {
namespace cuda {

namespace {

constexpr char kMagic[8] = {'K', 'F', 'B', 'U', 'N', 'D', 'L', 'E'};
constexpr size_t kHeaderBytes = 64, kEntryHeadBytes = 48, kChecksumBytes = 32;

void put_u32(std::vector<char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::vector<char>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// The installed bundles, for the process's life (their images are never
// freed, so lookups hand out plain pointers).
struct Installed {
  std::mutex mutex;
  std::vector<std::unique_ptr<const KernelBundle>> bundles;
  std::atomic<uint64_t> sms{0};  // bit (sm - 64) set when a bundle for sm is installed
};
Installed& installed() {
  static Installed* i = new Installed;  // (never destroyed: lookups may run at exit)
  return *i;
}
std::atomic<uint64_t> hits{0};

uint64_t sm_bit(int sm) { return sm >= 64 && sm < 128 ? uint64_t{1} << (sm - 64) : 0; }

void check_sm(int sm, const char* what) {
  if (sm < 80 || sm > 127)
    fail(KF_ERR_INVALID_ARGUMENT, what, ": expected an architecture as 10 * major + minor from 80 (sm_80) to 127, got ", sm);
}

}  // namespace

Digest bundle_key(std::string_view source, int sm) {
  Sha256 h;
  h.update_field("kfuse bundle kernel v" + std::to_string(kBundleFormatVersion));
  h.update_field(source);
  h.update_field("sm_" + std::to_string(sm));
  return h.finish();
}

const Digest& generator_digest() {
  static const Digest d = [] {
    Sha256 h;
    h.update_field("kfuse generator");
    h.update_field(cuda_prelude());
    return h.finish();
  }();
  return d;
}

std::vector<char> serialize_bundle(const KernelBundle& b) {
  std::vector<char> out(kMagic, kMagic + sizeof kMagic);
  put_u32(out, kBundleFormatVersion);
  put_u32(out, static_cast<uint32_t>(b.sm));
  out.insert(out.end(), generator_digest().begin(), generator_digest().end());
  put_u32(out, static_cast<uint32_t>(b.nvrtc_major));
  put_u32(out, static_cast<uint32_t>(b.nvrtc_minor));
  put_u64(out, b.images.size());
  for (const auto& [key, image] : b.images) {
    out.insert(out.end(), key.begin(), key.end());
    put_u32(out, image.is_ptx ? 1 : 0);
    put_u32(out, 0);
    put_u64(out, image.image.size());
    out.insert(out.end(), image.image.begin(), image.image.end());
  }
  const Digest sum = sha256(out.data(), out.size());
  out.insert(out.end(), sum.begin(), sum.end());
  return out;
}

KernelBundle parse_bundle(const std::vector<char>& bytes, const std::string& what) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    fail(KF_ERR_INVALID_ARGUMENT, what, " is not a kfuse bundle (no KFBUNDLE header): write one with `kfuse compile`");
  if (bytes.size() < kHeaderBytes + kChecksumBytes)
    fail(KF_ERR_INVALID_ARGUMENT, what, " is damaged: ", bytes.size(), " bytes, less than a bundle's header and checksum");
  const size_t body = bytes.size() - kChecksumBytes;
  const Digest sum = sha256(bytes.data(), body);
  if (std::memcmp(sum.data(), bytes.data() + body, kChecksumBytes) != 0)
    fail(KF_ERR_INVALID_ARGUMENT, what, " is damaged: its checksum does not match its contents (a truncated or altered file)");
  const uint64_t version = get_le(bytes.data() + 8, 4);
  if (version != kBundleFormatVersion)
    fail(KF_ERR_VERSION_MISMATCH, what, " is a bundle of format version ", version, "; this library reads version ",
         kBundleFormatVersion, ": rebuild it with this library's `kfuse compile`");
  if (std::memcmp(bytes.data() + 16, generator_digest().data(), generator_digest().size()) != 0)
    fail(KF_ERR_VERSION_MISMATCH, what,
         " was written by a kfuse whose code generator differs from this library's (its kernels would never match "
         "this library's): rebuild it with this library's `kfuse compile`");
  KernelBundle b;
  b.sm = static_cast<int>(get_le(bytes.data() + 12, 4));
  check_sm(b.sm, (what + ": its architecture").c_str());
  b.nvrtc_major = static_cast<int>(get_le(bytes.data() + 48, 4));
  b.nvrtc_minor = static_cast<int>(get_le(bytes.data() + 52, 4));
  const uint64_t count = get_le(bytes.data() + 56, 8);
  size_t at = kHeaderBytes;
  for (uint64_t n = 0; n < count; ++n) {
    if (body - at < kEntryHeadBytes) fail(KF_ERR_INVALID_ARGUMENT, what, " is damaged: entry ", n, " of ", count, " is cut short");
    Digest key;
    std::memcpy(key.data(), bytes.data() + at, key.size());
    const uint64_t flags = get_le(bytes.data() + at + 32, 4), size = get_le(bytes.data() + at + 40, 8);
    at += kEntryHeadBytes;
    if (size > kMaxCachedImageBytes || size > body - at || flags > 1)
      fail(KF_ERR_INVALID_ARGUMENT, what, " is damaged: entry ", n, " claims ", size, " bytes");
    CachedImage image;
    image.is_ptx = flags == 1;
    image.image.assign(bytes.data() + at, bytes.data() + at + size);
    at += size;
    b.images.emplace(key, std::move(image));
  }
  if (at != body) fail(KF_ERR_INVALID_ARGUMENT, what, " is damaged: ", body - at, " bytes after its last entry");
  return b;
}

const CachedImage* bundled_image(std::string_view source, int sm, Digest* key) {
  Installed& in = installed();
  if ((in.sms.load(std::memory_order_acquire) & sm_bit(sm)) == 0) return nullptr;
  const Digest k = bundle_key(source, sm);
  std::lock_guard lock(in.mutex);
  for (const auto& b : in.bundles) {
    if (b->sm != sm) continue;
    if (auto it = b->images.find(k); it != b->images.end()) {
      hits.fetch_add(1, std::memory_order_relaxed);
      *key = k;
      return &it->second;
    }
  }
  return nullptr;
}

uint64_t bundle_hits() { return hits.load(); }

}  // namespace cuda

std::shared_ptr<KernelBundle> make_kernel_bundle(int sm) {
  cuda::check_sm(sm, "sm");
  auto b = std::make_shared<KernelBundle>();
  b->sm = sm;
  return b;
}

void bundle_add_plan(KernelBundle& bundle, const Plan& plan) {
  // Every unit of every generated segment's plan, the split-row plans'
  // too, once each.
  std::vector<KernelPlan> plans, splits;
  for (const Segment& s : plan.segmentation.segments)
    if (s.schedule) plans.push_back(emit_segment_kernel(*plan.concrete, s));
  for (const KernelPlan& p : plans) splits.insert(splits.end(), p.split_rows.begin(), p.split_rows.end());
  plans.insert(plans.end(), std::make_move_iterator(splits.begin()), std::make_move_iterator(splits.end()));
  // The units the bundle lacks, each source once (a pointwise kernel's
  // source recurs across segments).
  std::vector<std::pair<const KernelPlan::Unit*, cuda::Digest>> missing;
  std::set<cuda::Digest> seen;
  for (const KernelPlan& p : plans)
    for (const KernelPlan::Unit& u : p.units) {
      const cuda::Digest key = cuda::bundle_key(u.source, bundle.sm);
      if (!bundle.images.contains(key) && seen.insert(key).second) missing.emplace_back(&u, key);
    }
  if (missing.empty()) return;
  const cuda::NvrtcVersion v = cuda::nvrtc_version();  // (throws KF_ERR_BACKEND without NVRTC)
  std::vector<cuda::CompiledCode> compiled(missing.size());
  parallel_for(missing.size(), pool_size(missing.size(), cuda::kMaxCompileThreads), [&](size_t i) {
    compiled[i] = cuda::nvrtc_compile(missing[i].first->source, missing[i].first->kernel, bundle.sm);
  });
  for (size_t i = 0; i < missing.size(); ++i)
    bundle.images.emplace(missing[i].second, cuda::CachedImage{std::move(compiled[i].image), compiled[i].is_ptx});
  bundle.nvrtc_major = v.major;
  bundle.nvrtc_minor = v.minor;
}

size_t bundle_kernel_count(const KernelBundle& bundle) { return bundle.images.size(); }
int bundle_sm(const KernelBundle& bundle) { return bundle.sm; }

void save_kernel_bundle(const KernelBundle& bundle, const std::string& path) {
  const std::vector<char> bytes = cuda::serialize_bundle(bundle);
  const std::string temp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      fail(KF_ERR_INVALID_ARGUMENT, "path: could not write the bundle to ", path, " (", std::strerror(errno), ")");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(temp.c_str());
    fail(KF_ERR_INVALID_ARGUMENT, "path: could not write the bundle to ", path, " (", std::strerror(e), ")");
  }
}

size_t load_kernel_bundle(const std::string& path, int device) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(KF_ERR_INVALID_ARGUMENT, "path: cannot open ", path, " (", std::strerror(errno), ")");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(KF_ERR_INVALID_ARGUMENT, "path: cannot read ", path);
  auto bundle = std::make_unique<KernelBundle>(cuda::parse_bundle(bytes, path));
  if (device >= 0) {
    const int sm = cuda::device_info(device).sm;  // (KF_ERR_NO_DEVICE without a driver or device)
    if (sm != bundle->sm)
      fail(KF_ERR_DEVICE_MISMATCH, path, " holds kernels for sm_", bundle->sm, "; device ", device, " is sm_", sm,
           ": write a bundle for it with `kfuse compile --arch sm_", sm, "`");
  }
  const size_t count = bundle->images.size();
  cuda::Installed& i = cuda::installed();
  std::lock_guard lock(i.mutex);
  i.sms.fetch_or(cuda::sm_bit(bundle->sm), std::memory_order_release);
  i.bundles.push_back(std::move(bundle));
  return count;
}

}  // namespace kf
