/* Prints the C layout of the kfuse.h and DLPack structs that the Python
 * package mirrors with ctypes (bindings/python/kfuse/_lib.py, _dlpack.py) as
 * JSON: {"struct": {"size": n, "fields": {"field": [offset, size], ...}}}.
 * tests/bindings/check_bindings.py compares the mirrors against it. A field
 * added to one of these structs must be added here as well (the script
 * fails on a header field missing here). */
#include <stddef.h>
#include <stdio.h>

#include <kfuse/kfuse.h>

static int first_struct = 1;
static int first_field;

static void begin(const char* name, size_t size) {
  printf("%s\n \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "{" : ",", name, size);
  first_struct = 0;
  first_field = 1;
}

static void field(const char* name, size_t offset, size_t size) {
  printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
  first_field = 0;
}

#define BEGIN(T) begin(#T, sizeof(T))
#define FIELD(T, f) field(#f, offsetof(T, f), sizeof(((T*)0)->f))
#define END() printf("}}")

int main(void) {
  BEGIN(kf_op_info);
  FIELD(kf_op_info, struct_size);
  FIELD(kf_op_info, name);
  FIELD(kf_op_info, category);
  FIELD(kf_op_info, num_inputs);
  FIELD(kf_op_info, num_outputs);
  END();
  BEGIN(kf_value_info);
  FIELD(kf_value_info, struct_size);
  FIELD(kf_value_info, id);
  FIELD(kf_value_info, rank);
  FIELD(kf_value_info, dtype);
  FIELD(kf_value_info, is_scalar);
  END();
  BEGIN(kf_cache_stats);
  FIELD(kf_cache_stats, struct_size);
  FIELD(kf_cache_stats, definitions);
  FIELD(kf_cache_stats, hits);
  FIELD(kf_cache_stats, misses);
  FIELD(kf_cache_stats, evictions);
  FIELD(kf_cache_stats, fusions);
  FIELD(kf_cache_stats, concretizations);
  FIELD(kf_cache_stats, concretization_hits);
  END();
  BEGIN(kf_segment_info);
  FIELD(kf_segment_info, struct_size);
  FIELD(kf_segment_info, run_order);
  FIELD(kf_segment_info, scheduler);
  FIELD(kf_segment_info, inputs);
  FIELD(kf_segment_info, num_inputs);
  FIELD(kf_segment_info, outputs);
  FIELD(kf_segment_info, num_outputs);
  FIELD(kf_segment_info, dead_after);
  FIELD(kf_segment_info, num_dead_after);
  FIELD(kf_segment_info, num_children);
  END();
  BEGIN(kf_task_info);
  FIELD(kf_task_info, struct_size);
  FIELD(kf_task_info, pattern);
  FIELD(kf_task_info, inputs);
  FIELD(kf_task_info, num_inputs);
  FIELD(kf_task_info, outputs);
  FIELD(kf_task_info, num_outputs);
  END();
  BEGIN(kf_exec_options);
  FIELD(kf_exec_options, struct_size);
  FIELD(kf_exec_options, stream);
  FIELD(kf_exec_options, allocator);
  FIELD(kf_exec_options, communicator);
  END();
  BEGIN(kf_nccl_id);
  FIELD(kf_nccl_id, bytes);
  END();
  BEGIN(DLDevice);
  FIELD(DLDevice, device_type);
  FIELD(DLDevice, device_id);
  END();
  BEGIN(DLDataType);
  FIELD(DLDataType, code);
  FIELD(DLDataType, bits);
  FIELD(DLDataType, lanes);
  END();
  BEGIN(DLTensor);
  FIELD(DLTensor, data);
  FIELD(DLTensor, device);
  FIELD(DLTensor, ndim);
  FIELD(DLTensor, dtype);
  FIELD(DLTensor, shape);
  FIELD(DLTensor, strides);
  FIELD(DLTensor, byte_offset);
  END();
  BEGIN(DLManagedTensor);
  FIELD(DLManagedTensor, dl_tensor);
  FIELD(DLManagedTensor, manager_ctx);
  FIELD(DLManagedTensor, deleter);
  END();
  BEGIN(DLPackVersion);
  FIELD(DLPackVersion, major);
  FIELD(DLPackVersion, minor);
  END();
  BEGIN(DLManagedTensorVersioned);
  FIELD(DLManagedTensorVersioned, version);
  FIELD(DLManagedTensorVersioned, manager_ctx);
  FIELD(DLManagedTensorVersioned, deleter);
  FIELD(DLManagedTensorVersioned, flags);
  FIELD(DLManagedTensorVersioned, dl_tensor);
  END();
  printf("\n}\n");
  return 0;
}
