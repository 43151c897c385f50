// The disk cache of compiled kernels: one file per key in one directory,
// shared by every process of the user.
//
// File "<64 hex digits of the key>.kfbin": a 64-byte header, then the
// payload (a CUBIN or PTX image):
//   0  char[8]  magic "KFCUBIN\0"
//   8  u32      format version (kDiskFormatVersion)
//  12  u32      flags (bit 0: payload is PTX)
//  16  u64      payload size in bytes
//  24  u64      first 8 bytes of SHA-256(payload), little endian
//  32  u8[32]   the key (SHA-256 of what was compiled, see kernel_cache.h)
// Integers are little endian. A reader checks all of it and treats any
// mismatch, a short file or a longer one, a payload size above
// max_image_bytes(), and anything at the path that is not a regular file
// (a FIFO, a directory) as a miss, without blocking or throwing.
//
// Writers write a unique temporary file in the same directory and rename()
// it over the final name, so readers see a whole file or none, and two
// processes writing one key both succeed (the last rename wins; the files
// are equivalent). Reads refresh the file's mtime; after each write the
// oldest files (by mtime) go until the directory is within its limit.
//
// Every failure (no directory, read-only, full disk) is reported to the
// caller as a miss or a failed store, never as an error: the kernel is then
// compiled instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/cuda/sha256.h"

namespace kf::cuda {

inline constexpr uint32_t kDiskFormatVersion = 1;
inline constexpr uint64_t kDefaultCacheMaxBytes = 1ull << 30;
// The largest image the cache holds: NVRTC's images of kfuse kernels are
// kilobytes to a few megabytes, so a header claiming more is damaged.
inline constexpr uint64_t kMaxCachedImageBytes = 256ull << 20;

struct CachedImage {
  std::vector<char> image;
  bool is_ptx = false;
};

class DiskCache {
 public:
  // An empty `dir`, or max_bytes == 0, disables the cache.
  DiskCache(std::string dir, uint64_t max_bytes);

  // KFUSE_CACHE_DIR, else $XDG_CACHE_HOME/kfuse, else $HOME/.cache/kfuse;
  // limit KFUSE_CACHE_MAX_BYTES (default 1 GiB, 0 disables): decimal
  // digits only; any other value ("-1", "1G", " 5") keeps the default and
  // warns once on stderr.
  static DiskCache from_environment();

  bool enabled() const { return !dir_.empty() && max_bytes_ > 0; }
  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  std::string path_of(const Digest& key) const;
  // The largest image stored or loaded: kMaxCachedImageBytes, or less where
  // the whole file would not fit in max_bytes.
  uint64_t max_image_bytes() const;

  // The image stored under `key`, or nothing (missing, corrupt, unreadable).
  std::optional<CachedImage> load(const Digest& key) const;
  // Stores an image; false when it could not (the cache is then skipped).
  bool store(const Digest& key, const CachedImage& image) const;
  // Removes the oldest files until the cache files total at most max_bytes.
  void evict() const;

 private:
  void evict_keeping(const std::string& keep) const;
  std::string dir_;
  uint64_t max_bytes_;
};

// The directory kfuse would use, without creating it ("" when no variable
// names one).
std::string default_cache_dir();

}  // namespace kf::cuda
