// The builder: records builder calls, checks each one through op_rules, and
// on finalize hands its records to the definition cache, which returns the
// cached fusion for those records or adopts the builder's draft.
#pragma once

#include <memory>
#include <vector>

#include "core/ir/fusion.h"

struct kf_builder_s {};

namespace kf {

class Builder : public kf_builder_s {
 public:
  // communication: accept kfuse's communication ops (segment text only).
  explicit Builder(bool communication = false);
  int64_t tensor_input(int rank, DType dtype);
  int64_t scalar_input(DType dtype);
  int64_t constant_f64(double value, DType dtype);
  int64_t constant_i64(int64_t value, DType dtype);
  std::vector<int64_t> op(Op op, std::vector<int64_t> args, std::vector<int64_t> attrs);
  void output(int64_t value, std::vector<int64_t> stride_order, int64_t alias_input);
  void mesh(int64_t ranks);
  // dim: a dim of the value (negative from the end) or kReplicated.
  void shard(int64_t value, int64_t dim, bool replicated);
  // Returns the cached fusion for this definition (the same object for
  // equal definitions). The builder can go on recording afterwards.
  std::shared_ptr<Fusion> finalize();

  const Fusion& draft() const { return *draft_; }

 private:
  int64_t add_value(Value v);
  int64_t constant(Record record, Value v);
  std::shared_ptr<Fusion> draft_;
  std::vector<int64_t> depth_;  // per value id: the longest chain of ops ending at it
  bool communication_ = false;
};

}  // namespace kf
