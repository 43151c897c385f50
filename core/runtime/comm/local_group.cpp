// A group of threads of this process, each one rank, exchanging CPU
// buffers. A collective is two barriers: after the first every rank's call
// is published, so each rank checks that all calls agree and computes its
// own result from all ranks' send buffers into a buffer of its own; after
// the second no rank reads another's send any more, so each copies its
// result to recv (which may alias its send) and returns. Every rank reaches
// the same verdict on a bad call from the same published data, so a
// mismatch throws on all ranks instead of leaving some waiting.
//
// Reductions go over ranks in rank order (the result does not depend on
// thread timing), in double for floats and int64 for ints and bool, rounded
// once to the dtype. Integer sums and products wrap (as NCCL's); integer
// avg truncates toward zero (as NCCL's ncclAvg); avg of bool is rejected.
// max/min propagate NaN (torch.maximum).
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

#include "core/runtime/comm/communicator.h"
#include "core/runtime/cpu/tensor_view.h"
#include "core/util/error.h"

namespace kf {

namespace {

using cpu::load_f64;
using cpu::load_i64;
using cpu::store_f64;
using cpu::store_i64;

enum class Collective : uint8_t { AllReduce, AllGather, ReduceScatter };

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

// One rank's call, as the others see it.
struct Call {
  Collective collective = Collective::AllReduce;
  const std::byte* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::F32;
  CommReduce op = CommReduce::Sum;

  bool agrees(const Call& o) const {
    return collective == o.collective && count == o.count && dtype == o.dtype &&
           (collective == Collective::AllGather || op == o.op);
  }
  std::string describe() const {
    std::string s = std::string(collective_name(collective)) + " of " + std::to_string(count) + " " +
                    std::string(dtype_name(dtype));
    if (collective != Collective::AllGather) s += std::string(" (") + comm_reduce_name(op) + ")";
    return s;
  }
};

struct Group {
  explicit Group(int n) : calls(static_cast<size_t>(n)) {}

  // Returns when every rank has arrived. The generation tells a wait of
  // this round from the next one's, so the barrier is reused without reset.
  void barrier() {
    std::unique_lock lock(mutex);
    const uint64_t gen = generation;
    if (++arrived == static_cast<int>(calls.size())) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != gen; });
  }

  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  // calls[r] is written by rank r before the first barrier and read by all
  // between the two (the barrier's mutex orders the accesses).
  std::vector<Call> calls;
};

// Why a group's calls cannot run (status KF_OK when they can).
struct Verdict {
  kf_status status = KF_OK;
  std::string message;
};

double reduce_f64(double a, double b, CommReduce op) {
  switch (op) {
    case CommReduce::Sum:
    case CommReduce::Avg: return a + b;
    case CommReduce::Prod: return a * b;
    case CommReduce::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case CommReduce::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  }
  return a;
}

int64_t reduce_i64(int64_t a, int64_t b, CommReduce op) {
  // Unsigned arithmetic: overflow wraps instead of being undefined.
  switch (op) {
    case CommReduce::Sum:
    case CommReduce::Avg: return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    case CommReduce::Prod: return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    case CommReduce::Max: return std::max(a, b);
    case CommReduce::Min: return std::min(a, b);
  }
  return a;
}

// out[i] = op over ranks of the element `first + i` of each rank's send.
void reduce_into(const std::vector<Call>& calls, size_t first, std::byte* out, size_t count, DType dtype,
                 CommReduce op) {
  const size_t bytes = static_cast<size_t>(dtype_size(dtype));
  const auto ranks = static_cast<int64_t>(calls.size());
  for (size_t i = 0; i < count; ++i) {
    const size_t at = (first + i) * bytes;
    if (is_float(dtype)) {
      double acc = load_f64(dtype, calls[0].send + at);
      for (size_t r = 1; r < calls.size(); ++r) acc = reduce_f64(acc, load_f64(dtype, calls[r].send + at), op);
      store_f64(dtype, out + i * bytes, op == CommReduce::Avg ? acc / static_cast<double>(ranks) : acc);
    } else {
      int64_t acc = load_i64(dtype, calls[0].send + at);
      for (size_t r = 1; r < calls.size(); ++r) acc = reduce_i64(acc, load_i64(dtype, calls[r].send + at), op);
      store_i64(dtype, out + i * bytes, op == CommReduce::Avg ? acc / ranks : acc);
    }
  }
}

class LocalRank final : public Communicator {
 public:
  LocalRank(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int size() const override { return static_cast<int>(group_->calls.size()); }
  int rank() const override { return rank_; }
  int device_type() const override { return kDLCPU; }
  int device() const override { return 0; }
  const char* kind() const override { return "local"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, CommReduce op, void*) override {
    run({Collective::AllReduce, static_cast<const std::byte*>(send), recv, count, dtype, op},
        [&](std::byte* out) { reduce_into(group_->calls, 0, out, count, dtype, op); });
  }

  void all_gather(const void* send, void* recv, size_t count, DType dtype, void*) override {
    const size_t bytes = count * static_cast<size_t>(dtype_size(dtype));
    run({Collective::AllGather, static_cast<const std::byte*>(send), recv, count, dtype, CommReduce::Sum},
        [&](std::byte* out) {
          for (size_t r = 0; r < group_->calls.size(); ++r)
            if (bytes) std::memcpy(out + r * bytes, group_->calls[r].send, bytes);
        });
  }

  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, CommReduce op, void*) override {
    run({Collective::ReduceScatter, static_cast<const std::byte*>(send), recv, count, dtype, op},
        [&](std::byte* out) {
          reduce_into(group_->calls, static_cast<size_t>(rank_) * count, out, count, dtype, op);
        });
  }

 private:
  // Publishes `call`, checks the group's calls, fills a scratch result with
  // `compute` and copies it to recv once no rank reads the sends.
  template <typename Compute>
  void run(const Call& call, Compute&& compute) {
    Group& g = *group_;
    g.calls[static_cast<size_t>(rank_)] = call;
    g.barrier();
    const Verdict verdict = check(g.calls);
    std::vector<std::byte> result;
    if (verdict.status == KF_OK) {
      const size_t out_count = call.collective == Collective::AllGather ? call.count * g.calls.size() : call.count;
      result.resize(out_count * static_cast<size_t>(dtype_size(call.dtype)));
      compute(result.data());
    }
    g.barrier();
    if (verdict.status != KF_OK) fail(verdict.status, "local communicator, rank ", rank_, ": ", verdict.message);
    if (!result.empty()) std::memcpy(call.recv, result.data(), result.size());
  }

  // The same for every rank: it reads only the published calls.
  static Verdict check(const std::vector<Call>& calls) {
    for (size_t r = 1; r < calls.size(); ++r)
      if (!calls[r].agrees(calls[0]))
        return {KF_ERR_INVALID_ARGUMENT, "ranks disagree: rank 0 called " + calls[0].describe() + ", rank " +
                                             std::to_string(r) + " " + calls[r].describe()};
    for (size_t r = 0; r < calls.size(); ++r)
      if (calls[r].count > 0 && (calls[r].send == nullptr || calls[r].recv == nullptr))
        return {KF_ERR_INVALID_ARGUMENT, "rank " + std::to_string(r) + " passed a NULL buffer"};
    const Call& c = calls[0];
    if (c.collective == Collective::AllGather) return {};
    if (static_cast<uint8_t>(c.op) > static_cast<uint8_t>(CommReduce::Avg))
      return {KF_ERR_INVALID_ARGUMENT, "reduce op " + std::to_string(int(c.op)) + " is not one of sum, prod, max, min, avg"};
    if (is_bool(c.dtype) && c.op == CommReduce::Avg)
      return {KF_ERR_UNSUPPORTED, "avg of bool is not defined (cast to an int dtype first)"};
    return {};
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_group(int num_ranks) {
  if (num_ranks < 1) fail(KF_ERR_INVALID_ARGUMENT, "a local group needs at least 1 rank, got ", num_ranks);
  auto group = std::make_shared<Group>(num_ranks);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < num_ranks; ++r) ranks.push_back(std::make_unique<LocalRank>(group, r));
  return ranks;
}

}  // namespace kf
