// Options of one execute call, as the backends see them.
#pragma once

#include "kfuse/kfuse.h"

namespace kf {

class Communicator;  // core/runtime/comm/communicator.h

struct ExecOptions {
  void* stream = nullptr;                // CUstream
  const kf_allocator* allocator = nullptr;
  Communicator* communicator = nullptr;  // fusions with a mesh
};

}  // namespace kf
