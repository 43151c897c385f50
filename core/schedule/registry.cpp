// The registry: the schedulers in priority order, each with the kind of
// task it is for; the first that takes a task schedules it. Each one's
// reason for declining is kept when asked (kfuse explain prints them).
#include "core/schedule/registry.h"

#include "core/schedule/row_domain.h"
#include "core/schedule/schedulers.h"

namespace kf {

namespace {

// What the registry knows of a task before it asks a scheduler.
struct TaskKind {
  bool scan = false, scatter = false;  // the first scan or scatter op (at most one is set)
  bool reduces = false;
  std::optional<RowDomain> rows;  // tasks with reductions: their one row domain
  std::string rows_why;           // (or why there is none)
  bool plain() const { return !scan && !scatter; }
};

using Proposal = std::optional<KernelSchedule>;

struct Entry {
  std::string_view family;  // as family_of names its schedules
  bool (*for_task)(const TaskKind&);
  // why: the reason it declines (nullptr: not asked for).
  Proposal (*propose)(const ConcreteFusion&, const Task&, const Tuning&, const TaskKind&, std::string* why);
};

template <class T>
Proposal as_proposal(std::optional<T> t) {
  if (!t) return std::nullopt;
  return KernelSchedule(std::move(*t));
}

// The column and row schedulers' answer to reductions of no one domain.
Proposal no_rows(const TaskKind& k, std::string* why) {
  if (why != nullptr) *why = k.rows_why;
  return std::nullopt;
}

constexpr Entry kSchedulers[] = {
    {"scan", [](const TaskKind& k) { return k.scan; },
     [](const ConcreteFusion& c, const Task& t, const Tuning& tu, const TaskKind&, std::string* why) {
       return as_proposal(schedule_scan(c, t, tu, why));
     }},
    {"scatter", [](const TaskKind& k) { return k.scatter; },
     [](const ConcreteFusion& c, const Task& t, const Tuning& tu, const TaskKind&, std::string* why) {
       return as_proposal(schedule_scatter(c, t, tu, why));
     }},
    // Without reductions: tiles where an input is contiguous along another
    // dim than the outputs' fast one, else plain loops (which take any).
    {"tiled", [](const TaskKind& k) { return k.plain() && !k.reduces; },
     [](const ConcreteFusion& c, const Task& t, const Tuning& tu, const TaskKind&, std::string* why) {
       return as_proposal(schedule_tiled(c, t, tu, why));
     }},
    // (Plain loops decline a task of several loops one of which would
    // take tiles alone: that loop then gets a segment of its own. Seed
    // 2012453407 c0043, c0122: rotary q and k, k's result stored
    // transposed, read across its memory by the second loop.)
    {"pointwise", [](const TaskKind& k) { return k.plain() && !k.reduces; },
     [](const ConcreteFusion& c, const Task& t, const Tuning& tu, const TaskKind&, std::string* why) -> Proposal {
       if (a_loop_takes_tiles(c, t, tu)) {
         if (why != nullptr) *why = "one of its loops takes tiles alone (a segment of its own)";
         return std::nullopt;
       }
       return schedule_pointwise(c, t, tu);
     }},
    // Reductions of one domain: columns where the innermost dim is kept,
    // else rows (which take any such task).
    {"column", [](const TaskKind& k) { return k.plain() && k.reduces; },
     [](const ConcreteFusion& c, const Task& t, const Tuning& tu, const TaskKind& k, std::string* why) {
       if (!k.rows) return no_rows(k, why);
       return as_proposal(schedule_column(c, t, *k.rows, tu, why));
     }},
    {"row", [](const TaskKind& k) { return k.plain() && k.reduces; },
     [](const ConcreteFusion& c, const Task& t, const Tuning& tu, const TaskKind& k, std::string* why) -> Proposal {
       if (!k.rows) return no_rows(k, why);
       return schedule_row(c, t, *k.rows, tu);
     }},
    // Row and column reductions of one domain (norm backward).
    {"inner_outer", [](const TaskKind& k) { return k.plain() && k.reduces && !k.rows; },
     [](const ConcreteFusion& c, const Task& t, const Tuning& tu, const TaskKind&, std::string* why) {
       return as_proposal(schedule_inner_outer(c, t, tu, why));
     }},
};

}  // namespace

ScheduleProposal propose_schedule(const ConcreteFusion& c, const Task& task, const Tuning& tuning, bool reasons) {
  const Fusion& f = *c.fusion;
  ScheduleProposal p;
  if (task.exprs.empty()) {
    p.why = "the task has no exprs (nothing to generate)";
    return p;
  }
  if (task.outputs.empty()) {
    p.why = "the task has no outputs";
    return p;
  }
  TaskKind kind;
  for (int64_t ei : task.exprs) {
    const OpCategory cat = op_info(f.exprs[static_cast<size_t>(ei)].op).category;
    if (cat == OpCategory::Library) {
      p.why = "matmul runs as a library segment (cuBLASLt)";
      return p;
    }
    if (cat == OpCategory::Communication) {
      p.why = "communication runs through the call's communicator";
      return p;
    }
    if (cat == OpCategory::Scan || cat == OpCategory::Scatter) {
      (cat == OpCategory::Scan ? kind.scan : kind.scatter) = true;
      break;
    }
    kind.reduces = kind.reduces || cat == OpCategory::Reduction;
  }
  if (kind.plain() && kind.reduces) kind.rows = find_row_domain(c, task, &kind.rows_why);
  for (const Entry& e : kSchedulers) {
    if (!e.for_task(kind)) continue;
    std::string why;
    // (Reasons cost strings: built only when asked for, or when they are
    // the proposal's answer: scans and scatters have one scheduler each.)
    const bool ask = reasons || !kind.plain();
    if (Proposal s = e.propose(c, task, tuning, kind, ask ? &why : nullptr)) {
      p.schedule = std::move(s);
      p.why.clear();
      return p;
    }
    p.why = why;
    if (reasons) p.declined.push_back({e.family, std::move(why)});
  }
  // Reductions no scheduler takes: why they have no row domain (the
  // inner-outer scheduler's own reason is among the declined).
  if (kind.reduces && !kind.rows) p.why = kind.rows_why;
  return p;
}

}  // namespace kf
