#include "core/segment/task_sizes.h"

#include "core/util/error.h"

namespace kf {

void task_sizes(const Fusion& fusion, const Task& task, std::span<const InputMeta> inputs, ValueSizes* sizes) {
  if (inputs.size() != task.inputs.size())
    fail(KF_ERR_INTERNAL, "task_sizes: ", inputs.size(), " inputs for a task of ", task.inputs.size());
  sizes->reset(fusion);
  for (size_t k = 0; k < task.inputs.size(); ++k) {
    const int64_t id = task.inputs[k];
    sizes->set(id, inputs[k].sizes);
    if (fusion.value(id).is_scalar) sizes->set_scalar(id, inputs[k].scalar_i64);
  }
  infer_sizes(fusion, task.exprs, *sizes);
}

}  // namespace kf
