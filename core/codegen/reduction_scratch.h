// The scratch of reductions split over blocks (column reductions, and rows
// split over blocks), shared by their emitters: per phase, the partials of
// each (split, row) in 8-byte words, then one array per reduction result
// with one word per row (the kept index), read by the later kernels.
//
//   [0, W * splits * rows)  the partials of the phase running now (W: the
//                           most words any phase's accumulators take)
//   then one array of rows words per reduction result, in phase order.
#pragma once

#include <string>
#include <vector>

#include "core/codegen/kernel_writer.h"
#include "core/schedule/kernel_schedule.h"

namespace kf {

// Rows (of a column tile) or vectors (of a split row) each thread loads
// before computing any: its loads in flight.
inline constexpr int kRowsInFlight = 4;

// The register type of an accumulator (Welford's triple for a variance).
std::string acc_type(const Expr& e, DType acc);
// The typed pointer to accumulator `a`'s partials of `phase` (`splits`
// rows of `rows` words; reads the local `splits`).
std::string partials_of(KernelWriter& w, const std::vector<int64_t>& phase, size_t a, const std::string& rows);
// Points the writer's stored results at their arrays: those of phases
// before `phase` (all of them for the epilogue).
void use_stored_results(KernelWriter& w, const RowDomain& rows, size_t phase, const std::string& row_count);
// Words: of one accumulator's partial; the most any phase's partials take
// (per split and row); the per-row result arrays.
int column_acc_words(const Fusion& f, const Expr& e);
int column_partial_words(const Fusion& f, const RowDomain& rows);
int column_result_words(const Fusion& f, const RowDomain& rows);

}  // namespace kf
