// The caller's output layouts are part of concretization (issue 42): with
// kf_execute_into the plan is made for the memory the kernels write, so a
// row-major output of a transposed input gets a tiled kernel (not strided
// stores), a transposed output of row-major inputs too, and an output in
// the inputs' own order the plain pointwise kernel. kf_execute keeps
// choosing the layout itself. Checked on the plans here; results through
// the C API in test_output_layouts_api.c.
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "core/pipeline/plan.h"
#include "core/text/text_parser.h"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

namespace {

constexpr const char* kAdd =
    "input x: tensor<float32, 2>\ninput z: tensor<float32, 2>\ny = add(x, z)\noutput y\n";

struct Call {
  std::vector<int64_t> shape{64, 48};
  std::vector<int64_t> row_major{48, 1}, col_major{1, 64};
  std::vector<float> a = std::vector<float>(64 * 48), b = std::vector<float>(64 * 48), out = std::vector<float>(64 * 48);
  DLTensor tensor(float* data, std::vector<int64_t>& strides) {
    return DLTensor{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape.data(), strides.data(), 0};
  }
};

// The plan for input x of `x_strides` and z of `z_strides` (row-major
// unless given), and (unless NULL) an output of `out_strides`.
std::shared_ptr<kf::Plan> plan_for(const kf::Fusion& f, Call& c, std::vector<int64_t>& x_strides,
                                   std::vector<int64_t>* out_strides, kf::Binding* b,
                                   std::vector<int64_t>* z_strides = nullptr) {
  DLTensor x = c.tensor(c.a.data(), x_strides), z = c.tensor(c.b.data(), z_strides ? *z_strides : c.row_major);
  const DLTensor* in[2] = {&x, &z};
  kf::bind_inputs(f, in, 2, b);
  if (out_strides != nullptr) {
    DLTensor y = c.tensor(c.out.data(), *out_strides);
    DLTensor* outs[1] = {&y};
    kf::bind_output_layouts(f, outs, 1, b);
  }
  return kf::plan_for(f, *b);
}

bool tiled(const kf::Plan& p) {
  const kf::Segment& s = p.segmentation.segments.at(0);
  return s.schedule && std::holds_alternative<kf::TiledParams>(*s.schedule);
}

void test_output_order_joins_the_plan(void**) {
  auto f = kf::parse_fusion(kAdd);
  Call c;
  kf::Binding own, row, col;
  // kf_execute: row-major inputs give a row-major output, pointwise.
  auto p_own = plan_for(*f, c, c.row_major, nullptr, &own);
  assert_false(tiled(*p_own));
  // kf_execute_into, row-major output: the same kernel family.
  auto p_row = plan_for(*f, c, c.row_major, &c.row_major, &row);
  assert_false(tiled(*p_row));
  assert_true(p_row->concrete->stride_orders.at(2) == (std::vector<int>{0, 1}));
  // A column-major output: its own plan, tiled.
  auto p_col = plan_for(*f, c, c.row_major, &c.col_major, &col);
  assert_true(p_col->concrete->stride_orders.at(2) == (std::vector<int>{1, 0}));
  assert_true(tiled(*p_col));
  assert_false(row.key == col.key);
  assert_true(p_col != p_row);
}

void test_transposed_inputs_into_row_major_output(void**) {
  auto f = kf::parse_fusion(kAdd);
  Call c;
  kf::Binding own, row;
  // x and z column-major (a transposed view each): kfuse's own choice
  // follows them (a column-major output), plain pointwise; the caller's
  // row-major output (torch.empty(shape)) needs tiles, not strided stores.
  auto p_own = plan_for(*f, c, c.col_major, nullptr, &own, &c.col_major);
  assert_true(p_own->concrete->stride_orders.at(2) == (std::vector<int>{1, 0}));
  assert_false(tiled(*p_own));
  auto p_row = plan_for(*f, c, c.col_major, &c.row_major, &row, &c.col_major);
  assert_true(p_row->concrete->stride_orders.at(2) == (std::vector<int>{0, 1}));
  assert_true(tiled(*p_row));
}

// An operand expanded along a dim (stride 0) moves no memory along it: the
// dim sorts outermost, so it is never the operand's "innermost" dim that
// sent a plain add through transpose tiles (an attention mask [4, 1, 1, S]
// expanded along the batch: 10.5 ms against 0.5).
void test_expanded_operand_is_not_transposed(void**) {
  auto f = kf::parse_fusion(kAdd);
  Call c;
  std::vector<int64_t> expanded{0, 1};
  kf::Binding b;
  auto p = plan_for(*f, c, c.row_major, nullptr, &b, &expanded);
  assert_false(tiled(*p));
  const kf::InputLayout& z = p->concrete->input_layouts.at(1);
  assert_true(z.stride_order == (std::vector<int>{0, 1}));
  assert_true(z.contiguous.at(1));  // its rows are still read as vectors
  assert_false(z.contiguous.at(0));
  assert_true(p->concrete->stride_orders.at(2) == (std::vector<int>{0, 1}));
}

// A reduction's walk follows its input's memory order unless the caller's
// outputs, which count twice (a strided write costs more than a strided
// read), say otherwise: softmax along dim 1 of a column-major x is a
// column normalization when kfuse lays out the output (column-major too),
// a row one into the caller's row-major output.
void test_reduction_order_votes_with_outputs(void**) {
  auto f = kf::parse_fusion(
      "input x: tensor<float32, 2>\nm = max(x) {axes=[1], keepdim=true}\nd = sub(x, m)\ne = exp(d)\n"
      "s = sum(e) {axes=[1], keepdim=true}\ny = div(e, s)\noutput y\n");
  Call c;
  DLTensor x = c.tensor(c.a.data(), c.col_major);
  const DLTensor* in[1] = {&x};
  kf::Binding own, into;
  kf::bind_inputs(*f, in, 1, &own);
  auto p_own = kf::plan_for(*f, own);
  kf::bind_inputs(*f, in, 1, &into);
  DLTensor y = c.tensor(c.out.data(), c.row_major);
  DLTensor* outs[1] = {&y};
  kf::bind_output_layouts(*f, outs, 1, &into);
  auto p_into = kf::plan_for(*f, into);
  const auto& s_own = *p_own->segmentation.segments.at(0).schedule;
  const auto& s_into = *p_into->segmentation.segments.at(0).schedule;
  assert_true(std::holds_alternative<kf::ColumnParams>(s_own));
  assert_true(std::holds_alternative<kf::RowParams>(s_into));
}

// kf_execute_into reuses the plan kfuse made for the inputs alone where
// the caller's outputs are laid out as that plan writes them (no second
// plan and compile), and binds them into a key of their own otherwise.
void test_matching_outputs_reuse_the_plan(void**) {
  auto f = kf::parse_fusion(kAdd);
  Call c;
  kf::Binding b;
  for (std::vector<int64_t>* inputs : {&c.row_major, &c.col_major}) {
    auto p = plan_for(*f, c, *inputs, nullptr, &b, inputs);
    const bool row_inputs = inputs == &c.row_major;
    DLTensor row = c.tensor(c.out.data(), c.row_major), col = c.tensor(c.out.data(), c.col_major);
    DLTensor* outs_row[1] = {&row};
    DLTensor* outs_col[1] = {&col};
    assert_true(kf::outputs_in_plan_layout(*f, *p->concrete, outs_row, 1, b) == row_inputs);
    assert_true(kf::outputs_in_plan_layout(*f, *p->concrete, outs_col, 1, b) == !row_inputs);
    // NULL strides mean row-major; a count that disagrees is left to the checks.
    row.strides = nullptr;
    assert_true(kf::outputs_in_plan_layout(*f, *p->concrete, outs_row, 1, b) == row_inputs);
    assert_true(kf::outputs_in_plan_layout(*f, *p->concrete, outs_row, 0, b));
  }
  // A size-1 dim's stride says nothing: [1, N] row-major and "column-major" match.
  Call one;
  one.shape = {1, 48};
  std::vector<int64_t> wide{48, 1}, odd{1, 1};
  kf::Binding b1;
  auto p1 = plan_for(*f, one, wide, nullptr, &b1, &wide);
  DLTensor y = one.tensor(one.out.data(), odd);
  DLTensor* outs[1] = {&y};
  assert_true(kf::outputs_in_plan_layout(*f, *p1->concrete, outs, 1, b1));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output_order_joins_the_plan),
      cmocka_unit_test(test_transposed_inputs_into_row_major_output),
      cmocka_unit_test(test_matching_outputs_reuse_the_plan),
      cmocka_unit_test(test_expanded_operand_is_not_transposed),
      cmocka_unit_test(test_reduction_order_votes_with_outputs),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
