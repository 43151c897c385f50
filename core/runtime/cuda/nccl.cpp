// The NCCL communicator (core/runtime/comm/communicator.h). libnccl.so.2 is
// loaded with dlopen like the other CUDA libraries (dynlib.h); nccl.h gives
// only the types and prototypes. Without nccl.h (KFUSE_HAVE_NCCL_HEADERS
// unset) this file is empty and comm/nccl_unavailable.cpp says why.
#if KFUSE_HAVE_NCCL_HEADERS

#include <nccl.h>

#include <cstring>
#include <string>

#include "core/runtime/comm/communicator.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/dynlib.h"
#include "core/util/error.h"

namespace kf {

namespace {

static_assert(sizeof(kf_nccl_id::bytes) == sizeof(ncclUniqueId), "kf_nccl_id must hold an ncclUniqueId");

#define KF_NCCL_FUNCTIONS(X)                                                                   \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommCount) \
  X(ncclCommUserRank) X(ncclCommCuDevice) X(ncclAllReduce) X(ncclAllGather) X(ncclReduceScatter) \
  X(ncclGetErrorString)

struct Nccl {
#define KF_NCCL_MEMBER(name) decltype(&::name) name##_ = nullptr;
  KF_NCCL_FUNCTIONS(KF_NCCL_MEMBER)
#undef KF_NCCL_MEMBER
  int version = 0;    // ncclGetVersion: 22809 for 2.28.9
  std::string error;  // why it could not be loaded ("" when loaded)
};

const Nccl& nccl() {
  static const Nccl* lib = [] {
    auto* n = new Nccl;  // never freed: communicators may outlive static destruction
    const cuda::DynLib dl = cuda::open_library(cuda::CudaLibrary::Nccl);
    if (dl.handle == nullptr) {
      n->error = "NCCL (libnccl.so.2) could not be loaded (multi-GPU fusions need it):" + cuda::attempts_text(dl);
      return n;
    }
#define KF_NCCL_RESOLVE(name) cuda::resolve(dl, #name, n->name##_, n->error);
    KF_NCCL_FUNCTIONS(KF_NCCL_RESOLVE)
#undef KF_NCCL_RESOLVE
    if (n->error.empty() && n->ncclGetVersion_(&n->version) != ncclSuccess) n->error = "ncclGetVersion failed";
    return n;
  }();
  if (!lib->error.empty()) throw Error(KF_ERR_UNSUPPORTED, lib->error);
  return *lib;
}

void check(ncclResult_t r, const char* function) {
  if (r == ncclSuccess) return;
  const char* text = nccl().ncclGetErrorString_(r);
  fail(KF_ERR_BACKEND, "NCCL call failed: ", function, ": ", text ? text : "", " (ncclResult_t ", int(r), ")");
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F64: return ncclFloat64;
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I64: return ncclInt64;
    case DType::I32: return ncclInt32;
    case DType::I8: return ncclInt8;
    case DType::U8: return ncclUint8;
    case DType::Bool: return ncclUint8;  // kfuse's bools are bytes holding 0 or 1
    case DType::F8E4M3:
    case DType::F8E5M2:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
      // The library may be older than the header it was built against.
      if (nccl().version < NCCL_VERSION(2, 24, 0))
        fail(KF_ERR_UNSUPPORTED, "NCCL ", nccl().version, " has no float8 types (2.24 added them): cast ",
             dtype_name(t), " to bfloat16 first");
      return t == DType::F8E4M3 ? ncclFloat8e4m3 : ncclFloat8e5m2;
#else
      fail(KF_ERR_UNSUPPORTED, "kfuse was built against NCCL ", NCCL_VERSION_CODE,
           " which has no float8 types: cast ", dtype_name(t), " to bfloat16 first");
#endif
  }
  fail(KF_ERR_INTERNAL, "NCCL: dtype code ", int(t));
}

// Bools ride on uint8, where only max (any) and min (all) mean the same.
// NCCL reduces float8 on sm_90 and newer only: elsewhere the call's NCCL
// error says so.
ncclRedOp_t nccl_op(CommReduce op, DType t) {
  if (is_bool(t) && op != CommReduce::Max && op != CommReduce::Min)
    fail(KF_ERR_UNSUPPORTED, "NCCL reduces bool with max or min only, not ", comm_reduce_name(op),
         ": cast to int32 first");
  switch (op) {
    case CommReduce::Sum: return ncclSum;
    case CommReduce::Prod: return ncclProd;
    case CommReduce::Max: return ncclMax;
    case CommReduce::Min: return ncclMin;
    case CommReduce::Avg: return ncclAvg;
  }
  fail(KF_ERR_INTERNAL, "NCCL: reduce op code ", int(op));
}

class NcclRank final : public Communicator {
 public:
  NcclRank(ncclComm_t comm, bool owned) : comm_(comm), owned_(owned) {
    check(nccl().ncclCommCount_(comm, &size_), "ncclCommCount");
    check(nccl().ncclCommUserRank_(comm, &rank_), "ncclCommUserRank");
    check(nccl().ncclCommCuDevice_(comm, &device_), "ncclCommCuDevice");
  }
  ~NcclRank() override {
    if (!owned_) return;
    try {
      cuda::ScopedContext ctx(device_);
      nccl().ncclCommDestroy_(comm_);
    } catch (...) {  // a destructor cannot report: the communicator is gone either way
    }
  }
  NcclRank(const NcclRank&) = delete;
  NcclRank& operator=(const NcclRank&) = delete;

  int size() const override { return size_; }
  int rank() const override { return rank_; }
  int device_type() const override { return kDLCUDA; }
  int device() const override { return device_; }
  const char* kind() const override { return "nccl"; }

  // Enqueued on `stream` (a CUstream is a cudaStream_t); no host sync.
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, CommReduce op, void* stream) override {
    const ncclRedOp_t nop = nccl_op(op, dtype);
    cuda::ScopedContext ctx(device_);
    check(nccl().ncclAllReduce_(send, recv, count, nccl_type(dtype), nop, comm_, cuda_stream(stream)),
          "ncclAllReduce");
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype, void* stream) override {
    cuda::ScopedContext ctx(device_);
    check(nccl().ncclAllGather_(send, recv, count, nccl_type(dtype), comm_, cuda_stream(stream)), "ncclAllGather");
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, CommReduce op,
                      void* stream) override {
    const ncclRedOp_t nop = nccl_op(op, dtype);
    cuda::ScopedContext ctx(device_);
    check(nccl().ncclReduceScatter_(send, recv, count, nccl_type(dtype), nop, comm_, cuda_stream(stream)),
          "ncclReduceScatter");
  }

 private:
  static cudaStream_t cuda_stream(void* s) { return static_cast<cudaStream_t>(s); }

  ncclComm_t comm_;
  bool owned_;
  int size_ = 0, rank_ = 0, device_ = 0;
};

}  // namespace

void nccl_unique_id(kf_nccl_id* id) {
  ncclUniqueId u;
  check(nccl().ncclGetUniqueId_(&u), "ncclGetUniqueId");
  std::memcpy(id->bytes, u.internal, sizeof u.internal);
}

std::unique_ptr<Communicator> make_nccl(const kf_nccl_id& id, int num_ranks, int rank, int device) {
  const Nccl& n = nccl();
  ncclUniqueId u;
  std::memcpy(u.internal, id.bytes, sizeof u.internal);
  ncclComm_t comm = nullptr;
  {
    // NCCL's runtime takes the current context as its device: the
    // device's primary context is what cudaSetDevice(device) would make
    // current. The caller's context comes back after.
    cuda::ScopedContext ctx(device);
    check(n.ncclCommInitRank_(&comm, num_ranks, u, rank), "ncclCommInitRank");
  }
  try {
    return std::make_unique<NcclRank>(comm, true);
  } catch (...) {
    cuda::ScopedContext ctx(device);
    n.ncclCommDestroy_(comm);
    throw;
  }
}

std::unique_ptr<Communicator> wrap_nccl(void* nccl_comm) {
  return std::make_unique<NcclRank>(static_cast<ncclComm_t>(nccl_comm), false);
}

}  // namespace kf

#endif  // KFUSE_HAVE_NCCL_HEADERS
