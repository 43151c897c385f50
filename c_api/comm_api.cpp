// Communicators (core/runtime/comm/communicator.h): a kf_communicator is
// the kf::Communicator itself.
#include <memory>
#include <vector>

#include "c_api/api_guard.h"
#include "core/runtime/comm/communicator.h"

namespace kf::capi {
namespace {

// A generous bound that still catches garbage (an uninitialized int).
constexpr int kMaxRanks = 1024;

void require_ranks(int num_ranks, const char* function) {
  if (num_ranks < 1 || num_ranks > kMaxRanks)
    fail(KF_ERR_INVALID_ARGUMENT, function, ": argument 'num_ranks' is ", num_ranks, ", expected 1..", kMaxRanks);
}

kf_communicator handle(std::unique_ptr<Communicator> c) { return c.release(); }

}  // namespace
}  // namespace kf::capi

using kf::capi::guard;
using kf::capi::require;

extern "C" {

KF_API kf_status kf_communicator_create_local(int num_ranks, kf_communicator* comms) {
  static constexpr const char* fn = "kf_communicator_create_local";
  return guard([&] {
    require(comms, fn, "comms");
    kf::capi::require_ranks(num_ranks, fn);
    auto group = kf::make_local_group(num_ranks);  // all made before any is handed out
    for (int r = 0; r < num_ranks; ++r) comms[r] = kf::capi::handle(std::move(group[static_cast<size_t>(r)]));
  });
}

KF_API kf_status kf_nccl_get_unique_id(kf_nccl_id* id) {
  static constexpr const char* fn = "kf_nccl_get_unique_id";
  return guard([&] { kf::nccl_unique_id(require(id, fn, "id")); });
}

KF_API kf_status kf_communicator_create_nccl(const kf_nccl_id* id, int num_ranks, int rank, int device,
                                             kf_communicator* out) {
  static constexpr const char* fn = "kf_communicator_create_nccl";
  return guard([&] {
    require(id, fn, "id");
    require(out, fn, "out");
    kf::capi::require_ranks(num_ranks, fn);
    if (rank < 0 || rank >= num_ranks)
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": argument 'rank' is ", rank, ", expected 0..", num_ranks - 1,
               " (num_ranks is ", num_ranks, ")");
    if (device < 0) kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": argument 'device' is ", device, ", expected >= 0");
    *out = kf::capi::handle(kf::make_nccl(*id, num_ranks, rank, device));
  });
}

KF_API kf_status kf_communicator_wrap_nccl(void* nccl_comm, kf_communicator* out) {
  static constexpr const char* fn = "kf_communicator_wrap_nccl";
  return guard([&] {
    require(nccl_comm, fn, "nccl_comm");
    require(out, fn, "out");
    *out = kf::capi::handle(kf::wrap_nccl(nccl_comm));
  });
}

KF_API kf_status kf_communicator_rank(kf_communicator c, int* rank, int* num_ranks) {
  static constexpr const char* fn = "kf_communicator_rank";
  return guard([&] {
    const auto* comm = static_cast<const kf::Communicator*>(require(c, fn, "communicator"));
    require(rank, fn, "rank");
    require(num_ranks, fn, "num_ranks");
    *rank = comm->rank();
    *num_ranks = comm->size();
  });
}

KF_API void kf_communicator_destroy(kf_communicator c) { delete static_cast<kf::Communicator*>(c); }

}  // extern "C"
