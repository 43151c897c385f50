// What the scan emitters share (emit_scan.cpp: a block per line and the
// three-kernel thread-per-line path; emit_scan_single_pass.cpp: the
// single-pass kernel): the scan's operands, its identity and combining
// expression, and the lines' indices.
#pragma once

#include <string>
#include <vector>

#include "core/codegen/kernel_writer.h"
#include "core/schedule/kernel_schedule.h"

namespace kf::scan_code {

struct ScanOperands {
  int64_t in, out;
  size_t dim, rank;
  Op op;
  bool exclusive;
  DType in_t, out_t, acc;
};

ScanOperands scan_operands(const KernelWriter& w, const ScanParams& p);
// The scan's identity and the combination of a and b (C++ expressions in
// the accumulator type).
std::string identity(const ScanOperands& o);
std::string combine(const ScanOperands& o, const std::string& a, const std::string& b);
// The dims of the result but the scanned one, in memory order (outermost
// first), and their indices for line `linear`.
std::vector<std::string> line_index(KernelWriter& w, const ScanParams& p, const ScanOperands& o,
                                    const std::string& linear);
// The number of lines, hoisted.
std::string lines_count(KernelWriter& w, const ScanOperands& o);
// One element: the input at idx as the accumulator type.
std::string element(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& idx);
void store(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& idx, const std::string& acc);
// Vector group `group`'s elements into `into` (one register per lane;
// lane j at `base` with `dim` + j), behind the group's in-range test `ok`.
void group_elements(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& base, size_t dim, int group,
                    const std::string& ok, const std::vector<std::string>& into);

// emit_scan_single_pass.cpp: the single-pass kernel (ScanParams::pass_rows
// > 0), and the device helpers it needs before it.
void emit_single_pass(KernelWriter& w, const ScanParams& p, const ScanOperands& o);
extern const char* const kPublishedValues;

}  // namespace kf::scan_code
