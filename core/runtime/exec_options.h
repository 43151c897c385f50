// Options of one execute call, as the backends see them.
#pragma once

#include "kfuse/kfuse.h"

namespace kf {

struct ExecOptions {
  void* stream = nullptr;                // CUstream
  const kf_allocator* allocator = nullptr;
};

}  // namespace kf
