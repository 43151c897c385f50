// In-place outputs in the run plan: an output that updates its input is
// written straight into the input's memory where its segment's kernel reads
// that input only at the element it writes (a pointwise kernel of one loop
// reading the input at the identity index: optimizer steps, GEGLU backward);
// likewise for a row kernel (softmax, a fused residual add + RMSNorm);
// everywhere else (the input read transposed, shifted, broadcast, by
// norm backward's column sums, by a later segment) it is written to an intermediate and
// copied at the end. The plan is checked directly; the results too, on the
// CPU backend (the GPU differential test runs the same fusions on a GPU).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <variant>

#include "core/pipeline/plan.h"
#include "core/schedule/in_place.h"
#include "core/text/text_parser.h"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

namespace {

using Kind = kf::TensorRef::Kind;

// The plan of `text` for float32 inputs of `shape` (all of one shape).
// (`windows`: Tuning::pointwise_in_place_windows; -1: the default.)
std::shared_ptr<kf::Plan> plan_of(const std::string& text, std::vector<int64_t> shape, size_t num_inputs,
                                  int windows = -1) {
  auto f = kf::parse_fusion(text);
  static std::vector<float> data(1 << 12);
  std::vector<DLTensor> tensors(num_inputs);
  std::vector<const DLTensor*> in(num_inputs);
  for (size_t i = 0; i < num_inputs; ++i) {
    tensors[i] = DLTensor{data.data(), {kDLCPU, 0}, static_cast<int32_t>(shape.size()), {kDLFloat, 32, 1},
                          shape.data(), nullptr, 0};
    in[i] = &tensors[i];
  }
  kf::Binding binding = kf::bind_inputs(*f, in.data(), num_inputs);
  if (windows < 0) return kf::plan_for(*f, binding);
  kf::Tuning tuning;
  tuning.pointwise_in_place_windows = windows;
  return kf::build_plan(*f, binding, tuning);
}

Kind final_kind(const kf::Plan& p, size_t output) {
  return p.segmentation.run_plan.final_values.at(output).kind;
}

// An Adam-like step: both updated tensors are read only where they are
// written, so both outputs are the caller's tensors (no intermediate).
void test_pointwise_step_writes_in_place(void**) {
  auto p = plan_of(
      "input p: tensor<float32, 2>\ninput g: tensor<float32, 2>\ninput m: tensor<float32, 2>\n"
      "const b1: float32 = 0.9\nconst lr: float32 = 0.001\n"
      "m1 = mul(m, b1)\nm2 = add(m1, g)\nu = mul(m2, lr)\np2 = sub(p, u)\n"
      "output p2 {alias=0}\noutput m2 {alias=2}\n",
      {8, 16}, 3);
  assert_int_equal(p->segmentation.segments.size(), 1);
  assert_int_equal(p->segmentation.run_plan.intermediates.size(), 0);
  assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(Kind::Output));
  assert_int_equal(static_cast<int>(final_kind(*p, 1)), static_cast<int>(Kind::Output));
  const std::vector<int64_t>& safe = p->segmentation.segments[0].in_place_inputs;
  assert_int_equal(safe.size(), 3);  // p, g and m are all read at the identity index
}

// x + transpose(x) in place: the kernel reads x[j, i] where it writes
// x[i, j], so the output must go through an intermediate.
void test_transposed_read_is_deferred(void**) {
  auto p = plan_of("input x: tensor<float32, 2>\nt = permute(x) {perm=[1, 0]}\ny = add(x, t)\noutput y {alias=0}\n",
                   {16, 16}, 1);
  assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(Kind::Intermediate));
  for (const kf::Segment& s : p->segmentation.segments) assert_int_equal(s.in_place_inputs.size(), 0);
}

// x + (x shifted by one along the row, padded): another element of x is
// read where each element is written: deferred, or, with in-place windows
// (the default), written in place through a window of the row.
void test_shifted_read_is_deferred(void**) {
  const std::string text =
      "input x: tensor<float32, 2>\nconst z: float32 = 0\n"
      "s = slice(x) {dim=1, start=1}\nq = pad(s, z) {pads=[0, 0, 0, 1]}\ny = add(x, q)\noutput y {alias=0}\n";
  assert_int_equal(static_cast<int>(final_kind(*plan_of(text, {8, 16}, 1, 0), 0)), static_cast<int>(Kind::Intermediate));
  assert_int_equal(static_cast<int>(final_kind(*plan_of(text, {8, 16}, 1), 0)), static_cast<int>(Kind::Output));
}

// A row kernel reads the row in every phase before a barrier and writes
// each element in its last pass, in the thread that reads it there: a
// softmax-like row (and a fused residual add + RMSNorm) updates in place.
void test_row_kernel_writes_in_place(void**) {
  auto p = plan_of(
      "input x: tensor<float32, 2>\nm = max(x) {axes=[1], keepdim=true}\ny = sub(x, m)\noutput y {alias=0}\n",
      {8, 64}, 1);
  assert_int_equal(p->segmentation.segments.size(), 1);
  assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(Kind::Output));
  auto q = plan_of(
      "input x: tensor<float32, 2>\ninput r: tensor<float32, 2>\nconst eps: float32 = 1e-6\n"
      "s = add(x, r)\nsq = mul(s, s)\nms = mean(sq) {axes=[1], keepdim=true}\nme = add(ms, eps)\n"
      "inv = rsqrt(me)\ny = mul(s, inv)\noutput y {alias=0}\noutput s {alias=1}\n",
      {8, 64}, 2);
  assert_int_equal(q->segmentation.run_plan.intermediates.size(), 0);
  assert_int_equal(static_cast<int>(final_kind(*q, 0)), static_cast<int>(Kind::Output));
  assert_int_equal(static_cast<int>(final_kind(*q, 1)), static_cast<int>(Kind::Output));
}

// A row max and its input shifted along the row: the max's kernel reads
// the row first, then the pointwise kernel reads x shifted where it writes
// it: deferred, or with in-place windows (the default) in place.
void test_row_kernel_shifted_read_is_deferred(void**) {
  const std::string text =
      "input x: tensor<float32, 2>\nconst z: float32 = 0\nm = max(x) {axes=[1], keepdim=true}\n"
      "s = slice(x) {dim=1, start=1}\nq = pad(s, z) {pads=[0, 0, 0, 1]}\ny = sub(q, m)\noutput y {alias=0}\n";
  assert_int_equal(static_cast<int>(final_kind(*plan_of(text, {8, 64}, 1, 0), 0)), static_cast<int>(Kind::Intermediate));
  assert_int_equal(static_cast<int>(final_kind(*plan_of(text, {8, 64}, 1), 0)), static_cast<int>(Kind::Output));
}

// Norm backward's column sums (an inner-outer row kernel) read rows that
// other blocks write: deferred.
void test_inner_outer_is_deferred(void**) {
  auto p = plan_of(
      "input dy: tensor<float32, 2>\ninput x: tensor<float32, 2>\n"
      "p = mul(dy, x)\nrs = sum(p) {axes=[1], keepdim=true}\ndx = sub(dy, rs)\ncs = sum(p) {axes=[0]}\n"
      "output dx {alias=0}\noutput cs\n",
      {64, 256}, 2);
  bool inner_outer = false;
  for (const kf::Segment& s : p->segmentation.segments)
    if (s.schedule && std::holds_alternative<kf::RowParams>(*s.schedule))
      inner_outer = inner_outer || std::get<kf::RowParams>(*s.schedule).has_outer();
  assert_true(inner_outer);
  assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(Kind::Intermediate));
}

// The input read again by a later segment: deferred as before.
void test_later_reader_is_deferred(void**) {
  auto p = plan_of(
      "input x: tensor<float32, 2>\ny = neg(x)\nc = segment_set(x)\nz = exp(c)\noutput y {alias=0}\noutput z\n",
      {8, 16}, 1);
  // Values: x 0, y 1, c 2, z 3. Whatever order the two segments run in,
  // y is written in place only if no segment after y's reads x.
  const auto& segs = p->segmentation.segments;
  assert_int_equal(segs.size(), 2);
  size_t producer = 0, last_reader = 0;
  for (size_t k = 0; k < segs.size(); ++k) {
    for (int64_t o : segs[k].task.outputs)
      if (o == 1) producer = k;
    for (int64_t i : segs[k].task.inputs)
      if (i == 0) last_reader = k;
  }
  const Kind want = last_reader > producer ? Kind::Intermediate : Kind::Output;
  assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(want));
}

// index_add_ into an embedding gradient: the scatter's kernels read the
// tensor they scatter into only where they write it, so the result is the
// caller's tensor (and the GPU leaves out the copy onto itself;
// gpu_test_gpu_in_place checks the values).
void test_scatter_writes_in_place(void**) {
  auto f = kf::parse_fusion(
      "input x: tensor<float32, 2>\ninput i: tensor<int64, 1>\ninput s: tensor<float32, 2>\n"
      "y = index_reduce(x, i, s) {dim=0, reduce=sum}\noutput y {alias=0}\n");
  std::vector<float> x(8 * 4), src(3 * 4);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k);
  for (size_t k = 0; k < src.size(); ++k) src[k] = 100.0f * static_cast<float>(k + 1);
  std::vector<int64_t> idx = {5, 1, 5}, xs = {8, 4}, is = {3}, ss = {3, 4};
  DLTensor t[3] = {{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, xs.data(), nullptr, 0},
                   {idx.data(), {kDLCPU, 0}, 1, {kDLInt, 64, 1}, is.data(), nullptr, 0},
                   {src.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ss.data(), nullptr, 0}};
  const DLTensor* in[3] = {&t[0], &t[1], &t[2]};
  kf::Binding binding = kf::bind_inputs(*f, in, 3);
  auto p = kf::plan_for(*f, binding);
  assert_int_equal(p->segmentation.segments.size(), 1);
  assert_int_equal(p->segmentation.run_plan.intermediates.size(), 0);
  assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(Kind::Output));
  const std::vector<int64_t>& safe = p->segmentation.segments[0].in_place_inputs;
  assert_int_equal(safe.size(), 1);
  assert_int_equal(safe[0], 0);  // x, not the index or the updates
}

// The Adam-like step with p column-major, g and m row-major: a tiled
// kernel (p through a tile, p2 through a staged tile, m2 in phase 2).
// Its reads of each tile come before the barrier that precedes its
// stores, or in the storing thread: both outputs are the caller's
// tensors. (The GPU test test_gpu_in_place test_tiled_step checks the
// values.)
void test_tiled_step_writes_in_place(void**) {
  const std::string adam =
      "input p: tensor<float32, 2>\ninput g: tensor<float32, 2>\ninput m: tensor<float32, 2>\n"
      "const b1: float32 = 0.9\nconst lr: float32 = 0.001\n"
      "m1 = mul(m, b1)\nm2 = add(m1, g)\nu = mul(m2, lr)\np2 = sub(p, u)\n"
      "output p2 {alias=0}\noutput m2 {alias=2}\n";
  static std::vector<float> data(1 << 12);
  std::vector<int64_t> shape = {16, 64}, column_major = {1, 16};
  const auto plan = [&](const std::string& text, size_t n, const std::vector<bool>& transposed,
                        const kf::Tuning& tuning = kf::default_tuning()) {
    auto f = kf::parse_fusion(text);
    std::vector<DLTensor> t(n);
    std::vector<const DLTensor*> in(n);
    for (size_t i = 0; i < n; ++i) {
      t[i] = DLTensor{data.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape.data(),
                      transposed[i] ? column_major.data() : nullptr, 0};
      in[i] = &t[i];
    }
    kf::Binding binding = kf::bind_inputs(*f, in.data(), n);
    return kf::build_plan(*f, binding, tuning);
  };
  auto p = plan(adam, 3, {true, false, false});
  assert_int_equal(p->segmentation.segments.size(), 1);
  const auto* tiled = std::get_if<kf::TiledParams>(&*p->segmentation.segments[0].schedule);
  assert_non_null(tiled);
  assert_int_equal(tiled->outputs_staged.size(), 1);
  assert_int_equal(p->segmentation.run_plan.intermediates.size(), 0);
  assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(Kind::Output));
  assert_int_equal(static_cast<int>(final_kind(*p, 1)), static_cast<int>(Kind::Output));
  assert_int_equal(p->segmentation.segments[0].in_place_inputs.size(), 3);
  // With a second moment v: g and m column-major beside row-major p and
  // v (seed 1056028048 c0197): m2 is stored along a in phase 1, into m,
  // which phase 2 reads from its tile alone; the kernel fills the tiles,
  // then a barrier, then stores m2. All three results are the caller's
  // tensors (they were copied after the kernel).
  const std::string adam_v =
      "input p: tensor<float32, 2>\ninput g: tensor<float32, 2>\ninput m: tensor<float32, 2>\n"
      "input v: tensor<float32, 2>\nconst b1: float32 = 0.9\nconst lr: float32 = 0.001\n"
      "m1 = mul(m, b1)\nm2 = add(m1, g)\nv1 = mul(v, b1)\ngg = mul(g, g)\nv2 = add(v1, gg)\n"
      "mv = mul(m2, v2)\nu = mul(mv, lr)\np2 = sub(p, u)\n"
      "output p2 {alias=0}\noutput m2 {alias=2}\noutput v2 {alias=3}\n";
  auto q = plan(adam_v, 4, {false, true, true, false});
  assert_int_equal(q->segmentation.segments.size(), 1);
  const auto* t = std::get_if<kf::TiledParams>(&*q->segmentation.segments[0].schedule);
  assert_non_null(t);
  assert_int_equal(t->outputs_a.size(), 1);
  const std::vector<int64_t> overwritten = kf::tiles_overwritten_in_phase_1(*q->concrete, *t);
  assert_int_equal(overwritten.size(), 1);
  assert_int_equal(overwritten[0], 2);  // m
  assert_int_equal(q->segmentation.run_plan.intermediates.size(), 0);
  assert_int_equal(static_cast<int>(final_kind(*q, 0)), static_cast<int>(Kind::Output));
  assert_int_equal(static_cast<int>(final_kind(*q, 1)), static_cast<int>(Kind::Output));
  assert_int_equal(static_cast<int>(final_kind(*q, 2)), static_cast<int>(Kind::Output));
  // Tuning::tiled_block_many_outputs: the three-output tile takes 512
  // threads at 3, the two-output one keeps tiled_block's 256.
  kf::Tuning many, none;
  many.tiled_block_many_outputs = 3;
  none.tiled_block_many_outputs = 0;
  auto q256 = plan(adam_v, 4, {false, true, true, false}, none);
  assert_int_equal(std::get<kf::TiledParams>(*q256->segmentation.segments[0].schedule).block, 256);
  auto q512 = plan(adam_v, 4, {false, true, true, false}, many);
  assert_int_equal(std::get<kf::TiledParams>(*q512->segmentation.segments[0].schedule).block, 512);
  auto p256 = plan(adam, 3, {true, false, false}, many);
  assert_int_equal(std::get<kf::TiledParams>(*p256->segmentation.segments[0].schedule).block, 256);
}

// A rotary embedding in place (rotate-half: the kernel reads q's other
// half where it writes each element): under
// Tuning::pointwise_in_place_windows, the loop takes a window of its
// innermost dim, reads q only inside it, and writes straight into q;
// without it, through an intermediate. A shift across rows (a read of
// the next row) never qualifies.
void test_rotary_window_writes_in_place(void**) {
  const std::string rope =
      "input q: tensor<float32, 2>\ninput c: tensor<float32, 2>\ninput s: tensor<float32, 2>\n"
      "q1 = slice(q) {dim=1, start=0, stop=8}\nq2 = slice(q) {dim=1, start=8, stop=end}\nn2 = neg(q2)\n"
      "r = cat(n2, q1) {dim=1}\nqc = mul(q, c)\nrs = mul(r, s)\ny = add(qc, rs)\noutput y {alias=0}\n";
  const std::string next_row =
      "input x: tensor<float32, 2>\nconst z: float32 = 0\n"
      "s = slice(x) {dim=0, start=1}\nq = pad(s, z) {pads=[0, 1, 0, 0]}\ny = add(x, q)\noutput y {alias=0}\n";
  static std::vector<float> data(1 << 12);
  std::vector<int64_t> shape = {8, 16};
  const auto plan = [&](const std::string& text, size_t n, int windows) {
    auto f = kf::parse_fusion(text);
    std::vector<DLTensor> t(n);
    std::vector<const DLTensor*> in(n);
    for (size_t i = 0; i < n; ++i) {
      t[i] = DLTensor{data.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
      in[i] = &t[i];
    }
    kf::Binding binding = kf::bind_inputs(*f, in.data(), n);
    kf::Tuning tuning;
    tuning.pointwise_in_place_windows = windows;
    return kf::build_plan(*f, binding, tuning);
  };
  for (int windows : {0, 1}) {
    auto p = plan(rope, 3, windows);
    assert_int_equal(p->segmentation.segments.size(), 1);
    const auto* pw = std::get_if<kf::PointwiseParams>(&*p->segmentation.segments[0].schedule);
    assert_non_null(pw);
    assert_int_equal(pw->loops[0].window, windows);
    assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(windows ? Kind::Output : Kind::Intermediate));
    const std::vector<int64_t>& safe = p->segmentation.segments[0].in_place_inputs;
    assert_int_equal(std::count(safe.begin(), safe.end(), 0), windows);  // q
    auto r = plan(next_row, 1, windows);
    const auto* rw = std::get_if<kf::PointwiseParams>(&*r->segmentation.segments[0].schedule);
    assert_non_null(rw);
    // (its window would be the whole domain, rows and columns: only a
    // window of the innermost dim is taken, pointwise.cpp)
    assert_int_equal(rw->loops[0].window, 0);
    assert_int_equal(static_cast<int>(final_kind(*r, 0)), static_cast<int>(Kind::Intermediate));
  }
}

// Two loops in one kernel (outputs of two inputs' sizes, not provably
// equal), each updating its own input in place at the element it reads:
// under Tuning::pointwise_in_place_windows both are written in place (no
// loop reads the other's input; a rotary embedding of q and k sharing cos
// and sin, cast once); without it, through intermediates as before.
void test_two_loops_write_in_place(void**) {
  auto f = kf::parse_fusion(
      "input x: tensor<float32, 2>\ninput v: tensor<float32, 2>\ninput c: tensor<float32, 1>\n"
      "e = exp(c)\ny = mul(x, e)\nw = mul(v, e)\noutput y {alias=0}\noutput w {alias=1}\n");
  static std::vector<float> data(1 << 12);
  std::vector<int64_t> xs = {8, 16}, cs = {16};
  DLTensor t[3] = {{data.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, xs.data(), nullptr, 0},
                   {data.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, xs.data(), nullptr, 0},
                   {data.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, cs.data(), nullptr, 0}};
  const DLTensor* in[3] = {&t[0], &t[1], &t[2]};
  kf::Binding binding = kf::bind_inputs(*f, in, 3);
  for (int windows : {0, 1}) {
    kf::Tuning tuning;
    tuning.pointwise_in_place_windows = windows;
    auto p = kf::build_plan(*f, binding, tuning);
    assert_int_equal(p->segmentation.segments.size(), 1);
    const auto* pw = std::get_if<kf::PointwiseParams>(&*p->segmentation.segments[0].schedule);
    assert_non_null(pw);
    assert_int_equal(pw->loops.size(), 2);
    assert_int_equal(p->segmentation.run_plan.intermediates.size(), windows ? 0 : 2);
    const Kind want = windows ? Kind::Output : Kind::Intermediate;
    assert_int_equal(static_cast<int>(final_kind(*p, 0)), static_cast<int>(want));
    assert_int_equal(static_cast<int>(final_kind(*p, 1)), static_cast<int>(want));
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pointwise_step_writes_in_place),
      cmocka_unit_test(test_transposed_read_is_deferred),
      cmocka_unit_test(test_shifted_read_is_deferred),
      cmocka_unit_test(test_row_kernel_writes_in_place),
      cmocka_unit_test(test_row_kernel_shifted_read_is_deferred),
      cmocka_unit_test(test_inner_outer_is_deferred),
      cmocka_unit_test(test_later_reader_is_deferred),
      cmocka_unit_test(test_scatter_writes_in_place),
      cmocka_unit_test(test_tiled_step_writes_in_place),
      cmocka_unit_test(test_rotary_window_writes_in_place),
      cmocka_unit_test(test_two_loops_write_in_place),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
