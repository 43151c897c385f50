// The CPU backend's host memory: every tensor it allocates (outputs,
// intermediates between segments, the values a segment materializes) is
// counted against one process-wide limit before the allocation is made. A
// request that would take the tensors the backend holds past the limit is
// KF_ERR_OUT_OF_MEMORY before a page is touched: with overcommit, a
// malloc far beyond what the host holds still succeeds, and the process is
// killed by the kernel's OOM killer once the pages are written.
//
// The limit is the host's physical memory (sysconf), or the bytes in
// KFUSE_CPU_MEMORY_LIMIT (read once per process; digits only, at least 1).
// It does not see other processes, a container's cgroup limit nor the
// caller's own tensors: it refuses what cannot fit, not everything that
// will not. Where a container's limit is below the host's memory, set
// KFUSE_CPU_MEMORY_LIMIT to it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kf::cpu {

// The limit in bytes.
uint64_t host_memory_limit();
// The bytes the backend's tensors hold now (all threads).
uint64_t host_memory_held();

// 64-byte aligned memory of `bytes` (0: 64), counted against the limit;
// throws KF_ERR_OUT_OF_MEMORY (nothing allocated) when the limit or the
// allocator refuses it. The contents are uninitialized.
void* host_allocate(size_t bytes);
// Frees memory from host_allocate; `bytes` as given to it.
void host_release(void* p, size_t bytes);

}  // namespace kf::cpu
