#include "core/runtime/collective.h"

#include <algorithm>
#include <array>
#include <memory>

#include "core/concretize/input_meta.h"
#include "core/runtime/comm/communicator.h"
#include "core/util/error.h"
#include "core/util/dl_layout.h"

namespace kf {

static_assert(static_cast<int>(CommReduce::Sum) == 0 && static_cast<int>(CommReduce::Prod) == 1 &&
                  static_cast<int>(CommReduce::Max) == 2 && static_cast<int>(CommReduce::Min) == 3 &&
                  static_cast<int>(CommReduce::Avg) == 4,
              "core/shard/shard.cpp writes these values into allreduce and reduce_scatter");

namespace {

// A DLTensor whose shape and strides live in the object (views made here).
struct View {
  DLTensor t{};
  std::array<int64_t, kMaxRank + 1> shape{}, strides{};
  View() = default;
  View(const View&) = delete;
  View& operator=(const View&) = delete;
};

std::array<int64_t, kMaxRank + 1> strides_of(const DLTensor& t) {
  std::array<int64_t, kMaxRank + 1> s{};
  dl_strides(t, s.data());
  return s;
}

void* data_of(const DLTensor& t) { return reinterpret_cast<void*>(dl_address(t)); }

// `t` with dim `dim` split into (ranks, block) and the ranks moved to the
// front: element (r, ..., i, ...) is t's (..., r * block + i, ...).
void split_ranks(const DLTensor& t, int dim, int64_t ranks, View* v) {
  if (t.ndim + 1 > kMaxRank)
    fail(KF_ERR_UNSUPPORTED, "communication: a rank-", t.ndim, " value is gathered or split along an inner dim; ",
         "kfuse supports it up to rank ", kMaxRank - 1);
  const auto s = strides_of(t);
  const int64_t block = t.shape[dim] / ranks;
  v->t = t;
  v->t.ndim = t.ndim + 1;
  v->shape[0] = ranks;
  v->strides[0] = block * s[static_cast<size_t>(dim)];
  for (int d = 0; d < t.ndim; ++d) {
    v->shape[static_cast<size_t>(d) + 1] = d == dim ? block : t.shape[d];
    v->strides[static_cast<size_t>(d) + 1] = s[static_cast<size_t>(d)];
  }
  v->t.shape = v->shape.data();
  v->t.strides = v->strides.data();
}

// A compact buffer from the backend, released at scope exit.
class Buffer {
 public:
  Buffer(Backend& backend, const DLTensor& like, int ndim, const int64_t* shape, const ExecOptions& options)
      : backend_(backend), options_(options), device_(like.device.device_id) {
    view_.t = like;
    view_.t.ndim = ndim;
    for (int d = 0; d < ndim; ++d) view_.shape[static_cast<size_t>(d)] = shape[d];
    view_.t.shape = view_.shape.data();
    view_.t.strides = nullptr;
    view_.t.byte_offset = 0;
    bytes_ = static_cast<size_t>(std::max<int64_t>(dl_numel(view_.t), 1) * dl_element_bytes(like));
    view_.t.data = backend.allocate(bytes_, device_, options);
  }
  ~Buffer() { backend_.release(view_.t.data, bytes_, device_, options_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  const DLTensor& tensor() const { return view_.t; }
  void* data() const { return view_.t.data; }

 private:
  Backend& backend_;
  const ExecOptions& options_;
  int device_;
  size_t bytes_ = 0;
  View view_;
};

}  // namespace

void check_communicator(const Fusion& fusion, DeviceKind device, const ExecOptions& options, const char* who) {
  if (fusion.mesh == 0) return;
  const Communicator* c = options.communicator;
  if (c == nullptr)
    fail(KF_ERR_INVALID_ARGUMENT, who, ": the fusion has a mesh of ", fusion.mesh,
         " ranks; options->communicator is NULL (expected a kf_communicator of ", fusion.mesh, " ranks)");
  if (c->size() != fusion.mesh)
    fail(KF_ERR_INVALID_ARGUMENT, who, ": options->communicator has ", c->size(), " ranks; the fusion's mesh has ",
         fusion.mesh);
  const bool cuda = device == DeviceKind::CUDA;
  if (cuda != (c->device_type() == kDLCUDA))
    fail(KF_ERR_DEVICE_MISMATCH, who, ": options->communicator is a ", c->kind(), " communicator, for ",
         c->device_type() == kDLCUDA ? "CUDA" : "CPU", " tensors; the call's tensors are on the ",
         cuda ? "GPU" : "CPU");
}

void run_any_segment(Backend& backend, const Plan& plan, size_t index, const ValueSizes& sizes,
                     const DLTensor* const* inputs, DLTensor* const* outputs, const ExecOptions& options) {
  const Segment& seg = plan.segmentation.segments[index];
  if (seg.scheduler != SchedulerKind::Communication) {
    backend.run_segment(plan, index, sizes, inputs, outputs, options);
    return;
  }
  const Fusion& f = plan.fusion();
  run_collective(backend, f, f.exprs[static_cast<size_t>(seg.task.exprs.at(0))], *inputs[0], *outputs[0], options);
}

void run_collective(Backend& backend, const Fusion& fusion, const Expr& e, const DLTensor& in, const DLTensor& out,
                    const ExecOptions& options) {
  Communicator& comm = *options.communicator;
  const CommAttrs ca(e);
  const DType dtype = fusion.value(e.outputs[0]).dtype;
  const auto reduce = static_cast<CommReduce>(ca.reduce);
  void* stream = options.stream;
  switch (e.op) {
    case Op::ALLREDUCE: {
      const auto count = static_cast<size_t>(dl_numel(in));
      if (dl_is_compact(in) && dl_is_compact(out)) {
        comm.all_reduce(data_of(in), data_of(out), count, dtype, reduce, stream);
        return;
      }
      Buffer tmp(backend, in, in.ndim, in.shape, options);
      backend.copy(in, tmp.tensor(), options);
      comm.all_reduce(tmp.data(), tmp.data(), count, dtype, reduce, stream);
      backend.copy(tmp.tensor(), out, options);
      return;
    }
    case Op::ALLGATHER: {
      const auto count = static_cast<size_t>(dl_numel(in));
      const bool direct = ca.dim == 0 && dl_is_compact(out);  // rank-major blocks are out's layout
      std::unique_ptr<Buffer> send;
      const void* src = data_of(in);
      if (!dl_is_compact(in)) {
        send = std::make_unique<Buffer>(backend, in, in.ndim, in.shape, options);
        backend.copy(in, send->tensor(), options);
        src = send->data();
      }
      if (direct) {
        comm.all_gather(src, data_of(out), count, dtype, stream);
        return;
      }
      View blocks;
      split_ranks(out, ca.dim, ca.ranks, &blocks);
      Buffer gathered(backend, out, blocks.t.ndim, blocks.t.shape, options);
      comm.all_gather(src, gathered.data(), count, dtype, stream);
      backend.copy(gathered.tensor(), blocks.t, options);
      return;
    }
    case Op::REDUCE_SCATTER: {
      const auto count = static_cast<size_t>(dl_numel(out));
      View blocks;
      split_ranks(in, ca.dim, ca.ranks, &blocks);
      std::unique_ptr<Buffer> send;
      const void* src = data_of(in);
      if (!(ca.dim == 0 && dl_is_compact(in))) {
        send = std::make_unique<Buffer>(backend, in, blocks.t.ndim, blocks.t.shape, options);
        backend.copy(blocks.t, send->tensor(), options);
        src = send->data();
      }
      if (dl_is_compact(out)) {
        comm.reduce_scatter(src, data_of(out), count, dtype, reduce, stream);
        return;
      }
      Buffer recv(backend, out, out.ndim, out.shape, options);
      comm.reduce_scatter(src, recv.data(), count, dtype, reduce, stream);
      backend.copy(recv.tensor(), out, options);
      return;
    }
    case Op::SHARD_SLICE: {
      if (in.shape[ca.dim] == 1) {  // broadcast along the dim: every rank's block is the whole
        backend.copy(in, out, options);
        return;
      }
      View mine;
      mine.t = in;
      const auto s = strides_of(in);
      for (int d = 0; d < in.ndim; ++d) {
        mine.shape[static_cast<size_t>(d)] = out.shape[d];
        mine.strides[static_cast<size_t>(d)] = s[static_cast<size_t>(d)];
      }
      mine.t.shape = mine.shape.data();
      mine.t.strides = mine.strides.data();
      mine.t.byte_offset += static_cast<uint64_t>(comm.rank() * out.shape[ca.dim] * s[static_cast<size_t>(ca.dim)] *
                                                  dl_element_bytes(in));
      backend.copy(mine.t, out, options);
      return;
    }
    default: fail(KF_ERR_INTERNAL, "run_collective: ", op_name(e.op), " is not a communication op");
  }
}

}  // namespace kf
