// Accumulators of the reductions a row or column kernel computes: their
// registers, one element's step, the block-wide combine, and the finished
// results (mean, variance) in the registers later code reads.
#pragma once

#include <string>
#include <vector>

#include "core/codegen/kernel_writer.h"
#include "core/schedule/kernel_schedule.h"

namespace kf {

struct Accumulator {
  std::string name;
  DType acc;
  const Expr* expr;
  std::string sum;  // cached rows: variance in two passes, the row sum (then the mean) here
  // Online softmax pairs (online_softmax.h): on a sum of exp(x - max), the
  // index of its max's accumulator in the phase; on that max, true. The
  // pair is reduced over the block as one kf_online.
  int online_max = -1;
  bool online_paired = false;
  // Further variances of the same input in the phase (var and var_mean
  // with another correction): finished from this accumulator.
  std::vector<const Expr*> shared;
};

DType accumulator_dtype(DType in);
bool is_welford(const Expr& e);
std::string acc_init(const Expr& e, DType acc);
// The functor combining two partial values (kf_sum_op(), ...).
std::string combine_op(const Expr& e, DType acc);
// One element `x` into `name` (not Welford's two-pass form).
std::string acc_step(const Expr& e, DType acc, const std::string& name, const std::string& x);

// Declares the registers of every reduction result (assigned in each path
// of the row, read after it).
void declare_results(KernelWriter& w, const RowDomain& s);
// Assigns the finished results of `e` from its combined value `red`.
void finish_results(KernelWriter& w, const Expr& e, DType acc, const std::string& red, const std::string& row_len);
// Declares the accumulators of one phase; split_welford: variance as a
// row sum and squared deviations (two passes over registers); `online`:
// the (max, sum) expr pairs computed together (RowParams::online).
std::vector<Accumulator> declare_accs(KernelWriter& w, const std::vector<int64_t>& phase, bool split_welford,
                                      const std::vector<std::pair<int64_t, int64_t>>& online = {});
// Combines the accumulators over the block and finishes their results.
void reduce_block(KernelWriter& w, const std::vector<Accumulator>& accs, const std::string& row_len);
// Writes each row-shaped output once per row (keepdim: reduced dims at 0)
// at w.row_index.
void store_row_outputs(KernelWriter& w, const RowDomain& s);
// Row output o's index at the current row (w.row_index), and which of its
// dims domain dim d is (-1: a reduced dim, not one of o's).
std::vector<std::string> row_output_index(const KernelWriter& w, const RowDomain& s, int64_t o);
int row_output_dim(const KernelWriter& w, const RowDomain& s, int64_t o, size_t d);

}  // namespace kf
