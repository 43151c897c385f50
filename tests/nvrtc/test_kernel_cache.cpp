// The kernel cache without a GPU: SHA-256 vectors, keys, the disk format
// (round trip, corrupt / truncated / foreign files are misses and get
// rebuilt; a FIFO at an entry's path and a header claiming 2^40 bytes are
// misses too), concurrent writers in several processes, eviction under the
// size limit, KFUSE_CACHE_MAX_BYTES, and directories that cannot be used
// (compiling still works).
// Project headers first: cmocka defines a fail() macro.
#include "core/runtime/cuda/disk_cache.h"
#include "core/runtime/cuda/kernel_cache.h"
#include "core/runtime/cuda/sha256.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include "nvrtc/nvrtc_skip.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "stderr_capture.h"
#include <vector>

using namespace kf::cuda;

namespace {

const char* kKernel = R"(
extern "C" __global__ void scale(float* x, float a, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

std::string make_temp_dir() {
  std::string base = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/kfuse-cache-test-XXXXXX";
  if (mkdtemp(base.data()) == nullptr) fail_msg("mkdtemp failed");
  return base;
}

void remove_tree(const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) fail_msg("could not remove %s", dir.c_str());
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

CachedImage random_image(size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  CachedImage im;
  im.image.resize(size);
  for (char& c : im.image) c = static_cast<char>(rng());
  return im;
}

Digest key_of(const std::string& s) { return sha256(s.data(), s.size()); }

// Runs `body` in a child process that must exit 0 within `seconds` (a hang
// is killed and fails the test instead of stalling the suite).
void in_child_within(int seconds, const std::function<bool()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(static_cast<unsigned>(seconds));
    _exit(body() ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status))
    fail_msg("the child was killed by signal %d%s", WTERMSIG(status), WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

void test_sha256_vectors(void**) {
  assert_string_equal(to_hex(sha256("", 0)).c_str(),
                      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert_string_equal(to_hex(sha256("abc", 3)).c_str(),
                      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  assert_string_equal(to_hex(sha256(two_blocks.data(), two_blocks.size())).c_str(),
                      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a' fed in uneven pieces.
  Sha256 h;
  std::string chunk(777, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  assert_string_equal(to_hex(h.finish()).c_str(),
                      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

void test_keys(void**) {
  Digest a = kernel_key(kKernel, 90);
  assert_true(a == kernel_key(kKernel, 90));
  assert_false(a == kernel_key(kKernel, 80));
  assert_false(a == kernel_key(std::string(kKernel) + " ", 90));
  // Every NVRTC option is part of the key (a fast-compile kernel is another kernel).
  setenv("KFUSE_NVRTC_FAST_COMPILE", "mid", 1);
  const bool fast_differs = !(a == kernel_key(kKernel, 90));
  unsetenv("KFUSE_NVRTC_FAST_COMPILE");
  const NvrtcVersion v = nvrtc_version();
  assert_true(fast_differs == (v.major > 12 || (v.major == 12 && v.minor >= 8)));
}

void test_default_dir(void**) {
  setenv("KFUSE_CACHE_DIR", "/x/explicit", 1);
  assert_string_equal(default_cache_dir().c_str(), "/x/explicit");
  unsetenv("KFUSE_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  assert_string_equal(default_cache_dir().c_str(), "/x/xdg/kfuse");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/x/home", 1);
  assert_string_equal(default_cache_dir().c_str(), "/x/home/.cache/kfuse");
}

void test_round_trip_and_rebuild(void**) {
  std::string dir = make_temp_dir() + "/nested/cache";  // created on demand
  DiskCache cache(dir, kDefaultCacheMaxBytes);
  assert_true(cache.enabled());
  KernelImage first = kernel_image(kKernel, "scale", 90, cache);
  assert_int_equal(static_cast<int>(first.origin), static_cast<int>(ImageOrigin::Compiled));
  assert_true(first.stored);
  KernelImage second = kernel_image(kKernel, "scale", 90, cache);
  assert_int_equal(static_cast<int>(second.origin), static_cast<int>(ImageOrigin::Disk));
  assert_true(second.code.image == first.code.image);
  const std::string path = cache.path_of(kernel_key(kKernel, 90));
  assert_int_equal(file_size(path), 64 + first.code.image.size());
  assert_int_equal(files_in(dir).size(), 1);  // no temporary left behind

  // One flipped payload byte: a miss, rebuilt and overwritten.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 100);
    char c = static_cast<char>(first.code.image[100] ^ 0x5a);
    f.write(&c, 1);
  }
  assert_false(cache.load(kernel_key(kKernel, 90)).has_value());
  KernelImage rebuilt = kernel_image(kKernel, "scale", 90, cache);
  assert_int_equal(static_cast<int>(rebuilt.origin), static_cast<int>(ImageOrigin::Compiled));
  assert_true(rebuilt.code.image == first.code.image);
  assert_true(cache.load(kernel_key(kKernel, 90)).has_value());

  // Truncated (a writer that died without the rename protocol): a miss, rebuilt.
  assert_int_equal(truncate(path.c_str(), static_cast<off_t>(64 + first.code.image.size() / 2)), 0);
  assert_false(cache.load(kernel_key(kKernel, 90)).has_value());
  assert_int_equal(static_cast<int>(kernel_image(kKernel, "scale", 90, cache).origin),
                   static_cast<int>(ImageOrigin::Compiled));
  assert_int_equal(static_cast<int>(kernel_image(kKernel, "scale", 90, cache).origin),
                   static_cast<int>(ImageOrigin::Disk));
  // Shorter than a header, and empty.
  assert_int_equal(truncate(path.c_str(), 10), 0);
  assert_false(cache.load(kernel_key(kKernel, 90)).has_value());
  assert_int_equal(truncate(path.c_str(), 0), 0);
  assert_false(cache.load(kernel_key(kKernel, 90)).has_value());
  remove_tree(dir.substr(0, dir.size() - std::strlen("/nested/cache")));
}

void test_header_checks(void**) {
  std::string dir = make_temp_dir();
  DiskCache cache(dir, kDefaultCacheMaxBytes);
  CachedImage im = random_image(5000, 1);
  Digest a = key_of("a"), b = key_of("b");
  assert_true(cache.store(a, im));
  auto loaded = cache.load(a);
  assert_true(loaded.has_value());
  assert_true(loaded->image == im.image);
  assert_false(loaded->is_ptx);
  // A file copied under another key's name is not that key's image.
  std::string cmd = "cp '" + cache.path_of(a) + "' '" + cache.path_of(b) + "'";
  assert_int_equal(std::system(cmd.c_str()), 0);
  assert_false(cache.load(b).has_value());
  // Bad magic; a future format version; extra bytes at the end.
  auto patch = [&](long offset, char value) {
    std::fstream f(cache.path_of(a), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset);
    f.write(&value, 1);
  };
  patch(0, 'X');
  assert_false(cache.load(a).has_value());
  assert_true(cache.store(a, im));
  patch(8, 2);
  assert_false(cache.load(a).has_value());
  assert_true(cache.store(a, im));
  { std::ofstream(cache.path_of(a), std::ios::app | std::ios::binary) << "extra"; }
  assert_false(cache.load(a).has_value());
  // PTX flag round-trips.
  im.is_ptx = true;
  assert_true(cache.store(a, im));
  assert_true(cache.load(a)->is_ptx);
  remove_tree(dir);
}

// Something other than a regular file at an entry's path: a FIFO used to
// block load() forever (it opened without O_NONBLOCK). A miss, promptly;
// the next store replaces it.
void test_not_a_regular_file(void**) {
  std::string dir = make_temp_dir();
  DiskCache cache(dir, kDefaultCacheMaxBytes);
  const Digest fifo = key_of("fifo"), sub = key_of("directory");
  assert_int_equal(mkfifo(cache.path_of(fifo).c_str(), 0644), 0);
  assert_int_equal(mkdir(cache.path_of(sub).c_str(), 0755), 0);
  in_child_within(10, [&] { return !cache.load(fifo).has_value() && !cache.load(sub).has_value(); });
  const CachedImage im = random_image(3000, 7);
  assert_true(cache.store(fifo, im));
  assert_true(cache.load(fifo)->image == im.image);
  remove_tree(dir);
}

// A header whose size matches the file, but the file is a sparse 2^40
// bytes: load() used to allocate that much (std::bad_alloc escaped it).
// Sizes above the largest image the cache keeps are misses, unallocated.
void test_huge_claimed_size(void**) {
  std::string dir = make_temp_dir();
  const Digest key = key_of("huge");
  auto forge = [&](const DiskCache& cache, uint64_t size) {
    assert_true(cache.store(key, random_image(1000, 3)));
    const std::string path = cache.path_of(key);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>(size >> (8 * i)));
    f.close();
    return truncate(path.c_str(), static_cast<off_t>(64 + size)) == 0;
  };
  // A limit high enough that only the 256 MiB image cap stands in the way.
  DiskCache unlimited(dir, 1ull << 50);
  if (forge(unlimited, 1ull << 40)) {
    in_child_within(20, [&] { return !unlimited.load(key).has_value(); });
  } else {
    std::fprintf(stderr, "(no sparse file of 2^40 bytes here: that case is skipped)\n");
  }
  assert_int_equal(unlimited.max_image_bytes(), kMaxCachedImageBytes);
  // Under a small limit: the largest image is what fits in it.
  DiskCache small(dir, 64 + 100000);
  assert_int_equal(small.max_image_bytes(), 100000);
  assert_true(forge(small, 100001));
  assert_false(small.load(key).has_value());
  assert_false(small.store(key, random_image(100001, 0)));
  assert_true(small.store(key, random_image(100000, 0)));
  assert_true(small.load(key).has_value());
  remove_tree(dir);
}

// KFUSE_CACHE_MAX_BYTES: decimal digits only. "-1" used to be read as
// 2^64 - 1 (no limit at all).
void test_max_bytes_from_environment(void**) {
  std::string dir = make_temp_dir();
  setenv("KFUSE_CACHE_DIR", dir.c_str(), 1);
  auto limit_for = [](const char* value, std::string* warnings) {
    setenv("KFUSE_CACHE_MAX_BYTES", value, 1);
    uint64_t limit = 0;
    *warnings = stderr_of([&] { limit = DiskCache::from_environment().max_bytes(); });
    return limit;
  };
  std::string w;
  assert_int_equal(limit_for("-1", &w), kDefaultCacheMaxBytes);
  assert_string_equal(w.c_str(),
                      "kfuse: ignoring KFUSE_CACHE_MAX_BYTES=-1: expected a number of bytes, 0 or more (0 "
                      "disables the cache); keeping the default (1073741824)\n");
  // Once per process: the next bad values are quiet.
  for (const char* bad : {"1G", " 5", "+5", "18446744073709551616", "5 "}) {
    assert_int_equal(limit_for(bad, &w), kDefaultCacheMaxBytes);
    assert_string_equal(w.c_str(), "");
  }
  assert_int_equal(limit_for("12345", &w), 12345);
  assert_string_equal(w.c_str(), "");
  assert_int_equal(limit_for("0", &w), 0);
  assert_false(DiskCache::from_environment().enabled());
  assert_int_equal(limit_for("", &w), kDefaultCacheMaxBytes);
  unsetenv("KFUSE_CACHE_MAX_BYTES");
  unsetenv("KFUSE_CACHE_DIR");
  remove_tree(dir);
}

// Several processes store and load one key at once; a load returns nothing
// or one of the written images, never a mix.
void test_concurrent_writers(void**) {
  std::string dir = make_temp_dir();
  const Digest key = key_of("shared");
  const int kProcs = 4, kRounds = 60;
  std::vector<CachedImage> images;
  for (int p = 0; p < kProcs; ++p) images.push_back(random_image(256 * 1024 + 4096 * static_cast<size_t>(p), 100 + static_cast<unsigned>(p)));
  std::vector<pid_t> children;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      DiskCache cache(dir, kDefaultCacheMaxBytes);
      int bad = 0;
      for (int r = 0; r < kRounds; ++r) {
        if (!cache.store(key, images[static_cast<size_t>(p)])) bad |= 1;
        if (auto got = cache.load(key)) {
          bool known = false;
          for (const auto& im : images) known = known || got->image == im.image;
          if (!known) bad |= 2;
        }
      }
      _exit(bad);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  DiskCache cache(dir, kDefaultCacheMaxBytes);
  assert_true(cache.load(key).has_value());
  assert_int_equal(files_in(dir).size(), 1);  // temporaries all renamed away
  remove_tree(dir);
}

void test_eviction(void**) {
  std::string dir = make_temp_dir();
  const size_t payload = 10000;
  const uint64_t file = 64 + payload;
  const uint64_t limit = file * 3 + file / 2;
  DiskCache cache(dir, limit);
  for (int i = 0; i < 10; ++i) {
    assert_true(cache.store(key_of("k" + std::to_string(i)), random_image(payload, static_cast<unsigned>(i))));
    uint64_t total = 0;
    for (const auto& name : files_in(dir)) total += file_size(dir + "/" + name);
    assert_true(total <= limit);
    // The file just written always survives.
    assert_true(cache.load(key_of("k" + std::to_string(i))).has_value());
  }
  assert_int_equal(files_in(dir).size(), 3);
  assert_false(cache.load(key_of("k0")).has_value());
  // Files that are not the cache's are left alone.
  { std::ofstream(dir + "/notes.txt") << "mine"; }
  cache.evict();
  assert_int_equal(file_size(dir + "/notes.txt"), 4);
  remove_tree(dir);
}

void test_unusable_directory_still_compiles(void**) {
  std::string dir = make_temp_dir();
  // A path below a regular file can never be created, even by root.
  std::string blocker = dir + "/file";
  { std::ofstream(blocker) << "x"; }
  DiskCache impossible(blocker + "/cache", kDefaultCacheMaxBytes);
  assert_false(impossible.enabled());
  KernelImage a = kernel_image(kKernel, "scale", 80, impossible);
  assert_int_equal(static_cast<int>(a.origin), static_cast<int>(ImageOrigin::Compiled));
  assert_false(a.stored);
  assert_false(a.code.image.empty());
  // A read-only directory (when not running as root, who may write anyway).
  std::string ro = dir + "/readonly";
  assert_int_equal(mkdir(ro.c_str(), 0500), 0);
  DiskCache readonly(ro, kDefaultCacheMaxBytes);
  KernelImage b = kernel_image(kKernel, "scale", 80, readonly);
  assert_true(b.code.image == a.code.image);
  if (geteuid() != 0) {
    assert_false(b.stored);
    assert_true(files_in(ro).empty());
  }
  // A zero limit turns the cache off.
  DiskCache off(dir, 0);
  assert_false(off.enabled());
  assert_false(off.store(key_of("z"), random_image(10, 0)));
  chmod(ro.c_str(), 0700);
  remove_tree(dir);
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vectors),
      cmocka_unit_test(test_keys),
      cmocka_unit_test(test_default_dir),
      cmocka_unit_test(test_round_trip_and_rebuild),
      cmocka_unit_test(test_header_checks),
      cmocka_unit_test(test_not_a_regular_file),
      cmocka_unit_test(test_huge_claimed_size),
      cmocka_unit_test(test_max_bytes_from_environment),
      cmocka_unit_test(test_concurrent_writers),
      cmocka_unit_test(test_eviction),
      cmocka_unit_test(test_unusable_directory_still_compiles),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
