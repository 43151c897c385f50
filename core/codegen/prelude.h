// The device-side helpers every generated kernel starts with: the argument
// struct, half/bfloat16 conversions (inline PTX, no CUDA headers needed),
// wrapping integer arithmetic, PyTorch's float helpers (NaN-propagating
// max/min, remainder, lerp), float->int conversion as the CPU reference
// does it, Philox 4x32-10 with kfuse's uniform/normal scheme (philox.h), and
// block reductions (warp shuffles + shared memory, Welford merge).
#pragma once

#include <string_view>

namespace kf {

// CUDA C++ text, plain NVRTC (no includes), sm_80 and newer.
std::string_view cuda_prelude();

}  // namespace kf
