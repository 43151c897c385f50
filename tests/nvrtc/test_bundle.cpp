// Ahead-of-time kernel bundles without a GPU: every kernel of a plan
// (variants and split rows included) compiled into a bundle, written,
// read back and installed; then the segment kernels of that plan come
// from it (no NVRTC compile, no disk cache, keys of the bundle's kind);
// and a damaged file, another format or another generator are refused
// with their own status and message.
// Project headers first: cmocka defines a fail() macro.
#include "core/runtime/cuda/bundle.h"
#include "core/runtime/cuda/kernel_cache.h"
#include "core/runtime/cuda/segment_kernels.h"
#include "core/text/text_parser.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "nvrtc/codegen_harness.h"

using namespace kf::cuda;

namespace {

std::string g_dir;

// A pointwise segment and a softmax row segment (whose plan has the most
// variants: twins, tight, wide, long rows, edges, cluster, short rows and
// the split-row plan).
std::shared_ptr<kf::Plan> two_segments() {
  kftest::Inputs inputs;
  inputs.push_back(kftest::tensor(kf::DType::F32, {64, 1000}));
  return kftest::plan_for(kf::parse_fusion("input x: tensor<float32, 2>\n"
                                           "a = exp(x)\ns = segment_set(a)\n"
                                           "m = max(s) {axes=[1], keepdim=true}\nd = sub(s, m)\ne = exp(d)\n"
                                           "t = sum(e) {axes=[1], keepdim=true}\ny = div(e, t)\noutput y\n"),
                          inputs);
}

// Every distinct unit source of the plan's segments, split rows included.
std::set<std::string> unit_sources(const kf::Plan& p) {
  std::vector<size_t> all;
  for (size_t i = 0; i < p.segmentation.segments.size(); ++i) all.push_back(i);
  std::set<std::string> out;
  for (const kf::KernelPlan& plan : make_segment_plans(*p.concrete, p.segmentation, all)) {
    for (const kf::KernelPlan::Unit& u : plan.units) out.insert(u.source);
    for (const kf::KernelPlan& split : plan.split_rows)
      for (const kf::KernelPlan::Unit& u : split.units) out.insert(u.source);
  }
  return out;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The status and message of `body`'s kf::Error.
template <typename F>
void expect_error(F&& body, kf_status status, const char* part) {
  try {
    body();
  } catch (const kf::Error& e) {
    if (e.status() != status || std::strstr(e.what(), part) == nullptr)
      fail_msg("expected status %d with \"%s\", got %d: %s", status, part, e.status(), e.what());
    return;
  }
  fail_msg("expected an error with \"%s\"", part);
}

void test_bundle_round_trip(void**) {
  auto p = two_segments();
  assert_int_equal(p->segmentation.segments.size(), 2);
  const std::set<std::string> sources = unit_sources(*p);
  assert_true(sources.size() >= 10);  // (2 pointwise, 8+ row kernels, 3+ split-row kernels)

  auto bundle = kf::make_kernel_bundle(90);
  const KernelCacheStats before = kernel_cache_stats();
  kf::bundle_add_plan(*bundle, *p);
  assert_int_equal(kf::bundle_kernel_count(*bundle), sources.size());
  for (const std::string& s : sources) assert_true(bundle->images.contains(bundle_key(s, 90)));
  assert_int_equal(kernel_cache_stats().compiles, before.compiles);  // (NVRTC directly: no cache involved)
  kf::bundle_add_plan(*bundle, *p);  // nothing new
  assert_int_equal(kf::bundle_kernel_count(*bundle), sources.size());

  const std::string path = g_dir + "/two.kfb";
  kf::save_kernel_bundle(*bundle, path);
  const kf::KernelBundle back = parse_bundle(read_file(path), path);
  assert_int_equal(back.sm, 90);
  assert_int_equal(back.images.size(), sources.size());
  for (const auto& [key, image] : bundle->images) {
    assert_true(back.images.at(key).image == image.image);
    assert_false(image.is_ptx);  // NVRTC 13 knows sm_90: CUBINs
  }

  // Installed, the plan's kernels come from it: no compile, no disk
  // cache, the bundle's keys.
  assert_int_equal(kf::load_kernel_bundle(path, -1), sources.size());
  std::vector<size_t> all = {0, 1};
  const KernelCacheStats loaded = kernel_cache_stats();
  const uint64_t hits = bundle_hits();
  std::vector<SegmentKernel> kernels = make_segment_kernels(*p->concrete, p->segmentation, all, 90, {});
  size_t units = 0;
  for (const SegmentKernel& k : kernels)
    for (size_t u = 0; u < k.plan.units.size(); ++u, ++units) {
      assert_true(k.units.keys[u] == bundle_key(k.plan.units[u].source, 90));
      assert_non_null(k.units.images[u].get());
      assert_int_equal(static_cast<int>(k.units.images[u]->origin), static_cast<int>(ImageOrigin::Bundle));
    }
  const KernelCacheStats after = kernel_cache_stats();
  assert_int_equal(after.compiles, loaded.compiles);
  assert_int_equal(after.disk_hits, loaded.disk_hits);
  assert_int_equal(bundle_hits() - hits, units);
  // The split-row plan's kernels too (compiled when a call takes them).
  const kf::KernelPlan& row = kernels[1].plan;
  assert_int_equal(row.split_rows.size(), 1);
  CompiledUnits split = compile_plan(row.split_rows[0], 90, {});
  for (const auto& image : split.images)
    assert_int_equal(static_cast<int>(image->origin), static_cast<int>(ImageOrigin::Bundle));
  assert_int_equal(kernel_cache_stats().compiles, loaded.compiles);
}

void test_bundle_refusals(void**) {
  expect_error([] { kf::make_kernel_bundle(75); }, KF_ERR_INVALID_ARGUMENT, "sm: expected an architecture");
  expect_error([] { kf::make_kernel_bundle(128); }, KF_ERR_INVALID_ARGUMENT, "from 80 (sm_80) to 127, got 128");
  expect_error([] { kf::load_kernel_bundle(g_dir + "/missing.kfb", -1); }, KF_ERR_INVALID_ARGUMENT, "path: cannot open");

  auto empty = kf::make_kernel_bundle(89);
  const std::vector<char> good = serialize_bundle(*empty);
  assert_int_equal(parse_bundle(good, "x").sm, 89);
  auto reseal = [](std::vector<char> b) {  // a valid checksum over altered bytes
    b.resize(b.size() - 32);
    const Digest d = kf::cuda::sha256(b.data(), b.size());
    b.insert(b.end(), d.begin(), d.end());
    return b;
  };
  expect_error([&] { parse_bundle(std::vector<char>(good.begin(), good.begin() + 40), "f.kfb"); },
               KF_ERR_INVALID_ARGUMENT, "f.kfb is damaged: 40 bytes, less than a bundle's header");
  expect_error([&] { parse_bundle(std::vector<char>(good.begin(), good.begin() + 5), "f.kfb"); },
               KF_ERR_INVALID_ARGUMENT, "f.kfb is not a kfuse bundle");
  std::vector<char> text(200, 'x');
  expect_error([&] { parse_bundle(text, "f.kfb"); }, KF_ERR_INVALID_ARGUMENT, "no KFBUNDLE header");
  std::vector<char> flipped = good;
  flipped[60] ^= 1;
  expect_error([&] { parse_bundle(flipped, "f.kfb"); }, KF_ERR_INVALID_ARGUMENT, "f.kfb is damaged: its checksum");
  std::vector<char> v2 = good;
  v2[8] = 2;
  expect_error([&] { parse_bundle(reseal(v2), "f.kfb"); }, KF_ERR_VERSION_MISMATCH, "format version 2; this library reads version 1");
  std::vector<char> other = good;
  other[20] ^= 0x55;  // the generator digest
  expect_error([&] { parse_bundle(reseal(other), "f.kfb"); }, KF_ERR_VERSION_MISMATCH, "code generator differs");
  std::vector<char> count = good;
  count[56] = 3;  // three entries claimed, none there
  expect_error([&] { parse_bundle(reseal(count), "f.kfb"); }, KF_ERR_INVALID_ARGUMENT, "entry 0 of 3 is cut short");
  std::vector<char> sm = good;
  sm[12] = 60;
  expect_error([&] { parse_bundle(reseal(sm), "f.kfb"); }, KF_ERR_INVALID_ARGUMENT, "f.kfb: its architecture");
  // On disk: the same checks through load.
  const std::string path = g_dir + "/flipped.kfb";
  write_file(path, flipped);
  expect_error([&] { kf::load_kernel_bundle(path, -1); }, KF_ERR_INVALID_ARGUMENT, "flipped.kfb is damaged");
  // Saving where no file can be made.
  expect_error([&] { kf::save_kernel_bundle(*empty, g_dir + "/no/such/dir/x.kfb"); }, KF_ERR_INVALID_ARGUMENT,
               "path: could not write the bundle to");
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  char dir[] = "/tmp/kfuse-bundle-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  g_dir = dir;
  setenv("KFUSE_CACHE_DIR", (g_dir + "/cache").c_str(), 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bundle_round_trip),
      cmocka_unit_test(test_bundle_refusals),
  };
  const int failed = cmocka_run_group_tests(tests, nullptr, nullptr);
  std::system(("rm -rf " + g_dir).c_str());
  return failed;
}
