#include "core/runtime/cuda/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <tuple>

#include "core/util/env_switch.h"

namespace kf::cuda {

namespace {

constexpr char kMagic[8] = {'K', 'F', 'C', 'U', 'B', 'I', 'N', '\0'};
constexpr size_t kHeaderSize = 64;
constexpr const char* kSuffix = ".kfbin";
constexpr const char* kTempPrefix = ".tmp-";
constexpr time_t kStaleTempSeconds = 3600;  // a writer that died mid-write

void put_u32(uint8_t* p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i)); }
void put_u64(uint8_t* p, uint64_t v) { for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i)); }
uint32_t get_u32(const uint8_t* p) { uint32_t v = 0; for (int i = 3; i >= 0; --i) v = v << 8 | p[i]; return v; }
uint64_t get_u64(const uint8_t* p) { uint64_t v = 0; for (int i = 7; i >= 0; --i) v = v << 8 | p[i]; return v; }

uint64_t checksum(const char* data, size_t size) { return get_u64(sha256(data, size).data()); }

// mkdir -p; true when the directory exists afterwards.
bool make_dirs(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  auto slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !make_dirs(dir.substr(0, slash))) return false;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool write_all(int fd, const void* data, size_t size) {
  auto p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, size_t size) {
  auto p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::string default_cache_dir() {
  if (std::string d = env("KFUSE_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/kfuse";
  if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/kfuse";
  return std::string();
}

DiskCache::DiskCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (enabled() && !make_dirs(dir_)) dir_.clear();
}

DiskCache DiskCache::from_environment() {
  uint64_t limit = kDefaultCacheMaxBytes;
  if (std::string v = env("KFUSE_CACHE_MAX_BYTES"); !v.empty()) {
    // Digits only: strtoull read "-1" as 2^64 - 1 (no limit at all) and
    // skipped leading spaces. Anything else keeps the default, with a warning.
    uint64_t parsed = 0;
    const auto [stop, error] = std::from_chars(v.data(), v.data() + v.size(), parsed);
    if (error == std::errc() && stop == v.data() + v.size())
      limit = parsed;
    else
      warn_ignored_env("KFUSE_CACHE_MAX_BYTES", v.c_str(), "a number of bytes, 0 or more (0 disables the cache)",
                       std::to_string(kDefaultCacheMaxBytes));
  }
  return DiskCache(default_cache_dir(), limit);
}

std::string DiskCache::path_of(const Digest& key) const { return dir_ + "/" + to_hex(key) + kSuffix; }

std::optional<CachedImage> DiskCache::load(const Digest& key) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  // O_NONBLOCK: opening a FIFO at the entry's path would otherwise wait for
  // a writer forever. Only a regular file can be an entry (a FIFO, device or
  // directory is a miss, and the next store renames a file over it).
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::optional<CachedImage> out;
  struct stat st;
  uint8_t header[kHeaderSize];
  // The size is checked against the file's real size and the largest entry
  // store() writes before anything is allocated: a header claiming 2^40
  // bytes over a sparse file made the allocation throw out of load().
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(kHeaderSize) &&
      read_all(fd, header, kHeaderSize) && std::memcmp(header, kMagic, 8) == 0 &&
      get_u32(header + 8) == kDiskFormatVersion && (get_u32(header + 12) & ~1u) == 0 &&
      get_u64(header + 16) == static_cast<uint64_t>(st.st_size) - kHeaderSize &&
      get_u64(header + 16) <= max_image_bytes() && std::memcmp(header + 32, key.data(), key.size()) == 0) {
    try {
      CachedImage image;
      image.is_ptx = (get_u32(header + 12) & 1u) != 0;
      image.image.resize(get_u64(header + 16));
      if (read_all(fd, image.image.data(), image.image.size()) &&
          checksum(image.image.data(), image.image.size()) == get_u64(header + 24))
        out = std::move(image);
    } catch (const std::bad_alloc&) {  // a plausible size the host cannot hold now: compile instead
    }
  }
  close(fd);
  // Reads count as uses for eviction; a read-only directory just keeps the old time.
  if (out) utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return out;
}

uint64_t DiskCache::max_image_bytes() const {
  return std::min(kMaxCachedImageBytes, max_bytes_ > kHeaderSize ? max_bytes_ - kHeaderSize : 0);
}

bool DiskCache::store(const Digest& key, const CachedImage& image) const {
  // An image load() would refuse is not written (one above the limit would
  // also evict every other file, then itself).
  if (!enabled() || image.image.size() > max_image_bytes()) return false;
  uint8_t header[kHeaderSize] = {};
  std::memcpy(header, kMagic, 8);
  put_u32(header + 8, kDiskFormatVersion);
  put_u32(header + 12, image.is_ptx ? 1u : 0u);
  put_u64(header + 16, image.image.size());
  put_u64(header + 24, checksum(image.image.data(), image.image.size()));
  std::memcpy(header + 32, key.data(), key.size());

  std::string temp = dir_ + "/" + kTempPrefix + to_hex(key).substr(0, 16) + "-XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0) return false;
  bool ok = fchmod(fd, 0644) == 0 && write_all(fd, header, kHeaderSize) &&
            write_all(fd, image.image.data(), image.image.size());
  ok = close(fd) == 0 && ok;
  ok = ok && rename(temp.c_str(), path_of(key).c_str()) == 0;
  if (!ok) {
    unlink(temp.c_str());
    return false;
  }
  evict_keeping(path_of(key));
  return true;
}

void DiskCache::evict() const { evict_keeping(std::string()); }

void DiskCache::evict_keeping(const std::string& keep) const {
  if (!enabled()) return;
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return;
  struct Entry {
    timespec mtime;
    uint64_t size;
    std::string path;
  };
  std::vector<Entry> files;
  uint64_t total = 0;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    bool temp = name.rfind(kTempPrefix, 0) == 0;
    if (!temp && !ends_with(name, kSuffix)) continue;
    std::string path = dir_ + "/" + name;
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (temp) {
      if (now - st.st_mtime > kStaleTempSeconds) unlink(path.c_str());
      continue;
    }
    files.push_back({st.st_mtim, static_cast<uint64_t>(st.st_size), path});
    total += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  if (total <= max_bytes_) return;
  // Oldest first; the file just written goes last (timestamps are coarse,
  // so it may tie with older ones).
  std::sort(files.begin(), files.end(), [&](const Entry& a, const Entry& b) {
    return std::make_tuple(a.path == keep, a.mtime.tv_sec, a.mtime.tv_nsec, a.path) <
           std::make_tuple(b.path == keep, b.mtime.tv_sec, b.mtime.tv_nsec, b.path);
  });
  for (const Entry& f : files) {
    if (total <= max_bytes_) break;
    // Another process may have removed it already: the space is free either way.
    if (unlink(f.path.c_str()) == 0 || errno == ENOENT) total -= f.size;
  }
}

}  // namespace kf::cuda
