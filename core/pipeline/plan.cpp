// build_plan: the pipeline's stages in order, and the KFUSE_DEBUG log.
#include "core/pipeline/plan.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/util/debug_log.h"

namespace kf {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// KFUSE_DEBUG=pipeline logs each plan as it is built.
bool log_pipeline() { return debug_topic("pipeline"); }

void log_plan(const Plan& p, double concretize_ms, double segment_ms) {
  char head[160];
  std::snprintf(head, sizeof head, "kfuse[pipeline] key %llu: concretize %.3f ms, segment+schedule %.3f ms, %zu segment(s)\n",
                static_cast<unsigned long long>(p.concrete->key.hash), concretize_ms, segment_ms,
                p.segmentation.segments.size());
  std::string text = head;
  for (size_t k = 0; k < p.segmentation.segments.size(); ++k) {
    const Segment& s = p.segmentation.segments[k];
    text += "  segment " + std::to_string(k) + ": " + std::string(scheduler_name(s.scheduler)) + ", " +
            std::to_string(s.task.exprs.size()) + " exprs";
    if (s.schedule) text += ", " + describe(*s.schedule);
    else if (!s.unscheduled_why.empty()) text += ", unscheduled: " + s.unscheduled_why;
    text += "\n";
  }
  std::fputs(text.c_str(), stderr);
}

}  // namespace

std::shared_ptr<const void> Plan::external_anchor() const {
  return const_cast<Fusion&>(fusion()).shared_from_this();
}

std::shared_ptr<Plan> build_plan(const Fusion& fusion, const Binding& binding, const Tuning& tuning) {
  auto plan = std::make_shared<Plan>();
  Clock::time_point t0 = Clock::now();
  const DebugStep concretize_step("compile");

  // 1. Concretize: the class of the binding.
  plan->concrete = concretize(fusion, binding);
  const double concretize_ms = ms_since(t0);
  concretize_step.done("concretize");

  // 2. Segment, and schedule each segment (schedulers run inside
  //    segmentation: a group merges only where a scheduler takes it).
  t0 = Clock::now();
  const DebugStep segment_step("compile");
  plan->segmentation = segment_fusion(*plan->concrete, tuning);
  plan->kernels = std::make_unique<KernelSlot[]>(plan->segmentation.segments.size());
  const double segment_ms = ms_since(t0);
  segment_step.done("segment+schedule");

  if (log_pipeline()) log_plan(*plan, concretize_ms, segment_ms);
  return plan;
}

}  // namespace kf
