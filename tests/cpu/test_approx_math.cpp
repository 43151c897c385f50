// Where kernels may use the fast forms of exp, sigmoid, silu and shared
// divisions (core/ir/approx_math.h): only where every output the
// result reaches is a narrow float and nothing on the way cancels or
// feeds a function that turns the error into a larger one.
// Project headers first: cmocka defines a fail() macro that kf::fail's
// declaration must not see.
#include "core/ir/approx_math.h"
#include "core/pipeline/plan.h"
#include "core/text/text_parser.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {  // this cmocka's header has no C++ guard
#include <cmocka.h>
}

#include <algorithm>
#include <string>

using namespace kf;

namespace {

// The ops that may take their fast form, in expr order: "exp div".
std::string fast_ops(const std::string& text) {
  const std::shared_ptr<Fusion> f = parse_fusion(text);
  const std::vector<bool> fast = approximate_exprs(*f);
  std::string s;
  for (size_t i = 0; i < fast.size(); ++i) {
    if (!fast[i]) continue;
    if (!s.empty()) s += ' ';
    s += op_name(f->exprs[i].op);
  }
  return s;
}

const std::string kSoftmaxBody =
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\n"
    "p = div(e, s)\n";

void softmax_into_bfloat16_is_fast(void**) {
  const std::string t = "input x: tensor<bfloat16, 2>\n" + kSoftmaxBody + "y = cast(p) {dtype=bfloat16}\noutput y\n";
  assert_string_equal(fast_ops(t).c_str(), "exp div");
}

void float16_and_float8_outputs_are_fast(void**) {
  const std::string h = "input x: tensor<float32, 2>\n" + kSoftmaxBody + "y = cast(p) {dtype=float16}\noutput y\n";
  assert_string_equal(fast_ops(h).c_str(), "exp div");
  const std::string q = "input x: tensor<float32, 2>\n" + kSoftmaxBody + "y = cast(p) {dtype=float8_e4m3fn}\noutput y\n";
  assert_string_equal(fast_ops(q).c_str(), "exp div");
}

void float32_outputs_stay_exact(void**) {
  const std::string t = "input x: tensor<bfloat16, 2>\n" + kSoftmaxBody + "output p\n";
  assert_string_equal(fast_ops(t).c_str(), "");
  // The sum as a float32 output too: exp stays exact, the division (whose
  // error reaches only the bfloat16 output) may still be fast.
  const std::string s = "input x: tensor<bfloat16, 2>\n" + kSoftmaxBody + "y = cast(p) {dtype=bfloat16}\noutput y\noutput s\n";
  assert_string_equal(fast_ops(s).c_str(), "div");
}

void log_of_the_sum_stays_exact(void**) {
  const std::string t =
      "input x: tensor<bfloat16, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "m = max(xf) {axes=[1], keepdim=true}\n"
      "d = sub(xf, m)\n"
      "e = exp(d)\n"
      "s = sum(e) {axes=[1], keepdim=true}\n"
      "l = log(s)\n"
      "o = sub(d, l)\n"
      "y = cast(o) {dtype=bfloat16}\n"
      "output y\n";
  assert_string_equal(fast_ops(t).c_str(), "");
}

void cancellation_stays_exact(void**) {
  // sigmoid's backward: s * (1 - s) cancels near s = 1.
  const std::string t =
      "input x: tensor<bfloat16, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "s = sigmoid(xf)\n"
      "const one: float32 = 1\n"
      "om = sub(one, s)\n"
      "g = mul(s, om)\n"
      "y = cast(g) {dtype=bfloat16}\n"
      "output y\n";
  assert_string_equal(fast_ops(t).c_str(), "");
  // exp plus a value of unknown sign may cancel; plus a positive constant not.
  const std::string u =
      "input x: tensor<float32, 1>\n"
      "input b: tensor<float32, 1>\n"
      "e = exp(x)\n"
      "a = add(e, b)\n"
      "y = cast(a) {dtype=bfloat16}\n"
      "output y\n";
  assert_string_equal(fast_ops(u).c_str(), "");
  const std::string v =
      "input x: tensor<float32, 1>\n"
      "const one: float32 = 1\n"
      "e = exp(x)\n"
      "a = add(e, one)\n"
      "y = cast(a) {dtype=bfloat16}\n"
      "output y\n";
  assert_string_equal(fast_ops(v).c_str(), "exp");
}

void products_of_any_sign_are_fast(void**) {
  // silu(x) * g: a product does not cancel, whatever g's sign.
  const std::string t =
      "input x: tensor<bfloat16, 2>\n"
      "input g: tensor<bfloat16, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "gf = cast(g) {dtype=float32}\n"
      "s = silu(xf)\n"
      "p = mul(s, gf)\n"
      "y = cast(p) {dtype=bfloat16}\n"
      "output y\n";
  assert_string_equal(fast_ops(t).c_str(), "silu");
}

void narrow_compute_and_rounded_intermediates_stay_exact(void**) {
  // exp computed in bfloat16 (no float32 op to approximate).
  const std::string t =
      "input x: tensor<bfloat16, 1>\n"
      "e = exp(x)\n"
      "output e\n";
  assert_string_equal(fast_ops(t).c_str(), "");
  // A fast result rounded to bfloat16 and used again: the rounding may
  // flip, and the later op would carry a whole step of error.
  const std::string u =
      "input x: tensor<float32, 1>\n"
      "e = exp(x)\n"
      "h = cast(e) {dtype=bfloat16}\n"
      "hf = cast(h) {dtype=float32}\n"
      "q = mul(hf, hf)\n"
      "y = cast(q) {dtype=bfloat16}\n"
      "output y\n";
  assert_string_equal(fast_ops(u).c_str(), "");
}

void inputs_of_a_fast_exp_must_be_exact(void**) {
  // exp(exp(x)): the inner one's error becomes a larger relative error of
  // the outer one's result; the outer one alone may be fast.
  const std::string t =
      "input x: tensor<float32, 1>\n"
      "e = exp(x)\n"
      "f = exp(e)\n"
      "y = cast(f) {dtype=bfloat16}\n"
      "output y\n";
  assert_string_equal(fast_ops(t).c_str(), "exp");
  const std::shared_ptr<Fusion> f = parse_fusion(t);
  const std::vector<bool> fast = approximate_exprs(*f);
  // The fast one is the exp whose input is another exp's result.
  for (size_t i = 0; i < fast.size(); ++i) {
    if (!fast[i]) continue;
    const Expr& e = f->exprs[i];
    assert_int_equal(static_cast<int>(e.op), static_cast<int>(Op::EXP));
    const int64_t in = e.inputs.at(0);
    const auto producer = std::find_if(f->exprs.begin(), f->exprs.end(), [&](const Expr& p) {
      return !p.outputs.empty() && p.outputs[0] == in;
    });
    assert_true(producer != f->exprs.end());
    assert_int_equal(static_cast<int>(producer->op), static_cast<int>(Op::EXP));
  }
}

// The decision is made once per concretization and travels with the
// plan: ConcreteFusion::approximate, what codegen reads, is
// approximate_exprs of the definition.
void the_plan_carries_the_decision(void**) {
  const std::string t = "input x: tensor<bfloat16, 2>\n" + kSoftmaxBody + "y = cast(p) {dtype=bfloat16}\noutput y\n";
  const std::shared_ptr<Fusion> f = parse_fusion(t);
  std::vector<uint16_t> data(4 * 8, 0);
  int64_t shape[2] = {4, 8};
  DLTensor x{data.data(), {kDLCPU, 0}, 2, {kDLBfloat, 16, 1}, shape, nullptr, 0};
  const DLTensor* in[1] = {&x};
  Binding b;
  bind_inputs(*f, in, 1, &b);
  const std::vector<bool>& planned = plan_for(*f, b)->concrete->approximate;
  assert_true(planned == approximate_exprs(*f));
  assert_int_equal(std::count(planned.begin(), planned.end(), true), 2);  // exp, div
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(softmax_into_bfloat16_is_fast),
      cmocka_unit_test(float16_and_float8_outputs_are_fast),
      cmocka_unit_test(float32_outputs_stay_exact),
      cmocka_unit_test(log_of_the_sum_stays_exact),
      cmocka_unit_test(cancellation_stays_exact),
      cmocka_unit_test(products_of_any_sign_are_fast),
      cmocka_unit_test(narrow_compute_and_rounded_intermediates_stay_exact),
      cmocka_unit_test(inputs_of_a_fast_exp_must_be_exact),
      cmocka_unit_test(the_plan_carries_the_decision),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
