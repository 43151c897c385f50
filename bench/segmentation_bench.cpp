// Cost of define + concretize + segment on generated fusions of 100, 1000
// and 5000 ops, kept whole top-down: chains (each op reads the previous
// one) and DAGs (each op reads the previous value and a random earlier one,
// with a reduction over the last axis every 50 ops: one normalization kernel
// takes it whole); and shattered: "mixed-chain" and "mixed" (DAG), whose
// reductions every 50 ops alternate between the two axes, which no single
// kernel takes, so the fusion is shattered and merged back bottom-up.
// Prints the median of 5 runs per case, all cases in one run:
//   build/bench/segmentation_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <memory>
#include <vector>

#include "core/pipeline/plan.h"
#include "core/define/builder.h"
#include "core/define/definition_cache.h"
#include "core/segment/segmentation.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  bool dag, mixed;
};
constexpr Shape kShapes[] = {{"chain", false, false}, {"dag", true, false}, {"mixed-chain", false, true}, {"mixed", true, true}};

std::shared_ptr<kf::Fusion> define(int n, bool dag, bool mixed) {
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  std::vector<int64_t> vals{x};
  uint64_t rng = 12345;
  for (int i = 0; i < n; ++i) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    int64_t a = vals.back();
    if ((dag || mixed) && i % 50 == 49) {
      int64_t axis = mixed && (i / 50) % 2 ? 0 : 1;
      int64_t s = b.op(kf::Op::SUM, {a}, {1, axis})[0];
      vals.push_back(b.op(kf::Op::SUB, {a, s}, {})[0]);
    } else if (dag) {
      int64_t c = vals[static_cast<size_t>((rng >> 33) % vals.size())];
      vals.push_back(b.op(kf::Op::ADD, {a, c}, {})[0]);
    } else {
      vals.push_back(b.op(i % 2 ? kf::Op::NEG : kf::Op::EXP, {a}, {})[0]);
    }
  }
  b.output(vals.back(), {}, -1);
  return b.finalize();
}

double run_once(int n, bool dag, bool mixed, size_t* segments) {
  kf::DefinitionCache::global().clear();  // measure a cold definition
  auto t0 = Clock::now();
  auto f = define(n, dag, mixed);
  static float data[64 * 64];
  int64_t shape[2] = {64, 64};
  DLTensor t{data, {kDLCPU, 0}, 2, kf::to_dlpack(kf::DType::F32), shape, nullptr, 0};
  const DLTensor* in[1] = {&t};
  kf::Binding bind = kf::bind_inputs(*f, in, 1);
  auto p = kf::build_plan(*f, bind, kf::default_tuning());
  const kf::Segmentation* s = &p->segmentation;
  auto t1 = Clock::now();
  *segments = s->segments.size();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace

// Optional arguments: SHAPE OPS (e.g. "mixed 1000") runs that case only
// (handy under valgrind --tool=callgrind).
int main(int argc, char** argv) {
  const std::string only_shape = argc > 1 ? argv[1] : "";
  const int only_ops = argc > 2 ? std::atoi(argv[2]) : 0;
  std::printf("%-11s %6s %10s %12s\n", "shape", "ops", "segments", "median ms");
  for (const Shape& shape : kShapes)
    for (int n : {100, 1000, 5000}) {
      if ((!only_shape.empty() && only_shape != shape.name) || (only_ops && only_ops != n)) continue;
      std::vector<double> ms;
      size_t segments = 0;
      for (int r = 0; r < 5; ++r) ms.push_back(run_once(n, shape.dag, shape.mixed, &segments));
      std::sort(ms.begin(), ms.end());
      std::printf("%-11s %6d %10zu %12.2f\n", shape.name, n, segments, ms[ms.size() / 2]);
    }
  return 0;
}
