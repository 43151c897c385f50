// Inputs laid out across the rows of a reduction that their other operands
// read along them (a softmax backward's y column-major beside a row-major
// grad) are copied into a compact buffer in the other operands' layout
// before their first reader (layout.cpp choose_input_relayouts,
// ConcreteFusion::relayout_inputs, the run plan's copy_in). Checked here:
// where the decision is made and where not, the run plan, and results on
// the CPU backend against the same fusion on row-major copies of the
// inputs and against values computed in double.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <variant>
#include <vector>

#include "core/pipeline/plan.h"
#include "core/runtime/executor.h"
#include "core/text/text_parser.h"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

namespace {

// A float32 tensor in host memory: logical values v(i) = a pseudo-random
// function of the flat row-major index, laid out in `order` (outermost
// dim first; empty: row-major), its innermost dim padded by `pad`
// elements, `offset` elements past the start of its buffer, and dim
// `expanded` (unless -1) of stride 0.
struct Tensor {
  std::vector<int64_t> shape, strides;
  std::vector<float> data;
  int64_t offset = 0;
  DLTensor dl{};

  Tensor(std::vector<int64_t> s, std::vector<int> order = {}, int64_t pad = 0, int64_t off = 0, int seed = 1,
         int expanded = -1)
      : shape(std::move(s)), offset(off) {
    const size_t r = shape.size();
    if (order.empty()) {
      order.resize(r);
      std::iota(order.begin(), order.end(), 0);
    }
    strides.assign(r, 0);
    int64_t stride = 1;
    for (size_t k = r; k-- > 0;) {
      const size_t d = static_cast<size_t>(order[k]);
      if (static_cast<int>(d) == expanded) continue;
      strides[d] = stride;
      stride *= shape[d] + (k == r - 1 ? pad : 0);
    }
    data.assign(static_cast<size_t>(stride + off), -7.0f);  // padding holds garbage
    for_each([&](int64_t flat, int64_t at) {
      data[static_cast<size_t>(at)] = static_cast<float>(std::sin(0.37 * static_cast<double>(flat % 977) + seed) +
                                                         0.25 * seed);
    });
    dl = DLTensor{data.data(), {kDLCPU, 0}, static_cast<int32_t>(r), {kDLFloat, 32, 1}, shape.data(), strides.data(),
                  static_cast<uint64_t>(off) * sizeof(float)};
  }
  // fn(flat row-major index, element offset) for every element.
  template <class Fn>
  void for_each(Fn fn) const {
    const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t rest = flat, at = offset;
      for (size_t d = shape.size(); d-- > 0;) {
        at += (rest % shape[d]) * strides[d];
        rest /= shape[d];
      }
      fn(flat, at);
    }
  }
  float at(int64_t flat) const {
    float v = 0;
    for_each([&](int64_t f, int64_t a) {
      if (f == flat) v = data[static_cast<size_t>(a)];
    });
    return v;
  }
  std::vector<float> values() const {
    std::vector<float> out;
    for_each([&](int64_t, int64_t a) { out.push_back(data[static_cast<size_t>(a)]); });
    return out;
  }
};

struct Run {
  std::shared_ptr<kf::Plan> plan;
  std::vector<std::vector<float>> outputs;  // row-major values
};

// Plans and runs `f` on the CPU backend: with `into`, into outputs the
// caller allocates (kf_execute_into) row-major or in `out_orders` (per
// output, outermost dim first; empty: row-major), else into outputs in
// the plan's own layouts (kf_execute).
Run run(const kf::Fusion& f, std::vector<Tensor*> inputs, bool into, const std::vector<std::vector<int>>& out_orders = {}) {
  std::vector<const DLTensor*> in;
  for (Tensor* t : inputs) in.push_back(&t->dl);
  kf::Binding b;
  kf::bind_inputs(f, in.data(), in.size(), &b);
  std::vector<Tensor> outs;
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const auto sizes = b.sizes[f.outputs[i].value];
    outs.emplace_back(std::vector<int64_t>(sizes.begin(), sizes.end()), i < out_orders.size() ? out_orders[i] : std::vector<int>{});
  }
  std::vector<DLTensor*> out_ptrs;
  for (Tensor& t : outs) out_ptrs.push_back(&t.dl);
  if (into) kf::bind_output_layouts(f, out_ptrs.data(), out_ptrs.size(), &b);
  Run r;
  r.plan = kf::plan_for(f, b);
  if (!into)  // outputs laid out as the plan writes them
    for (size_t i = 0; i < f.outputs.size(); ++i) {
      const std::vector<int>& order = r.plan->concrete->stride_orders.at(static_cast<size_t>(f.outputs[i].value));
      outs[i] = Tensor(outs[i].shape, order);
      out_ptrs[i] = &outs[i].dl;
    }
  // An in-place output is its input's tensor (as kf_execute makes it).
  for (size_t i = 0; i < f.outputs.size(); ++i)
    if (f.outputs[i].alias_input >= 0) out_ptrs[i] = &inputs[static_cast<size_t>(f.outputs[i].alias_input)]->dl;
  kf::execute(*r.plan, b, in.data(), out_ptrs.data(), kf::ExecOptions{});
  for (size_t i = 0; i < f.outputs.size(); ++i)
    r.outputs.push_back(f.outputs[i].alias_input >= 0 ? inputs[static_cast<size_t>(f.outputs[i].alias_input)]->values()
                                                     : outs[i].values());
  return r;
}

// The same values row-major and compact, in a buffer of its own.
Tensor row_major_copy(const Tensor& t, int seed) {
  Tensor c(t.shape, {}, 0, 0, seed);
  const std::vector<float> v = t.values();
  c.for_each([&](int64_t flat, int64_t a) { c.data[static_cast<size_t>(a)] = v[static_cast<size_t>(flat)]; });
  return c;
}

std::vector<bool> relayouts(const Run& r) { return r.plan->concrete->relayout_inputs; }

// Runs `text` on `inputs` (both output modes), checks which inputs are
// copied in, and compares every output with the run on row-major copies
// (where nothing is copied in).
std::vector<std::vector<float>> check(const char* text, std::vector<Tensor*> inputs, std::vector<bool> expected) {
  auto f = kf::parse_fusion(text);
  std::vector<Tensor> copies;
  copies.reserve(inputs.size());
  std::vector<Tensor*> plain;
  for (size_t i = 0; i < inputs.size(); ++i) copies.push_back(row_major_copy(*inputs[i], 1));
  for (Tensor& t : copies) plain.push_back(&t);
  const Run reference = run(*f, plain, false);
  for (bool copied : relayouts(reference)) assert_false(copied);
  std::vector<std::vector<float>> result;
  for (bool into : {false, true}) {
    const Run r = run(*f, inputs, into);
    assert_true(relayouts(r) == expected);
    // The run plan copies each such input in once, before a segment.
    size_t copies_in = 0;
    for (const kf::SegmentRun& s : r.plan->segmentation.run_plan.segments) copies_in += s.copy_in.size();
    assert_int_equal(copies_in, static_cast<size_t>(std::count(expected.begin(), expected.end(), true)));
    assert_int_equal(r.outputs.size(), reference.outputs.size());
    for (size_t o = 0; o < r.outputs.size(); ++o)
      for (size_t k = 0; k < r.outputs[o].size(); ++k) {
        const float want = reference.outputs[o][k], got = r.outputs[o][k];
        if (std::fabs(want - got) > 1e-5f * (1.0f + std::fabs(want)))
          fail_msg("output %zu element %zu: %g, expected %g (into %d)", o, k, static_cast<double>(got),
                   static_cast<double>(want), into);
      }
    result = r.outputs;
  }
  return result;
}

constexpr const char* kSoftmaxBwd =
    "input g: tensor<float32, 2>\ninput y: tensor<float32, 2>\n"
    "p = mul(g, y)\ns = sum(p) {axes=[1], keepdim=true}\nd = sub(g, s)\no = mul(y, d)\noutput o\n";

// Output o of kSoftmaxBwd (row-major values) against double.
void check_softmax_bwd(const Tensor& g, const Tensor& y, const std::vector<float>& o) {
  const int64_t rows = g.shape[0], cols = g.shape[1];
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += double(g.at(i * cols + j)) * y.at(i * cols + j);
    for (int64_t j = 0; j < cols; j += 7) {
      const double want = y.at(i * cols + j) * (g.at(i * cols + j) - s);
      assert_true(std::fabs(want - o[static_cast<size_t>(i * cols + j)]) < 1e-4 * (1 + std::fabs(want)));
    }
  }
}

// c0061's class: softmax backward of a row-major grad and a column-major y.
void test_softmax_bwd_column_major_y(void**) {
  Tensor g({37, 130}), y({37, 130}, {1, 0}, 0, 0, 2);
  check_softmax_bwd(g, y, check(kSoftmaxBwd, {&g, &y}, {false, true})[0]);
}

// With padding and an offset on the copied input, and on the other one.
void test_softmax_bwd_padded_offset(void**) {
  Tensor g({33, 65}, {}, 3, 17), y({33, 65}, {1, 0}, 5, 9, 2);
  check(kSoftmaxBwd, {&g, &y}, {false, true});
}

// c0008's class: the reduction over the middle dim of [B, R, C]; g
// row-major at an offset (a column reduction for it), y with the reduced
// dim innermost: y is copied into g's order (kfuse's own), whichever
// layout the output has.
void test_softmax_bwd_middle_dim(void**) {
  constexpr const char* text =
      "input g: tensor<float32, 3>\ninput y: tensor<float32, 3>\n"
      "p = mul(g, y)\ns = sum(p) {axes=[1], keepdim=true}\nd = sub(g, s)\no = mul(y, d)\noutput o\n";
  Tensor g({3, 20, 24}, {}, 0, 17), y({3, 20, 24}, {2, 0, 1}, 0, 0, 2);
  check(text, {&g, &y}, {false, true});
}

// A transposed majority is not followed: with dy and dres column-major
// and x row-major, dy and dres are copied into x's order (row-major), so
// that the inner-outer kernel walks rows (copying x into the column-major
// order would hand it transposed rows, which it walks without vectors);
// a caller's column-major output would be copied into at the end
// (crosses_rows).
void test_transposed_majority(void**) {
  constexpr const char* text =
      "input dy: tensor<float32, 2>\ninput x: tensor<float32, 2>\ninput dres: tensor<float32, 2>\n"
      "g = mul(dy, x)\ns = mean(g) {axes=[1], keepdim=true}\nb = mul(x, s)\nc = sub(g, b)\n"
      "dx = add(c, dres)\ndw = sum(g) {axes=[0], keepdim=false}\noutput dx\noutput dw\n";
  Tensor dy({24, 80}, {1, 0}), x({24, 80}, {}, 0, 0, 2), dres({24, 80}, {1, 0}, 0, 0, 3);
  check(text, {&dy, &x, &dres}, {true, false, true});
}

// c0047's class: layernorm backward recomputing the statistics, x
// permuted [0, 2, 1] (T innermost), dy row-major with an offset, the
// weight broadcast over the rows (never copied).
void test_layernorm_bwd_permuted_x(void**) {
  constexpr const char* text =
      "input dy: tensor<float32, 3>\ninput x: tensor<float32, 3>\ninput w: tensor<float32, 1>\n"
      "mu = mean(x) {axes=[2], keepdim=true}\nxc = sub(x, mu)\nsq = mul(xc, xc)\n"
      "var = mean(sq) {axes=[2], keepdim=true}\nr = rsqrt(var)\nxhat = mul(xc, r)\n"
      "g = mul(dy, w)\ngx = mul(g, xhat)\ns1 = mean(g) {axes=[2], keepdim=true}\n"
      "s2 = mean(gx) {axes=[2], keepdim=true}\na = sub(g, s1)\nb = mul(xhat, s2)\nc = sub(a, b)\n"
      "dx = mul(c, r)\ndyx = mul(dy, xhat)\ndw = sum(dyx) {axes=[0, 1], keepdim=false}\n"
      "output dx\noutput dw\n";
  Tensor dy({2, 12, 40}, {}, 0, 17), x({2, 12, 40}, {0, 2, 1}, 0, 0, 2), w({40}, {}, 0, 0, 3);
  check(text, {&dy, &x, &w}, {false, true, false});
}

// c0142's class: RMSNorm backward, x permuted, padded weight, rstd given.
void test_rmsnorm_bwd_permuted_x(void**) {
  constexpr const char* text =
      "input dy: tensor<float32, 3>\ninput x: tensor<float32, 3>\ninput w: tensor<float32, 1>\n"
      "input rstd: tensor<float32, 3>\n"
      "xn = mul(x, rstd)\ng = mul(dy, w)\ngx = mul(g, xn)\ns = mean(gx) {axes=[2], keepdim=true}\n"
      "b = mul(xn, s)\nc = sub(g, b)\ndx = mul(c, rstd)\noutput dx\n";
  Tensor dy({3, 10, 48}), x({3, 10, 48}, {0, 2, 1}, 0, 0, 2), w({48}, {}, 1, 3, 3), rstd({3, 10, 1}, {}, 0, 0, 4);
  check(text, {&dy, &x, &w, &rstd}, {false, true, false, false});
}

// c0026's class: residual add + RMSNorm, x row-major at an offset, the
// residual permuted; the sum is an output too. Also an input that is an
// output (copied from the caller's tensor at the end, not from the copy).
void test_add_rmsnorm_permuted_residual(void**) {
  constexpr const char* text =
      "input x: tensor<float32, 3>\ninput res: tensor<float32, 3>\ninput w: tensor<float32, 1>\n"
      "h = add(x, res)\nsq = mul(h, h)\nms = mean(sq) {axes=[2], keepdim=true}\nr = rsqrt(ms)\n"
      "n = mul(h, r)\ny = mul(n, w)\noutput y\noutput h\noutput res\n";
  Tensor x({2, 9, 64}, {}, 0, 17), res({2, 9, 64}, {0, 2, 1}, 0, 0, 2), w({64}, {}, 0, 0, 3);
  const auto out = check(text, {&x, &res, &w}, {false, true, false});
  assert_true(out[2] == res.values());
}

// c0056's and c0094's class: an input across the rows that an output
// updates in place (h written into a column-major res, the normalized y
// into a transposed x). The input is copied in like any other; the output
// is produced in the copy's layout and copied into the input's memory at
// the end (ConcreteFusion::relayout_outputs), never written across its
// rows. Results, and the inputs' memory afterwards, as on row-major copies.
void test_in_place_input_copied(void**) {
  struct Case {
    const char* text;
    std::vector<int> x_order, res_order;
    std::vector<bool> copied;
    int64_t pad;
  };
  const Case cases[] = {
      {"input x: tensor<float32, 2>\ninput res: tensor<float32, 2>\n"
       "h = add(x, res)\nsq = mul(h, h)\nms = mean(sq) {axes=[1], keepdim=true}\nr = rsqrt(ms)\n"
       "y = mul(h, r)\noutput y\noutput h {alias=1}\n",
       {}, {1, 0}, {false, true}, 0},
      {"input x: tensor<float32, 2>\ninput res: tensor<float32, 2>\n"
       "h = add(x, res)\nsq = mul(h, h)\nms = mean(sq) {axes=[1], keepdim=true}\nr = rsqrt(ms)\n"
       "y = mul(h, r)\noutput y {alias=0}\noutput h {alias=1}\noutput r\n",
       {1, 0}, {}, {true, false}, 3},
  };
  for (const Case& c : cases)
    for (bool into : {false, true}) {
      Tensor x({16, 64}, c.x_order, c.pad, 5), res({16, 64}, c.res_order, 0, 0, 2);
      Tensor xc = row_major_copy(x, 1), rc = row_major_copy(res, 1);
      auto f = kf::parse_fusion(c.text);
      const Run reference = run(*f, {&xc, &rc}, false);
      const Run r = run(*f, {&x, &res}, into);
      assert_true(relayouts(r) == c.copied);
      const kf::ConcreteFusion& cf = *r.plan->concrete;
      for (size_t i = 0; i < f->outputs.size(); ++i) {
        const int64_t a = f->outputs[i].alias_input;
        assert_int_equal(cf.relayout_outputs.at(i), a >= 0 && c.copied[static_cast<size_t>(a)]);
      }
      assert_true(cf.describe().find("copied into the caller's layout") != std::string::npos);
      for (size_t o = 0; o < r.outputs.size(); ++o)
        for (size_t k = 0; k < r.outputs[o].size(); ++k)
          if (std::fabs(r.outputs[o][k] - reference.outputs[o][k]) > 1e-5f * (1.0f + std::fabs(reference.outputs[o][k])))
            fail_msg("output %zu element %zu: %g, expected %g (into %d)", o, k, static_cast<double>(r.outputs[o][k]),
                     static_cast<double>(reference.outputs[o][k]), into);
      assert_true(x.values() == xc.values());  // the inputs' memory after the call
      assert_true(res.values() == rc.values());
      // The padding of a padded x is left alone.
      if (c.pad > 0)
        for (int64_t row = 0; row < 64; ++row)
          for (int64_t p = 0; p < c.pad; ++p)
            assert_true(x.data[static_cast<size_t>(5 + row * (16 + c.pad) + 16 + p)] == -7.0f);
    }
}

// c0147's, c0075's and c0013's class: no input is laid out along the rows
// (a layernorm of a transposed x; an instance norm of a channels-last x; a
// softmax over dim 0 of a transposed x), and the caller's output is: the
// walk would follow the output (row_domain.cpp memory_order) and read x
// one element per sector, so x is copied into the output's order. With
// kfuse's own outputs (written in x's order), and with the caller's output
// laid out as x, nothing is copied.
void test_row_major_output_reference(void**) {
  struct Case {
    const char* text;
    std::vector<int64_t> shape;
    std::vector<int> x_order;
  };
  const Case cases[] = {
      {"input x: tensor<float32, 2>\ninput w: tensor<float32, 1>\n"
       "var, mean = var_mean(x) {axes=[1], keepdim=true, correction=0}\nxc = sub(x, mean)\nr = rsqrt(var)\n"
       "n = mul(xc, r)\ny = mul(n, w)\noutput y\n",
       {24, 80}, {1, 0}},
      {"input x: tensor<float32, 4>\ninput w: tensor<float32, 4>\n"
       "var, mean = var_mean(x) {axes=[2, 3], keepdim=true, correction=0}\nxc = sub(x, mean)\nr = rsqrt(var)\n"
       "n = mul(xc, r)\ny = mul(n, w)\noutput y\n",
       {2, 6, 5, 8}, {0, 2, 3, 1}},
      {"input x: tensor<float32, 2>\ninput w: tensor<float32, 1>\n"
       "m = max(x) {axes=[0], keepdim=true}\nd = sub(x, m)\ne = exp(d)\ns = sum(e) {axes=[0], keepdim=true}\n"
       "q = div(e, s)\ny = mul(q, w)\noutput y\n",
       {24, 80}, {1, 0}},
  };
  for (const Case& k : cases) {
    auto f = kf::parse_fusion(k.text);
    const std::vector<int64_t> ws = k.shape.size() == 4 ? std::vector<int64_t>{1, k.shape[1], 1, 1}
                                                        : std::vector<int64_t>{k.shape.back()};
    Tensor x(k.shape, k.x_order), w(ws, {}, 0, 0, 3), xc = row_major_copy(x, 1), wc = row_major_copy(w, 3);
    const Run reference = run(*f, {&xc, &wc}, false);
    const Run own = run(*f, {&x, &w}, false), into = run(*f, {&x, &w}, true);
    assert_true(relayouts(own) == (std::vector<bool>{false, false}));
    assert_true(relayouts(into) == (std::vector<bool>{true, false}));
    assert_false(into.plan->concrete->relayout_outputs.at(0));
    for (const Run* r : {&own, &into})
      for (size_t e = 0; e < reference.outputs[0].size(); ++e) {
        const float want = reference.outputs[0][e], got = r->outputs[0][e];
        if (std::fabs(want - got) > 1e-5f * (1.0f + std::fabs(want)))
          fail_msg("element %zu: %g, expected %g", e, static_cast<double>(got), static_cast<double>(want));
      }
  }
  // The caller's output laid out as x: nothing to copy.
  auto f = kf::parse_fusion(cases[0].text);
  Tensor x({24, 80}, {1, 0}), w({80}, {}, 0, 0, 3), y({24, 80}, {1, 0});
  const DLTensor* in[2] = {&x.dl, &w.dl};
  DLTensor* out[1] = {&y.dl};
  kf::Binding b;
  kf::bind_inputs(*f, in, 2, &b);
  kf::bind_output_layouts(*f, out, 1, &b);
  const kf::ConcreteFusion& cf = *kf::plan_for(*f, b)->concrete;
  assert_true(cf.relayout_inputs == (std::vector<bool>{false, false}));
  assert_false(cf.relayout_outputs.at(0));
}

// The same class where the inputs lie along the reduced dim and hold more
// bytes than the caller's row-major output (a softmax backward over dim 0
// of column-major g and y): the output is produced in the inputs' order
// (a row kernel along their memory) and copied at the end. Over dim 1
// (the inputs along a kept dim), the inputs are copied instead.
void test_row_major_output_copied(void**) {
  constexpr const char* dim0 =
      "input g: tensor<float32, 2>\ninput y: tensor<float32, 2>\n"
      "p = mul(g, y)\ns = sum(p) {axes=[0], keepdim=true}\nd = sub(g, s)\no = mul(y, d)\noutput o\n";
  Tensor g({16, 64}, {1, 0}), y({16, 64}, {1, 0}, 0, 0, 2);
  check(dim0, {&g, &y}, {false, false});
  auto f = kf::parse_fusion(dim0);
  assert_true(run(*f, {&g, &y}, true).plan->concrete->relayout_outputs.at(0));
  assert_false(run(*f, {&g, &y}, false).plan->concrete->relayout_outputs.at(0));
  auto f1 = kf::parse_fusion(kSoftmaxBwd);
  const Run r = run(*f1, {&g, &y}, true);
  assert_true(relayouts(r) == (std::vector<bool>{true, true}));
  assert_false(r.plan->concrete->relayout_outputs.at(0));
  check_softmax_bwd(g, y, r.outputs[0]);
}

// Not copied: an expanded input (a copy would materialize it), inputs
// that all agree (a column reduction of column-major inputs; a row-major
// softmax backward), and pointwise fusions (the tiled scheduler
// transposes there).
void test_not_copied(void**) {
  // An input written in place still orders the rows: y written into x
  // (row-major), the column-major residual copied; results as on copies.
  {
    Tensor x({16, 64}), res({16, 64}, {1, 0}, 0, 0, 2), xc = row_major_copy(x, 1), rc = row_major_copy(res, 1);
    auto f = kf::parse_fusion(
        "input x: tensor<float32, 2>\ninput res: tensor<float32, 2>\n"
        "h = add(x, res)\nsq = mul(h, h)\nms = mean(sq) {axes=[1], keepdim=true}\nr = rsqrt(ms)\n"
        "y = mul(h, r)\noutput y {alias=0}\noutput h\n");
    const std::vector<float> before = x.values();
    const Run reference = run(*f, {&xc, &rc}, false);
    const Run r = run(*f, {&x, &res}, false);
    assert_true(relayouts(r) == (std::vector<bool>{false, true}));
    assert_true(x.values() == xc.values());  // both written in place
    assert_true(r.outputs[0] == reference.outputs[0]);
    assert_true(r.outputs[1] == reference.outputs[1]);
    assert_false(x.values() == before);
  }
  // Expanded along the row (stride 0 over dim 1, which then sorts
  // outermost: its innermost dim is the kept dim 0, yet it is never
  // copied); the key tells it from a padded column-major y.
  {
    Tensor g({16, 64}), y({16, 64}, {}, 0, 0, 2, 1), yp({16, 64}, {1, 0}, 3, 0, 2);
    auto f = kf::parse_fusion(kSoftmaxBwd);
    kf::Binding be, bp;
    const DLTensor* ins[2] = {&g.dl, &y.dl};
    const DLTensor* insp[2] = {&g.dl, &yp.dl};
    kf::bind_inputs(*f, ins, 2, &be);
    kf::bind_inputs(*f, insp, 2, &bp);
    assert_false(be.key == bp.key);
    assert_true(kf::plan_for(*f, be)->concrete->input_layouts.at(1).expanded);
    assert_true(kf::plan_for(*f, bp)->concrete->relayout_inputs.at(1));
    check(kSoftmaxBwd, {&g, &y}, {false, false});
  }
  // All column-major, into outputs of kfuse's (in their order): a column
  // reduction reads them well (the caller's row-major outputs:
  // test_row_major_output_copied).
  {
    Tensor g({16, 64}, {1, 0}), y({16, 64}, {1, 0}, 0, 0, 2);
    auto f = kf::parse_fusion(kSoftmaxBwd);
    const Run r = run(*f, {&g, &y}, false);
    assert_true(relayouts(r) == (std::vector<bool>{false, false}));
    check_softmax_bwd(g, y, r.outputs[0]);
  }
  // Pointwise: a transposed operand goes through the tiled scheduler.
  {
    Tensor a({16, 64}), b({16, 64}, {1, 0}, 0, 0, 2);
    check("input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\nc = add(a, b)\noutput c\n", {&a, &b},
          {false, false});
  }
  // Broadcast over the row ([N, 1] statistics; a [C] weight): other size classes.
  {
    Tensor x({16, 64}), m({16, 1}, {}, 0, 0, 2), w({64}, {}, 0, 0, 3);
    check("input x: tensor<float32, 2>\ninput m: tensor<float32, 2>\ninput w: tensor<float32, 1>\n"
          "a = sub(x, m)\nb = mul(a, w)\ns = sum(b) {axes=[1], keepdim=true}\nc = sub(b, s)\noutput c\n",
          {&x, &m, &w}, {false, false, false});
  }
}

// An input copied in is read by two segments (cut by segment_set): one
// copy, before the first, released after the last.
void test_copy_read_by_two_segments(void**) {
  constexpr const char* text =
      "input g: tensor<float32, 2>\ninput y: tensor<float32, 2>\n"
      "p = mul(g, y)\ns = sum(p) {axes=[1], keepdim=true}\nss = segment_set(s)\nd = sub(g, ss)\no = mul(y, d)\n"
      "output o\n";
  Tensor g({20, 48}), y({20, 48}, {1, 0}, 0, 0, 2);
  check_softmax_bwd(g, y, check(text, {&g, &y}, {false, true})[0]);
  auto f = kf::parse_fusion(text);
  const Run r = run(*f, {&g, &y}, false);
  const kf::RunPlan& plan = r.plan->segmentation.run_plan;
  assert_int_equal(plan.segments.size(), 2);
  assert_int_equal(plan.segments.front().copy_in.size(), 1);
  const uint32_t slot = plan.segments.front().copy_in[0].slot;
  assert_int_equal(plan.intermediates.at(slot), f->inputs[1]);
  size_t releases = 0;
  for (size_t k = 0; k < plan.segments.size(); ++k)
    for (uint32_t s : plan.segments[k].release_after)
      if (s == slot) {
        ++releases;
        assert_int_equal(k, plan.segments.size() - 1);
      }
  assert_int_equal(releases, 1);
}

// A column norm's output that the caller lays out along another dim than
// the one the column kernel walks (its input's innermost, kept): a
// layernorm over the channels of NCHW into a channels-last output, a
// softmax over dim 0 into a column-major one. The kernel would store it
// one element per sector (seed 1853590537 c0120: 0.476 ms, 0.20x
// torch.compile, docs/perf-log.md session 40), so it is produced in its
// own order and copied into the caller's (ConcreteFusion::relayout_outputs,
// crosses_rows); laid out as the input, it is written where it is.
void test_column_norm_output_across_its_walk(void**) {
  struct Case {
    const char* text;
    std::vector<int64_t> shape;
    std::vector<int> out_order;
  };
  const Case cases[] = {
      {"input x: tensor<float32, 4>\nconst eps: float32 = 1e-5\n"
       "var, mean = var_mean(x) {axes=[1], keepdim=true, correction=0}\nve = add(var, eps)\nr = rsqrt(ve)\n"
       "xc = sub(x, mean)\ny = mul(xc, r)\noutput y\n",
       {2, 6, 5, 8}, {0, 2, 3, 1}},
      {"input x: tensor<float32, 2>\nm = max(x) {axes=[0], keepdim=true}\nd = sub(x, m)\ne = exp(d)\n"
       "s = sum(e) {axes=[0], keepdim=true}\ny = div(e, s)\noutput y\n",
       {24, 80}, {1, 0}},
  };
  for (const Case& k : cases) {
    auto f = kf::parse_fusion(k.text);
    Tensor x(k.shape);
    const Run reference = run(*f, {&x}, false);  // kfuse's own layout: nothing copied
    assert_false(reference.plan->concrete->relayout_outputs.at(0));
    for (const bool across : {true, false}) {
      const Run r = run(*f, {&x}, true, {across ? k.out_order : std::vector<int>{}});
      assert_true(r.plan->concrete->relayout_outputs.at(0) == across);
      for (size_t e = 0; e < r.outputs[0].size(); ++e) {
        const float want = reference.outputs[0][e], got = r.outputs[0][e];
        if (std::fabs(want - got) > 1e-5f * (1.0f + std::fabs(want)))
          fail_msg("%s element %zu: %g, expected %g", k.text, e, static_cast<double>(got), static_cast<double>(want));
      }
    }
  }
}

// A row norm's output that the caller lays out across the rows (a kept
// dim innermost: a layernorm into a [1, 0] output, a softmax into a
// [0, 2, 1] one). Under KFUSE_TUNE_ROW_ACROSS_OUTPUTS=1 (the ctest entry
// cpu_test_relayout_inputs_rows_across) it is written where it is by the
// row kernel (RowParams::across: no other kernel, no vector store of it),
// else produced in kfuse's order and copied at the end. Values against
// kfuse's own layout either way.
void test_row_norm_output_across_its_rows(void**) {
  const char* knob = std::getenv("KFUSE_TUNE_ROW_ACROSS_OUTPUTS");
  const bool across_on = knob != nullptr && std::string(knob) == "1";
  struct Case {
    const char* text;
    std::vector<int64_t> shape;
    std::vector<int> out_order;
  };
  const Case cases[] = {
      {"input x: tensor<float32, 2>\nconst eps: float32 = 1e-5\n"
       "var, mean = var_mean(x) {axes=[1], keepdim=true, correction=0}\nve = add(var, eps)\nr = rsqrt(ve)\n"
       "xc = sub(x, mean)\ny = mul(xc, r)\noutput y\n",
       {37, 80}, {1, 0}},
      {"input x: tensor<float32, 3>\nm = max(x) {axes=[2], keepdim=true}\nd = sub(x, m)\ne = exp(d)\n"
       "s = sum(e) {axes=[2], keepdim=true}\ny = div(e, s)\noutput y\n",
       {2, 19, 40}, {0, 2, 1}},
  };
  for (const Case& k : cases) {
    auto f = kf::parse_fusion(k.text);
    Tensor x(k.shape);
    const Run reference = run(*f, {&x}, false);
    const Run r = run(*f, {&x}, true, {k.out_order});
    assert_true(r.plan->concrete->relayout_outputs.at(0) == !across_on);
    int across_plans = 0;
    for (const kf::Segment& s : r.plan->segmentation.segments) {
      if (!s.schedule || !std::holds_alternative<kf::RowParams>(*s.schedule)) continue;
      const kf::RowParams& p = std::get<kf::RowParams>(*s.schedule);
      if (p.across.empty()) continue;
      ++across_plans;
      assert_int_equal(p.across.size(), 1);
      assert_int_equal(p.across[0], f->outputs[0].value);
      assert_int_equal(p.across_rows, 16);
      assert_int_equal(p.block, 32 * p.across_rows);
      assert_true(p.vectors.outputs.empty() && p.staged.empty() && !p.has_outer());
      // (the across kernel is the plan's only kernel)
      assert_false(p.kernels.long_rows || p.kernels.scalar_twin || p.kernels.edges || p.kernels.cluster);
      assert_int_equal(p.kernels.split_block, 0);
      assert_int_equal(p.kernels.short_rows_block, 0);
    }
    assert_int_equal(across_plans, across_on ? 1 : 0);
    for (size_t e = 0; e < r.outputs[0].size(); ++e) {
      const float want = reference.outputs[0][e], got = r.outputs[0][e];
      if (std::fabs(want - got) > 1e-5f * (1.0f + std::fabs(want)))
        fail_msg("%s element %zu: %g, expected %g", k.text, e, static_cast<double>(got), static_cast<double>(want));
    }
  }
}

// A scatter's result whose caller's layout puts the scatter's dim
// innermost: the atomic updates of a warp would each take a sector of
// their own, so it is produced in kfuse's layout and copied (layout.cpp
// scatter_across_updates); a scatter along the last dim is left as it is
// (its updates are scattered in any layout). Values against kfuse's own
// layout and a mean computed here.
void test_scatter_output_across_its_updates(void**) {
  const int64_t nodes = 6, feat = 8, edges = 20;
  std::vector<int64_t> dst(static_cast<size_t>(edges));
  for (int64_t e = 0; e < edges; ++e) dst[static_cast<size_t>(e)] = (e * 7) % 5;  // node 5 takes no update
  for (const int dim : {0, 1}) {
    const std::string text =
        std::string("input x: tensor<float32, 2>\ninput dst: tensor<int64, 1>\ninput msg: tensor<float32, 2>\n") +
        "d2 = unsqueeze(dst) {dim=" + std::to_string(1 - dim) + "}\nm = size(dst) {dim=0}\nf = size(msg) {dim=" +
        std::to_string(1 - dim) + "}\ndi = expand(d2, [" + (dim == 0 ? "m, f" : "f, m") + "])\n" +
        "agg = scatter(x, di, msg) {dim=" + std::to_string(dim) + ", reduce=mean, include_self=false}\noutput agg\n";
    auto f = kf::parse_fusion(text);
    const std::vector<int64_t> x_shape = dim == 0 ? std::vector<int64_t>{nodes, feat} : std::vector<int64_t>{feat, nodes};
    Tensor row_major_x(x_shape), column_major_x(x_shape, {1, 0});
    assert_true(column_major_x.values() == row_major_x.values());
    const Tensor& x = row_major_x;
    const std::vector<int64_t> msg_shape = dim == 0 ? std::vector<int64_t>{edges, feat} : std::vector<int64_t>{feat, edges};
    Tensor row_major_msg(msg_shape, {}, 0, 0, 3);
    // (the same values column-major: the updates walk src row-major, so it
    // is copied first, layout.cpp choose_input_relayouts)
    Tensor column_major_msg(msg_shape, {1, 0}, 0, 0, 3);
    assert_true(column_major_msg.values() == row_major_msg.values());
    Tensor index({edges});
    index.dl.data = dst.data();
    index.dl.dtype = {kDLInt, 64, 1};
    index.dl.byte_offset = 0;
    const Run reference = run(*f, {&row_major_x, &index, &row_major_msg}, false);
    assert_false(reference.plan->concrete->relayout_inputs.at(2));
    // (a column-major x lays the result out as the column-major msg: the
    // walk's reads and stores then cross memory alike, and msg is left as
    // it is, as a KV-cache write's key is: seed 1940430775 c0074)
    for (Tensor* x_in : {&row_major_x, &column_major_x})
      for (const bool transposed : {true, false})
        for (Tensor* msg_in : {&row_major_msg, &column_major_msg}) {
          const Tensor& msg = *msg_in;
          const bool x_rows = x_in == &row_major_x;
          const Run r = run(*f, {x_in, &index, msg_in}, true, {transposed ? std::vector<int>{1, 0} : std::vector<int>{}});
          assert_true(r.plan->concrete->relayout_outputs.at(0) == (transposed && dim == 0 && x_rows));
          assert_true(r.plan->concrete->relayout_inputs.at(2) == (msg_in == &column_major_msg && x_rows));
          assert_true(r.outputs[0].size() == static_cast<size_t>(nodes * feat));
          for (int64_t n = 0; n < nodes; ++n)
            for (int64_t c = 0; c < feat; ++c) {
              double sum = 0;
              int count = 0;
              for (int64_t e = 0; e < edges; ++e)
                if (dst[static_cast<size_t>(e)] == n) {
                  sum += msg.at(dim == 0 ? e * feat + c : c * edges + e);
                  ++count;
                }
              const int64_t flat = dim == 0 ? n * feat + c : c * nodes + n;
              const double want = count ? sum / count : x.at(flat);
              const float got = r.outputs[0][static_cast<size_t>(flat)], ref = reference.outputs[0][static_cast<size_t>(flat)];
              if (std::fabs(got - want) > 1e-5 * (1.0 + std::fabs(want)) || got != ref)
                fail_msg("dim %d, %s: node %lld feature %lld: %g, expected %g (kfuse's layout: %g)", dim,
                         transposed ? "[1, 0]" : "row-major", static_cast<long long>(n), static_cast<long long>(c),
                         static_cast<double>(got), want, static_cast<double>(ref));
            }
        }
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_bwd_column_major_y),
      cmocka_unit_test(test_row_norm_output_across_its_rows),
      cmocka_unit_test(test_softmax_bwd_padded_offset),
      cmocka_unit_test(test_softmax_bwd_middle_dim),
      cmocka_unit_test(test_transposed_majority),
      cmocka_unit_test(test_layernorm_bwd_permuted_x),
      cmocka_unit_test(test_rmsnorm_bwd_permuted_x),
      cmocka_unit_test(test_add_rmsnorm_permuted_residual),
      cmocka_unit_test(test_in_place_input_copied),
      cmocka_unit_test(test_row_major_output_reference),
      cmocka_unit_test(test_row_major_output_copied),
      cmocka_unit_test(test_not_copied),
      cmocka_unit_test(test_copy_read_by_two_segments),
      cmocka_unit_test(test_column_norm_output_across_its_walk),
      cmocka_unit_test(test_scatter_output_across_its_updates),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
