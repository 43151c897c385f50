// KernelWriter: emits the CUDA text of one kernel for a Task. It owns the
// argument slots (each extent, stride, pointer or scalar the kernel reads
// becomes one slot, read once into a local at the top of the kernel) and the
// recursive "value at index" evaluation: value_at(v, idx) emits the code
// that computes value v at the multi-index idx (one C index expression per
// dim) and returns the local holding it. Pointwise ops broadcast
// right-aligned (a size-1 dim reads index 0), shape ops are index
// arithmetic, inputs are loaded through their strides. Results are memoized
// per (value, index) within the current block scope, so a value read twice
// at the same index is computed once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/ir/index_rules.h"

namespace kf {

// The most CUDA text one KernelWriter writes (every kernel of a segment's
// source together): a backstop for emission that grows faster than the
// fusion (value_at memoizes per value and index, so a value read at many
// indices is written once per index). Legitimate sources are well under
// 1 MB per hundred ops; beyond this NVRTC would take minutes. The
// environment variable KFUSE_MAX_SOURCE_MB (read per segment) lowers or
// raises it (tests use it to hit it cheaply).
constexpr size_t kMaxKernelSourceBytes = size_t{32} << 20;

class KernelWriter {
 public:
  KernelWriter(const ConcreteFusion& c, const Task& task);

  const Fusion& fusion() const { return f_; }
  const ConcreteFusion& concrete() const { return c_; }
  bool is_input(int64_t value) const { return is_input_[static_cast<size_t>(value)]; }  // read from outside the task
  const std::string& index_type() const { return idx_t_; }
  SizeClass size_class(int64_t value, size_t dim) const {
    return c_.size_classes[static_cast<size_t>(value)][dim];
  }
  size_t rank(int64_t value) const { return c_.size_classes[static_cast<size_t>(value)].size(); }

  // Kernel-level locals (emitted once at the top): "1"/"0" for extents of
  // size class 1/0.
  std::string extent(int64_t value, size_t dim);
  std::string stride(int64_t value, size_t dim);
  std::string pointer(int64_t value);  // typed pointer to element 0
  std::string numel(int64_t value);
  // A hoisted local computed from other hoisted locals.
  std::string hoist(const std::string& type, const std::string& prefix, const std::string& expr);

  // Body text.
  void line(const std::string& s);
  void open(const std::string& head);  // head + " {", opens a memo scope
  void close_open(const std::string& head);  // "} head {": a sibling scope
  void close();
  std::string fresh(const std::string& prefix);
  // A named place in the body, at the current position and indentation,
  // filled later (what goes there is known only once the code after it is
  // written: which vector registers were used, the conditions they need).
  struct Section {
    size_t chunk;
    int depth;
  };
  Section reserve();
  void fill(Section s, const std::vector<std::string>& lines);

  // Emits `decl name = rem % e;` and `rem /= e;` for a non-negative index
  // `rem` and e = extent(value, dim): with int indices by kf_fastdiv (a
  // Divisor argument slot), else by plain division.
  void divmod(const std::string& decl, const std::string& name, const std::string& rem, int64_t value, size_t dim);
  // The quotient of a non-negative index `n` by extent(value, dim), as an
  // expression: by kf_fastdiv with int indices, else a plain division.
  std::string quotient(const std::string& n, int64_t value, size_t dim);

  std::string value_at(int64_t value, const std::vector<std::string>& idx);
  // Element offset sum(idx[d] * stride[d]) of a task input or output.
  std::string offset(int64_t value, const std::vector<std::string>& idx);
  // The element's address for a vector access: `pointer + t0 + (t1 + ...)`.
  // Left to right, each term of pointer + t0 + t1 + t2 is sign-extended
  // and added in 64 bits on its own; the inner terms are summed in the
  // index type first, while the outermost (a row kernel's row, invariant
  // over the row) stays a term of its own that the compiler hoists with
  // the pointer (summing it in too cost the row kernels 10%: docs/perf-log.md,
  // session 10).
  std::string address(int64_t value, const std::vector<std::string>& idx);
  // `pointer[offset]`: the element of `value` at `idx`. Pointer first, then
  // the strides, always in that order: each may hoist a local and take an
  // argument slot, and within one `+` expression C++ leaves the order to
  // the compiler (g++ and clang++ emitted different kernels and cache keys).
  std::string element(int64_t value, const std::vector<std::string>& idx);
  std::vector<std::string> offset_terms(int64_t value, const std::vector<std::string>& idx);
  void store(int64_t value, const std::vector<std::string>& idx, const std::string& reg);
  // The storage form of register `reg` of dtype t (store_form, from the
  // unrounded float where `reg` is a rounded half/bfloat16 result).
  std::string stored(DType t, const std::string& reg) const;

  // Rows (PerRow kernels): the index of the current row per domain dim, and
  // the registers holding finished reduction results.
  std::vector<std::string> row_index;  // domain dims; reduced dims unused
  std::vector<bool> reduced;
  std::map<int64_t, std::string> row_results;
  // The function that reduces a value over the threads working on one row:
  // the block, in the cluster row kernel (RowKernel::Cluster) the blocks of
  // the cluster (kf_cluster_reduce), in the short-row kernel
  // (RowKernel::ShortRows) the row's group of threads (kf_group_reduce).
  std::string row_reduce = "kf_block_reduce";
  // The short-row kernel: a local that says whether this thread's group has
  // a row of its own (else it computes a copy of the last row, so that its
  // warp's shuffles see every lane, and must store nothing). Empty: always.
  std::string row_live;
  // The cluster row kernel: this block's part of the row, elements
  // [part_begin, part_end) (locals; a multiple of the vector width from
  // the row's start), its stage holding the part from part_begin, and the
  // most elements any block's part has (part_most). Empty: the whole row.
  std::string part_begin, part_end, part_most;
  // The across kernel (RowParams::across): each output written across the
  // rows -> its shared tile (declared by emit_row, filled and stored by
  // row_streaming's output pass). Empty: none.
  std::map<int64_t, std::string> across_tiles;
  // Column kernels in several phases: the results an earlier kernel of the
  // source computed, read from their per-column arrays in memory (value ->
  // pointer local), at the linear index of the result's kept dims of
  // `result_domain`. Between begin_result_loads and end_result_loads the
  // loads go to the place begin_result_loads marked (before a loop over
  // rows: each column's results are loaded once, not once per row).
  std::map<int64_t, std::string> result_arrays;
  // Outputs stored through a reshape (RowDomain::views): output -> the
  // value it reshapes. value_at(output, idx) reads that value at idx (its
  // own index), and store/offset map idx through the reshape's groups to
  // the output's index.
  std::map<int64_t, int64_t> views;
  int64_t result_domain = -1;
  // The kept dims of `result_domain` over which the column index is
  // ravelled, outermost first (RowDomain::dims_in_order: the order the
  // column kernels walk and store them); empty: the logical order.
  std::vector<size_t> result_order;
  void begin_result_loads();
  void end_result_loads();
  // float registers fixed over the row -> their kf_rcp_for_div (divisions
  // by them multiply instead: kf_div_by).
  std::map<std::string, std::string> reciprocals;

  // Vector lanes (vector loops): while `lane` >= 0, a load of a vector
  // input at the lane's index (each input dim d reads domain index
  // lane_index[dims[d]], or 0 where dims[d] is -1: a broadcast dim) reads
  // lane `lane` of the vector register of (input, `group`), loaded at the
  // same mapping of `lane_base` (lane 0's index). A kernel
  // may hold several groups at once (rows cached in registers); `section`
  // records where a register was first needed, so its load goes there.
  int lane = -1;
  int group = 0;
  int section = 0;
  // 16-bit lanes read from their 32-bit words (vector_lane_form): set by
  // the row kernels, which hold the vectors across phases (the column
  // kernels, which do not, measured up to 3% slower with it: docs/perf-log.md).
  bool word_lanes = false;
  // Lanes with indices of their own (emit_pointwise's flat vectors): a
  // vector register serves only reads at exactly the lanes' indices, never
  // reads through a reshape that keep the lanes' inner index alone.
  bool exact_lanes = false;
  std::vector<std::string> lane_index;
  std::vector<std::string> lane_base;
  // While not empty and `lane` >= 0: a load of one element whose index
  // varies with the lane reads only where the lane's index in lane_dim is
  // below this bound, else gives 0 (the Edges kernel's lanes past the
  // row's end, evaluated before their guard).
  std::string lane_limit;
  // Vectors at any element alignment (a column twin's vector path at odd
  // widths): while `any_left` is set, vector loads and the plan's stores go
  // through kf_vload_any / kf_vstore_any (any_left: the elements from lane
  // 0's to the end of its row, capped at two vectors; any_mask: the warp's
  // lanes that store together), and other outputs are stored only at lanes
  // below any_left.
  std::string any_left, any_mask;
  // Vector inputs loaded at any element alignment (VectorPlan::any_aligned;
  // use_vectors sets them): kf_vload_any, their run-time checks element-
  // aligned.
  std::vector<int64_t> any_aligned;
  bool loads_any_aligned(int64_t v) const {
    return std::find(any_aligned.begin(), any_aligned.end(), v) != any_aligned.end();
  }
  std::map<int64_t, std::vector<int>> vector_inputs;  // candidate -> its dims' domain dims (VectorPlan::inputs)
  struct VectorReg {
    std::string reg;
    std::vector<std::string> base;  // the input's own index of lane 0
    int section = 0;
    int ok_group = 0;   // the group whose in-range condition guards the load
    std::string guard;  // a further condition on lane 0's index ("": none)
    // The input's dims whose extents its vector conditions check against
    // the domain's: the plan's, or, read through a reshape, the vector dim
    // only (KernelWriter::vector_base).
    std::vector<int> dims;
  };
  std::map<std::pair<int64_t, int>, VectorReg> vector_regs;  // used (candidate, group) -> register
  // Lanes seen through a shift along their dim (a slice's offset, a cat
  // branch's begin: rotate_half's cat(-x[..., h:], x[..., :h])): when the
  // shift keeps every lane of a vector together (offsets and cat bounds a
  // multiple of the width, lane_conditions, checked at run time with the
  // vector path's), a read of a vector input at the shifted lanes loads
  // one vector at the shifted base, in a group of its own (ids from
  // kShiftedGroups) guarded by the cat branch taken (VectorReg::guard).
  static constexpr int kShiftedGroups = 1 << 20;
  size_t lane_dim = 0;
  int lane_width = 0;  // 0: no shifted lanes (use_vectors sets both)
  // Vector inputs read only at a shift (a cat's operands, a pad's input:
  // VectorPlan entries kShiftedIndex, the pointwise loop's): their dims of
  // other domain dims than the lanes' are shifted too, inside the bound
  // their loads are guarded by. Set by the pointwise vector loop only.
  bool shifted_reads = false;
  std::vector<std::string> lane_conditions;
  std::vector<ArgCheck> lane_checks;  // lane_conditions for the host (ArgCheck)

  // Which paths a kernel with a 16-byte vector path and a scalar fallback
  // writes: both behind a run-time test, or one alone, the other path
  // being a twin kernel of its own that the host picks by its ArgChecks
  // (KernelPlan::scalar_twins). Emitters that split read it.
  enum class Paths : uint8_t { Both, Vector, Scalar };
  Paths paths = Paths::Both;

  // The argument word (slot index) of `value`'s extent or stride at `dim`,
  // or of its data pointer: what an ArgCheck reads.
  int word(ArgSlot::Kind kind, int64_t value, int dim = 0) { return slot(kind, value, dim); }
  // Adds `value`'s extent at `dim` to `check`: its word, or (size class 0
  // or 1, never an argument) that constant to the offset.
  void add_extent(ArgCheck* check, int64_t value, size_t dim);
  // The host check "extent of `value` at `dim` % modulus == 0".
  ArgCheck extent_multiple(int64_t value, size_t dim, int modulus);

  // Tiles staged in shared memory: a read of `value` (an input, or a value
  // the task computes) at exactly `first` reads the expression `second`
  // instead (a register form).
  std::map<int64_t, std::pair<std::vector<std::string>, std::string>> tile_reads;

  // Ends one kernel of a multi-kernel source: returns its preamble + body
  // and starts the next kernel empty (argument slots are kept: every kernel
  // of the source takes the same argument block).
  std::string take_kernel();

  std::string preamble() const { return preamble_; }
  std::string body() const;
  const std::vector<ArgSlot>& args() const { return args_; }

 private:
  int slot(ArgSlot::Kind kind, int64_t value, int dim);
  std::optional<std::string> memo(const std::string& key) const;
  void remember(const std::string& key, const std::string& reg);
  std::string compute(int64_t value, const std::vector<std::string>& idx);
  std::string load_input(int64_t value, const std::vector<std::string>& idx);
  std::string scalar_input(int64_t value);
  std::string reduction_result(int64_t value, const std::vector<std::string>& idx);
  std::string stored_result(int64_t value, const std::vector<std::string>& idx);
  // The index of a view output for index `idx` of the value it reshapes.
  std::vector<std::string> view_index(int64_t output, const std::vector<std::string>& idx);
  // offset_terms of `value` at its own index idx.
  std::vector<std::string> own_offset_terms(int64_t value, const std::vector<std::string>& idx);
  // An index of `from` as an index of `to` through a reshape, by the
  // reshape rule's terms (reshape_index): per group, the linear index over
  // `from`'s dims unravelled over `to`'s.
  std::vector<std::string> regroup(const OperandIndex& terms, int64_t from, const std::vector<std::string>& idx,
                                   int64_t to);
  // The index e reads operand k at (its index rule, core/ir/index_rules.h).
  OperandIndex rule(const Expr& e, size_t k) const;
  // `terms` as index expressions for the output read at `idx`: Zero and Out
  // terms; the others left empty, for the op's own arithmetic.
  static std::vector<std::string> plain_index(const OperandIndex& terms, const std::vector<std::string>& idx);
  // Whether index `i` of a dim is the current lanes' own index along their dim.
  bool lane_indexed(const std::string& i) const;
  // fn() with the lanes' index along domain dim `dim` replaced by `index`
  // (lane 0's by `base`), loads guarded by `guard` too, and `conditions`
  // (with their host forms `checks`) required of the vector path.
  std::string shifted_lanes(size_t dim, const std::string& index, const std::string& base, const std::string& guard,
                            const std::vector<std::string>& conditions, const std::vector<ArgCheck>& checks,
                            const std::function<std::string()>& fn);
  // The domain dim whose lanes' index is `i`: the lane dim's (lanes seen
  // through shifts there: lane_indexed), or, with shifted reads (the
  // pointwise vector loop), another dim's, the same for every lane of a
  // group; nothing otherwise.
  std::optional<size_t> lanes_dim_of(const std::string& i) const;
  std::string pointwise(const Expr& e, const std::vector<std::string>& idx);
  std::string shape(const Expr& e, const std::vector<std::string>& idx);
  std::string indexing(const Expr& e, const std::vector<std::string>& idx);
  std::string creation(const Expr& e, const std::vector<std::string>& idx);
  std::string linear_index(int64_t value, const std::vector<std::string>& idx);
  std::string define(DType t, const std::string& expr);
  std::optional<int64_t> saturated_operand(const Expr& cast) const;
  std::optional<std::vector<std::string>> vector_base(const std::vector<int>& dims, const std::vector<std::string>& idx,
                                                      bool* reshaped) const;

  const ConcreteFusion& c_;
  const Fusion& f_;
  std::string idx_t_;
  const std::vector<bool>& fast_;  // per expr: its fast form allowed (ConcreteFusion::approximate)
  std::vector<bool> produced_, is_input_, is_output_;
  std::vector<ArgSlot> args_;
  std::map<std::string, std::string> hoisted_;  // key -> local name
  std::string preamble_;
  std::vector<std::string> body_;  // text, with each Section one chunk of its own
  int depth_ = 1;
  int counter_ = 0;
  size_t written_ = 0;  // bytes of text written, against max_written_
  size_t max_written_ = kMaxKernelSourceBytes;
  void count_written(size_t bytes);
  std::vector<std::map<std::string, std::string>> scopes_;
  struct Unrounded {
    std::string raw;          // the float before rounding
    bool saturating = false;  // a saturating float8 rounding (saturated_round_form)
  };
  std::map<std::string, Unrounded> unrounded_;  // rounded narrow-float register -> its float before rounding
  std::optional<Section> result_section_;
  std::vector<std::string> result_lines_;
  std::string lane_guard_;                   // while in shifted lanes: their guard
  int lane_ok_group_ = -1;                   // while in shifted lanes: the group they came from
  std::vector<bool> lane_shifted_;           // while in shifted lanes: the domain dims shifted
  std::map<std::string, int> shifted_groups_;  // group|base|guard -> group id
  std::map<std::string, std::string> result_regs_;  // value@column -> register, within the section
};

}  // namespace kf
