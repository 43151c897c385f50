#include "core/runtime/cpu/host_memory.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "core/util/env_switch.h"
#include "core/util/error.h"

namespace kf::cpu {

namespace {

std::atomic<uint64_t> held{0};

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t bytes;
  if (pages <= 0 || page <= 0 ||
      __builtin_mul_overflow(static_cast<uint64_t>(pages), static_cast<uint64_t>(page), &bytes))
    return UINT64_MAX;  // unknown: only the allocator refuses
  return bytes;
}

struct Limit {
  uint64_t bytes;
  const char* source;  // for messages
};

Limit read_limit() {
  if (auto n = env_bytes("KFUSE_CPU_MEMORY_LIMIT", 1, "the host's physical memory")) return {*n, "KFUSE_CPU_MEMORY_LIMIT"};
  return {physical_memory(), "the host's physical memory; KFUSE_CPU_MEMORY_LIMIT sets another"};
}

const Limit& limit() {
  static const Limit l = read_limit();
  return l;
}

size_t rounded(size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }

}  // namespace

uint64_t host_memory_limit() { return limit().bytes; }
uint64_t host_memory_held() { return held.load(std::memory_order_relaxed); }

void* host_allocate(size_t bytes) {
  const size_t size = rounded(bytes);  // callers keep bytes <= 2^62 (allocation_bytes)
  const Limit& l = limit();
  const uint64_t before = held.fetch_add(size, std::memory_order_relaxed);
  if (before + size > l.bytes) {
    held.fetch_sub(size, std::memory_order_relaxed);
    fail(KF_ERR_OUT_OF_MEMORY, "out of host memory: ", bytes, " bytes would bring the CPU backend's tensors to ",
         before + size, " bytes, over its limit of ", l.bytes, " bytes (", l.source, ")");
  }
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) {
    held.fetch_sub(size, std::memory_order_relaxed);
    fail(KF_ERR_OUT_OF_MEMORY, "out of host memory allocating ", bytes, " bytes");
  }
  return p;
}

void host_release(void* p, size_t bytes) {
  if (p == nullptr) return;
  std::free(p);
  held.fetch_sub(rounded(bytes), std::memory_order_relaxed);
}

}  // namespace kf::cpu
