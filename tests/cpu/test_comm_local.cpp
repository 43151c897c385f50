// The local communicator group (core/runtime/comm/local_group.cpp): groups
// of 1 to 4 ranks, one thread each, through every collective. Reductions
// go over ranks in rank order and round once to the dtype (bfloat16 sums
// that pairwise rounding would get wrong), int64 sums wrap and int64 avg
// truncates toward zero, max/min propagate NaN, all_reduce works in place,
// a loop of calls reuses the barriers, and calls that disagree fail on
// every rank and leave the group usable. The threads only record; checks
// run on the main thread (cmocka's asserts are not thread-safe).
#include "core/runtime/comm/communicator.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

using namespace kf;

namespace {

using Group = std::vector<std::unique_ptr<Communicator>>;

struct Outcome {
  kf_status status = KF_OK;
  std::string message;
};

// Runs body(comm, rank) on one thread per rank; each rank's outcome.
std::vector<Outcome> on_ranks(Group& group, const std::function<void(Communicator&, int)>& body) {
  std::vector<Outcome> out(group.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        body(*group[r], static_cast<int>(r));
      } catch (const Error& e) {
        out[r] = {e.status(), e.what()};
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

void expect_ok(const std::vector<Outcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r)
    if (outcomes[r].status != KF_OK) fail_msg("rank %zu: %s", r, outcomes[r].message.c_str());
}

constexpr CommReduce kOps[] = {CommReduce::Sum, CommReduce::Prod, CommReduce::Max, CommReduce::Min, CommReduce::Avg};
constexpr size_t kCount = 5;

// Rank r's element i: small dyadic values (sums and products exact in
// double), a NaN at element 4 of rank 1.
double value(int r, size_t i) {
  if (r == 1 && i == 4) return NAN;
  return (r + 1) * 0.5 - static_cast<double>(i) * 0.75;
}

// The reduction in double over ranks in order, as the group must do it.
double expected(CommReduce op, int n, size_t i) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    const double v = value(r, i);
    switch (op) {
      case CommReduce::Sum:
      case CommReduce::Avg: acc += v; break;
      case CommReduce::Prod: acc *= v; break;
      case CommReduce::Max: acc = std::isnan(acc) || std::isnan(v) ? NAN : std::max(acc, v); break;
      case CommReduce::Min: acc = std::isnan(acc) || std::isnan(v) ? NAN : std::min(acc, v); break;
    }
  }
  return op == CommReduce::Avg ? acc / n : acc;
}

bool same(double want, double got) { return std::isnan(want) ? std::isnan(got) : want == got; }

void test_all_reduce_float32(void**) {
  for (int n = 1; n <= 4; ++n)
    for (CommReduce op : kOps)
      for (bool in_place : {false, true}) {
        Group group = make_local_group(n);
        std::vector<std::vector<float>> send(n, std::vector<float>(kCount)), recv = send;
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < kCount; ++i) send[r][i] = static_cast<float>(value(r, i));
        expect_ok(on_ranks(group, [&](Communicator& c, int r) {
          float* out = in_place ? send[r].data() : recv[r].data();
          c.all_reduce(send[r].data(), out, kCount, DType::F32, op, nullptr);
        }));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < kCount; ++i) {
            const float got = in_place ? send[r][i] : recv[r][i];
            const float want = static_cast<float>(expected(op, n, i));
            if (!same(want, got))
              fail_msg("n=%d %s%s rank %d [%zu]: %g, expected %g", n, comm_reduce_name(op),
                       in_place ? " in place" : "", r, i, got, want);
          }
      }
}

// bfloat16 keeps 8 significant bits: 1 + 2^-8 + 2^-8 rounded after each
// add stays 1, rounded once it is 1 + 2^-7.
void test_all_reduce_bfloat16_rounds_once(void**) {
  for (int n = 1; n <= 4; ++n)
    for (CommReduce op : kOps) {
      Group group = make_local_group(n);
      auto v = [](int r, size_t i) { return r == 0 ? 1.0 + static_cast<double>(i) : std::ldexp(1.0, -8); };
      std::vector<std::vector<uint16_t>> send(n, std::vector<uint16_t>(kCount)), recv = send;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < kCount; ++i) send[r][i] = double_to_bf16(v(r, i));
      expect_ok(on_ranks(group, [&](Communicator& c, int r) {
        c.all_reduce(send[r].data(), recv[r].data(), kCount, DType::BF16, op, nullptr);
      }));
      for (size_t i = 0; i < kCount; ++i) {
        double acc = v(0, i);
        for (int r = 1; r < n; ++r) {
          const double x = v(r, i);
          acc = op == CommReduce::Prod ? acc * x
                : op == CommReduce::Max ? std::max(acc, x)
                : op == CommReduce::Min ? std::min(acc, x)
                                        : acc + x;
        }
        const uint16_t want = double_to_bf16(op == CommReduce::Avg ? acc / n : acc);
        for (int r = 0; r < n; ++r)
          if (recv[r][i] != want)
            fail_msg("n=%d %s rank %d [%zu]: %g, expected %g", n, comm_reduce_name(op), r, i,
                     bf16_to_float(recv[r][i]), bf16_to_float(want));
      }
      if (n == 3 && op == CommReduce::Sum) assert_float_equal(bf16_to_float(recv[0][0]), 1.0078125f, 0.0f);
    }
}

void test_all_reduce_int64(void**) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // Element 0 wraps when summed; element 1 averages to a negative fraction.
  auto v = [](int r, size_t i) -> int64_t {
    if (i == 0) return r == 0 ? kMax : 1;
    if (i == 1) return r == 0 ? -7 : r;
    return (r + 2) * (static_cast<int64_t>(i) - 3);
  };
  for (int n = 1; n <= 4; ++n)
    for (CommReduce op : kOps)
      for (bool in_place : {false, true}) {
        Group group = make_local_group(n);
        std::vector<std::vector<int64_t>> send(n, std::vector<int64_t>(kCount)), recv = send;
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < kCount; ++i) send[r][i] = v(r, i);
        expect_ok(on_ranks(group, [&](Communicator& c, int r) {
          int64_t* out = in_place ? send[r].data() : recv[r].data();
          c.all_reduce(send[r].data(), out, kCount, DType::I64, op, nullptr);
        }));
        for (size_t i = 0; i < kCount; ++i) {
          uint64_t acc = static_cast<uint64_t>(v(0, i));  // wraps like the group's
          for (int r = 1; r < n; ++r) {
            const int64_t x = v(r, i);
            const int64_t a = static_cast<int64_t>(acc);
            acc = op == CommReduce::Prod ? acc * static_cast<uint64_t>(x)
                  : op == CommReduce::Max ? static_cast<uint64_t>(std::max(a, x))
                  : op == CommReduce::Min ? static_cast<uint64_t>(std::min(a, x))
                                          : acc + static_cast<uint64_t>(x);
          }
          int64_t want = static_cast<int64_t>(acc);
          if (op == CommReduce::Avg) want /= n;
          for (int r = 0; r < n; ++r) {
            const int64_t got = in_place ? send[r][i] : recv[r][i];
            if (got != want)
              fail_msg("n=%d %s rank %d [%zu]: %lld, expected %lld", n, comm_reduce_name(op), r, i,
                       static_cast<long long>(got), static_cast<long long>(want));
          }
        }
        if (n == 2 && op == CommReduce::Sum)
          assert_true((in_place ? send[0][0] : recv[0][0]) == std::numeric_limits<int64_t>::min());
        if (n == 4 && op == CommReduce::Avg) assert_int_equal(in_place ? send[0][1] : recv[0][1], 0);  // -1/4
      }
}

// Bools reduce as 0/1: sum and max are "any", prod and min "all"; avg is
// rejected on every rank.
void test_all_reduce_bool(void**) {
  Group group = make_local_group(3);
  const uint8_t send[3][4] = {{0, 1, 1, 0}, {0, 0, 1, 0}, {0, 1, 1, 1}};
  const uint8_t any[4] = {0, 1, 1, 1}, all[4] = {0, 0, 1, 0};
  for (CommReduce op : {CommReduce::Sum, CommReduce::Max, CommReduce::Prod, CommReduce::Min}) {
    uint8_t recv[3][4] = {};
    expect_ok(on_ranks(group, [&](Communicator& c, int r) {
      c.all_reduce(send[r], recv[r], 4, DType::Bool, op, nullptr);
    }));
    const bool is_any = op == CommReduce::Sum || op == CommReduce::Max;
    for (int r = 0; r < 3; ++r) assert_memory_equal(recv[r], is_any ? any : all, 4);
  }
  uint8_t recv[3][4] = {};
  const auto outcomes = on_ranks(group, [&](Communicator& c, int r) {
    c.all_reduce(send[r], recv[r], 4, DType::Bool, CommReduce::Avg, nullptr);
  });
  for (const auto& o : outcomes) {
    assert_int_equal(o.status, KF_ERR_UNSUPPORTED);
    assert_non_null(std::strstr(o.message.c_str(), "avg of bool"));
  }
}

void test_all_gather(void**) {
  for (int n = 1; n <= 4; ++n)
    for (bool in_place : {false, true}) {
      Group group = make_local_group(n);
      std::vector<std::vector<float>> send(n, std::vector<float>(kCount));
      std::vector<std::vector<float>> recv(n, std::vector<float>(n * kCount, -1.0f));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < kCount; ++i) {
          send[r][i] = static_cast<float>(r * 100 + static_cast<int>(i));
          if (in_place) recv[r][r * kCount + i] = send[r][i];  // NCCL's in-place layout
        }
      expect_ok(on_ranks(group, [&](Communicator& c, int r) {
        const float* src = in_place ? recv[r].data() + r * kCount : send[r].data();
        c.all_gather(src, recv[r].data(), kCount, DType::F32, nullptr);
      }));
      for (int r = 0; r < n; ++r)
        for (int from = 0; from < n; ++from)
          for (size_t i = 0; i < kCount; ++i)
            assert_float_equal(recv[r][from * kCount + i], send[from][i], 0.0f);
    }
}

void test_reduce_scatter(void**) {
  for (int n = 1; n <= 4; ++n)
    for (CommReduce op : {CommReduce::Sum, CommReduce::Max, CommReduce::Avg}) {
      Group group = make_local_group(n);
      auto v = [](int r, size_t j) { return static_cast<int64_t>(r * 10) - static_cast<int64_t>(j); };
      std::vector<std::vector<int64_t>> send(n, std::vector<int64_t>(n * kCount));
      std::vector<std::vector<int64_t>> recv(n, std::vector<int64_t>(kCount));
      for (int r = 0; r < n; ++r)
        for (size_t j = 0; j < n * kCount; ++j) send[r][j] = v(r, j);
      expect_ok(on_ranks(group, [&](Communicator& c, int r) {
        c.reduce_scatter(send[r].data(), recv[r].data(), kCount, DType::I64, op, nullptr);
      }));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < kCount; ++i) {
          const size_t j = r * kCount + i;
          int64_t want = v(0, j);
          for (int s = 1; s < n; ++s) want = op == CommReduce::Max ? std::max(want, v(s, j)) : want + v(s, j);
          if (op == CommReduce::Avg) want /= n;
          assert_int_equal(recv[r][i], want);
        }
    }
}

// Many calls in a row: every barrier generation must release exactly its
// round (a rank running ahead into the next call must not be let through
// by the previous round's wake-up).
void test_repeated_calls(void**) {
  constexpr int kRounds = 300;
  for (int n = 2; n <= 4; ++n) {
    Group group = make_local_group(n);
    std::vector<std::vector<double>> results(n, std::vector<double>(kRounds));
    std::vector<std::vector<float>> gathered(n, std::vector<float>(kRounds * n));
    expect_ok(on_ranks(group, [&](Communicator& c, int r) {
      for (int k = 0; k < kRounds; ++k) {
        double x = r + k * 0.5;
        c.all_reduce(&x, &x, 1, DType::F64, CommReduce::Sum, nullptr);
        results[r][k] = x;
        const float mine = static_cast<float>(k * 10 + r);
        c.all_gather(&mine, gathered[r].data() + k * n, 1, DType::F32, nullptr);
      }
    }));
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < kRounds; ++k) {
        assert_float_equal(results[r][k], n * (n - 1) / 2.0 + n * k * 0.5, 0.0);
        for (int s = 0; s < n; ++s) assert_float_equal(gathered[r][k * n + s], k * 10 + s, 0.0f);
      }
  }
}

// Ranks that call differently all fail with the same verdict, and the
// group goes on working.
void test_disagreeing_calls_fail_on_every_rank(void**) {
  Group group = make_local_group(3);
  float send[3][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, recv[3][12] = {};
  auto outcomes = on_ranks(group, [&](Communicator& c, int r) {
    c.all_reduce(send[r], recv[r], r == 1 ? 3 : 4, DType::F32, CommReduce::Sum, nullptr);
  });
  for (const auto& o : outcomes) {
    assert_int_equal(o.status, KF_ERR_INVALID_ARGUMENT);
    assert_non_null(std::strstr(o.message.c_str(), "rank 0 called all_reduce of 4 float32 (sum), rank 1 all_reduce of 3"));
  }
  outcomes = on_ranks(group, [&](Communicator& c, int r) {
    if (r == 2) c.all_gather(send[r], recv[r], 4, DType::F32, nullptr);
    else c.reduce_scatter(send[r], recv[r], 4, DType::F32, CommReduce::Sum, nullptr);
  });
  for (const auto& o : outcomes) {
    assert_int_equal(o.status, KF_ERR_INVALID_ARGUMENT);
    assert_non_null(std::strstr(o.message.c_str(), "rank 2 all_gather of 4 float32"));
  }
  expect_ok(on_ranks(group, [&](Communicator& c, int r) {
    c.all_reduce(send[r], recv[r], 4, DType::F32, CommReduce::Max, nullptr);
  }));
  for (int r = 0; r < 3; ++r) assert_float_equal(recv[r][3], 4.0f, 0.0f);
}

void test_identity(void**) {
  Group group = make_local_group(4);
  for (int r = 0; r < 4; ++r) {
    assert_int_equal(group[r]->rank(), r);
    assert_int_equal(group[r]->size(), 4);
    assert_int_equal(group[r]->device_type(), kDLCPU);
    assert_int_equal(group[r]->device(), 0);
    assert_string_equal(group[r]->kind(), "local");
  }
  assert_string_equal(comm_reduce_name(CommReduce::Avg), "avg");
  try {
    make_local_group(0);
    fail_msg("a group of 0 ranks was made");
  } catch (const Error& e) {
    assert_int_equal(e.status(), KF_ERR_INVALID_ARGUMENT);
  }
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity),
      cmocka_unit_test(test_all_reduce_float32),
      cmocka_unit_test(test_all_reduce_bfloat16_rounds_once),
      cmocka_unit_test(test_all_reduce_int64),
      cmocka_unit_test(test_all_reduce_bool),
      cmocka_unit_test(test_all_gather),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_repeated_calls),
      cmocka_unit_test(test_disagreeing_calls_fail_on_every_rank),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
