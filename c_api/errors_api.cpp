// Status names, the thread-local error message, versions, dtype/op names.
#include <atomic>
#include <cstdio>
#include <string>

#include "c_api/api_guard.h"
#include "core/ir/dtype.h"
#include "core/ir/op_table.h"

namespace kf::capi {
namespace {
thread_local std::string t_message;
}
void set_error(kf_status status, const std::string& message) {
  (void)status;
  try {
    t_message = message;
  } catch (...) {
    t_message.clear();
  }
}
void clear_error() { t_message.clear(); }

void report_not_held(const char* function, const char* argument, const void* handle) {
  char line[256];
  std::snprintf(line, sizeof line,
                "%s: argument '%s' (%p) is not a handle the caller holds: released or destroyed "
                "already, or never created; nothing was done",
                function, argument, handle);
  set_error(KF_ERR_INVALID_ARGUMENT, line);
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) std::fprintf(stderr, "kfuse: %s\n", line);
}
}  // namespace kf::capi

extern "C" {

KF_API const char* kf_last_error(void) { return kf::capi::t_message.c_str(); }

KF_API const char* kf_status_name(kf_status status) {
  switch (kf::capi::code(status)) {
    case KF_OK: return "KF_OK";
    case KF_ERR_INVALID_ARGUMENT: return "KF_ERR_INVALID_ARGUMENT";
    case KF_ERR_UNSUPPORTED: return "KF_ERR_UNSUPPORTED";
    case KF_ERR_SHAPE_MISMATCH: return "KF_ERR_SHAPE_MISMATCH";
    case KF_ERR_DTYPE_MISMATCH: return "KF_ERR_DTYPE_MISMATCH";
    case KF_ERR_DEVICE_MISMATCH: return "KF_ERR_DEVICE_MISMATCH";
    case KF_ERR_OUT_OF_MEMORY: return "KF_ERR_OUT_OF_MEMORY";
    case KF_ERR_PARSE: return "KF_ERR_PARSE";
    case KF_ERR_NO_DEVICE: return "KF_ERR_NO_DEVICE";
    case KF_ERR_BACKEND: return "KF_ERR_BACKEND";
    case KF_ERR_VERSION_MISMATCH: return "KF_ERR_VERSION_MISMATCH";
    case KF_ERR_INTERNAL: return "KF_ERR_INTERNAL";
  }
  return "KF_ERR_UNKNOWN";
}

KF_API uint32_t kf_version(void) { return KF_API_VERSION; }

KF_API kf_status kf_check_version(uint32_t header_version) {
  return kf::capi::guard([&] {
    if (header_version != KF_API_VERSION)
      kf::fail(KF_ERR_VERSION_MISMATCH, "kf_check_version: header API version ", header_version,
               ", library API version ", KF_API_VERSION);
  });
}

KF_API const char* kf_dtype_name(kf_dtype dtype) {
  const int c = kf::capi::code(dtype);
  if (!kf::is_valid_dtype(c)) return "invalid";
  return kf::dtype_name(static_cast<kf::DType>(c)).data();
}

KF_API const char* kf_op_name(kf_op op) {
  const int c = kf::capi::code(op);
  if (!kf::is_valid_op(c)) return "invalid";
  return kf::op_name(static_cast<kf::Op>(c)).data();
}

static_assert(static_cast<int>(kf::OpCategory::Unary) == KF_OP_CATEGORY_UNARY &&
                  static_cast<int>(kf::OpCategory::Cast) == KF_OP_CATEGORY_CAST &&
                  static_cast<int>(kf::OpCategory::Reduction) == KF_OP_CATEGORY_REDUCTION &&
                  static_cast<int>(kf::OpCategory::Query) == KF_OP_CATEGORY_QUERY &&
                  static_cast<int>(kf::OpCategory::Communication) == KF_OP_CATEGORY_COMMUNICATION &&
                  static_cast<int>(kf::OpCategory::Scatter) == KF_OP_CATEGORY_SCATTER &&
                  static_cast<int>(kf::OpCategory::Scan) == KF_OP_CATEGORY_SCAN,
              "kf_op_category follows kf::OpCategory (core/ir/op_table.h)");

KF_API kf_status kf_op_get_info(kf_op op, kf_op_info* info) {
  return kf::capi::guard([&] {
    kf::capi::require_struct(info, sizeof(kf_op_info), "kf_op_get_info", "info");
    const int c = kf::capi::code(op);
    if (!kf::is_valid_op(c))
      kf::fail(KF_ERR_INVALID_ARGUMENT, "kf_op_get_info: ", c, " is not an op (0 to ", static_cast<int>(kf::Op::COUNT) - 1,
               ")");
    const kf::OpInfo& o = kf::op_info(static_cast<kf::Op>(c));
    info->name = o.name.data();
    info->category = static_cast<kf_op_category>(o.category);
    info->num_inputs = o.num_inputs;
    info->num_outputs = o.num_outputs;
  });
}

KF_API int kf_op_num_outputs(kf_op op) {
  const int c = kf::capi::code(op);
  if (!kf::is_valid_op(c)) return 0;
  return kf::op_info(static_cast<kf::Op>(c)).num_outputs;
}

}  // extern "C"
