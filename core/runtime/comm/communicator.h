// A communicator is one rank of a group that runs a fusion with a device
// mesh (docs/multidevice.md). The executor hands it the communication
// segments' buffers; everything here works on contiguous buffers, and the
// layout work around it (a gather along an inner dim, a rank's block) is
// collective.cpp's. Two kinds: a group of threads of this process for CPU
// tensors (local_group.cpp), and NCCL for CUDA tensors (nccl.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/ir/dtype.h"
#include "kfuse/kfuse.h"

struct kf_communicator_s {};

namespace kf {

enum class CommReduce : uint8_t { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };
const char* comm_reduce_name(CommReduce r);

class Communicator : public kf_communicator_s {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // kDLCPU for a local group, kDLCUDA for NCCL.
  virtual int device_type() const = 0;
  virtual int device() const = 0;  // CUDA ordinal; 0 on the CPU
  virtual const char* kind() const = 0;  // "local", "nccl": for messages

  // Every rank calls each collective in the same order with the same
  // count and dtype. Buffers are contiguous; `stream` is the call's
  // CUstream (ignored by a local group, which returns when done).
  // recv = reduce over ranks of send (count elements each; may alias).
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, CommReduce op,
                          void* stream) = 0;
  // recv (size() * count elements) holds rank r's send at r * count.
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype,
                          void* stream) = 0;
  // send holds size() * count elements; recv = reduce over ranks of block
  // rank() of send.
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                              CommReduce op, void* stream) = 0;
};

// num_ranks communicators of one group of this process (CPU memory).
std::vector<std::unique_ptr<Communicator>> make_local_group(int num_ranks);

// NCCL. Throws KF_ERR_UNSUPPORTED when kfuse was built without nccl.h or
// libnccl.so.2 cannot be loaded (the message says which), KF_ERR_NO_DEVICE
// without a driver or device, KF_ERR_BACKEND when an NCCL call fails (with
// ncclGetErrorString). Bools reduce with max and min only.
void nccl_unique_id(kf_nccl_id* id);
std::unique_ptr<Communicator> make_nccl(const kf_nccl_id& id, int num_ranks, int rank, int device);
std::unique_ptr<Communicator> wrap_nccl(void* nccl_comm);

}  // namespace kf
