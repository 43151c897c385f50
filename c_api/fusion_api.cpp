// Fusion handles, their inputs/outputs, and the definition cache controls.
#include "c_api/api_guard.h"
#include "c_api/handles.h"
#include "core/pipeline/plan.h"
#include "core/define/definition_cache.h"

using kf::capi::guard;
using kf::capi::require;

namespace {

// Index checks shared by the per-input and per-output queries.
const kf::Output& output_at(const kf::Fusion& fusion, size_t index, const char* fn) {
  if (index >= fusion.outputs.size())
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": index ", index, " is out of range (", fusion.outputs.size(),
             " outputs)");
  return fusion.outputs[index];
}

int64_t input_at(const kf::Fusion& fusion, size_t index, const char* fn) {
  if (index >= fusion.inputs.size())
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": index ", index, " is out of range (", fusion.inputs.size(),
             " inputs)");
  return fusion.inputs[index];
}

}  // namespace

extern "C" {

KF_API kf_status kf_fusion_retain(kf_fusion f) {
  return guard([&] { kf::capi::fusion_of(f, "kf_fusion_retain")->retain_external(); });
}

KF_API void kf_fusion_release(kf_fusion f) {
  if (f != nullptr && !kf::Fusion::release_external(f))
    kf::capi::report_not_held("kf_fusion_release", "fusion", f);
}

KF_API kf_status kf_fusion_num_inputs(kf_fusion f, size_t* out) {
  return guard([&] {
    auto* fusion = kf::capi::fusion_of(f, "kf_fusion_num_inputs");
    *require(out, "kf_fusion_num_inputs", "out") = fusion->inputs.size();
  });
}

KF_API kf_status kf_fusion_num_outputs(kf_fusion f, size_t* out) {
  return guard([&] {
    auto* fusion = kf::capi::fusion_of(f, "kf_fusion_num_outputs");
    *require(out, "kf_fusion_num_outputs", "out") = fusion->outputs.size();
  });
}

static void fill_info(const kf::Value& v, kf_value_info* info) {
  info->id = v.id;
  info->rank = v.rank;
  info->dtype = static_cast<kf_dtype>(v.dtype);
  info->is_scalar = v.is_scalar ? 1 : 0;
}

KF_API kf_status kf_fusion_input(kf_fusion f, size_t index, kf_value_info* info) {
  return guard([&] {
    const char* fn = "kf_fusion_input";
    auto* fusion = kf::capi::fusion_of(f, fn);
    kf::capi::require_struct(info, sizeof(kf_value_info), fn, "info");
    fill_info(fusion->value(input_at(*fusion, index, fn)), info);
  });
}

KF_API kf_status kf_fusion_output(kf_fusion f, size_t index, kf_value_info* info) {
  return guard([&] {
    const char* fn = "kf_fusion_output";
    auto* fusion = kf::capi::fusion_of(f, fn);
    kf::capi::require_struct(info, sizeof(kf_value_info), fn, "info");
    fill_info(fusion->value(output_at(*fusion, index, fn).value), info);
  });
}

KF_API kf_status kf_output_alias(kf_fusion f, size_t index, int64_t* alias_input) {
  return guard([&] {
    const char* fn = "kf_output_alias";
    auto* fusion = kf::capi::fusion_of(f, fn);
    kf::capi::require(alias_input, fn, "alias_input");
    *alias_input = output_at(*fusion, index, fn).alias_input;
  });
}

KF_API kf_status kf_fusion_mesh(kf_fusion f, int64_t* num_ranks) {
  return guard([&] {
    auto* fusion = kf::capi::fusion_of(f, "kf_fusion_mesh");
    kf::capi::require(num_ranks, "kf_fusion_mesh", "num_ranks");
    *num_ranks = fusion->mesh;
  });
}

KF_API kf_status kf_output_sharding(kf_fusion f, size_t index, int64_t* dim) {
  return guard([&] {
    const char* fn = "kf_output_sharding";
    auto* fusion = kf::capi::fusion_of(f, fn);
    kf::capi::require(dim, fn, "dim");
    *dim = output_at(*fusion, index, fn).sharding.dim;
  });
}

KF_API kf_status kf_fusion_value(kf_fusion f, int64_t id, kf_value_info* info) {
  return guard([&] {
    const char* fn = "kf_fusion_value";
    auto* fusion = kf::capi::fusion_of(f, fn);
    kf::capi::require_struct(info, sizeof(kf_value_info), fn, "info");
    if (id < 0 || id >= static_cast<int64_t>(fusion->values.size()))
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": value id ", id, " is out of range [0, ",
               fusion->values.size(), ")");
    fill_info(fusion->value(id), info);
  });
}

KF_API kf_status kf_cache_get_stats(kf_cache_stats* out) {
  return guard([&] {
    kf::capi::require_struct(out, offsetof(kf_cache_stats, concretization_hits) + sizeof(uint64_t),
                             "kf_cache_get_stats", "out");
    kf::DefinitionStats d = kf::DefinitionCache::global().stats();
    kf::PlanStats c = kf::plan_stats();
    out->definitions = d.definitions;
    out->hits = d.hits;
    out->misses = d.misses;
    out->evictions = d.evictions;
    out->fusions = d.fusions;
    out->concretizations = c.built;
    out->concretization_hits = c.hits;
  });
}

KF_API kf_status kf_cache_set_limit(size_t max_fusions) {
  return guard([&] {
    if (max_fusions == 0)
      kf::fail(KF_ERR_INVALID_ARGUMENT, "kf_cache_set_limit: max_fusions must be >= 1, got 0");
    kf::DefinitionCache::global().set_limit(max_fusions);
  });
}

KF_API kf_status kf_cache_set_concrete_limit(size_t max_per_fusion) {
  return guard([&] {
    if (max_per_fusion == 0)
      kf::fail(KF_ERR_INVALID_ARGUMENT,
               "kf_cache_set_concrete_limit: max_per_fusion must be >= 1, got 0");
    kf::set_plan_limit(max_per_fusion);
  });
}

KF_API kf_status kf_cache_clear(void) {
  return guard([&] {
    kf::DefinitionCache::global().clear();
    kf::reset_plan_stats();
  });
}

}  // extern "C"
