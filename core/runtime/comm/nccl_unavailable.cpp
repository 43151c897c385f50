// The NCCL entry points of a build that cannot have them (no CUDA backend,
// or a toolkit without nccl.h): each says why instead of failing to link.
// With nccl.h, core/runtime/cuda/nccl.cpp defines them and this is empty.
#if !KFUSE_HAVE_NCCL_HEADERS

#include "core/runtime/comm/communicator.h"
#include "core/util/error.h"

namespace kf {

namespace {
[[noreturn]] void nccl_unavailable() {
#if KFUSE_HAVE_CUDA_HEADERS
  const char* why = "kfuse was built without NCCL (no nccl.h next to cuda.h at configure time)";
#else
  const char* why = "kfuse was built without the CUDA backend (no CUDA toolkit headers at configure time)";
#endif
  fail(KF_ERR_UNSUPPORTED, why, ": NCCL communicators and multi-GPU fusions are unavailable; rebuild with a "
       "CUDA toolkit that has nccl.h");
}
}  // namespace

void nccl_unique_id(kf_nccl_id*) { nccl_unavailable(); }
std::unique_ptr<Communicator> make_nccl(const kf_nccl_id&, int, int, int) { nccl_unavailable(); }
std::unique_ptr<Communicator> wrap_nccl(void*) { nccl_unavailable(); }

}  // namespace kf

#endif  // !KFUSE_HAVE_NCCL_HEADERS
