/* Running a fusion segment by segment, as a framework that schedules the
 * kernels itself would: concretize, segment, then for each segment in run
 * order allocate its outputs, run it with kf_execute_segment and free the
 * intermediates it was the last reader of. The result must equal
 * kf_execute's. docs/c-api.md walks through this program. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfuse/kfuse.h"

#define CHECK(call)                                                                  \
  do {                                                                               \
    kf_status status_ = (call);                                                      \
    if (status_ != KF_OK) {                                                          \
      fprintf(stderr, "%s failed: %s: %s\n", #call, kf_status_name(status_), kf_last_error()); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

/* Two segments: segment_set makes h = exp(2x) a tensor in memory. */
static const char* kText =
    "input x: tensor<float32, 2>\n"
    "const two: float32 = 2\n"
    "scaled = mul(x, two)\n"
    "e = exp(scaled)\n"
    "h = segment_set(e)\n"
    "total = sum(h) {axes=[1], keepdim=true}\n"
    "y = div(h, total)\n"
    "output y\n";

enum { kMaxValues = 64, kMaxRank = 8 };

/* A compact float32 CPU tensor owned by this program. */
typedef struct {
  DLTensor t;
  int64_t shape[kMaxRank];
} owned_t;

static owned_t* allocate(const int64_t* shape, int rank, DLDataType dtype) {
  owned_t* o = calloc(1, sizeof *o);
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    o->shape[d] = shape[d];
    n *= shape[d];
  }
  o->t.data = calloc((size_t)(n > 0 ? n : 1), dtype.bits / 8);
  o->t.device.device_type = kDLCPU;
  o->t.ndim = rank;
  o->t.dtype = dtype;
  o->t.shape = o->shape;
  return o;
}

static void release(owned_t* o) {
  if (o == NULL) return;
  free(o->t.data);
  free(o);
}

int main(void) {
  CHECK(kf_check_version(KF_API_VERSION));
  kf_fusion fusion = NULL;
  CHECK(kf_fusion_from_text(kText, &fusion));

  /* The input: x = 4 x 8, values in [-1, 1). */
  int64_t x_shape[2] = {4, 8};
  owned_t* x = allocate(x_shape, 2, (DLDataType){kDLFloat, 32, 1});
  for (int i = 0; i < 32; ++i) ((float*)x->t.data)[i] = (float)((i * 7) % 16) / 8.0f - 1.0f;
  const DLTensor* inputs[1] = {&x->t};

  /* Where each value id lives while the segments run. */
  const DLTensor* value[kMaxValues] = {0};
  owned_t* owned[kMaxValues] = {0};
  kf_value_info info = {sizeof info, 0, 0, KF_FLOAT32, 0};
  CHECK(kf_fusion_input(fusion, 0, &info));
  value[info.id] = &x->t;

  kf_concrete concrete = NULL;
  kf_segmentation segmentation = NULL;
  size_t count = 0;
  CHECK(kf_concretize(fusion, inputs, 1, &concrete));
  CHECK(kf_segment(concrete, &segmentation));
  CHECK(kf_segmentation_count(segmentation, &count));

  for (size_t k = 0; k < count; ++k) {
    kf_segment_info seg;
    memset(&seg, 0, sizeof seg);
    seg.struct_size = sizeof seg;
    CHECK(kf_segmentation_get(segmentation, k, &seg));

    /* Value inputs (ids >= 0) in info order; extents (< 0) come from them. */
    const DLTensor* seg_inputs[kMaxValues];
    size_t num_inputs = 0;
    for (size_t i = 0; i < seg.num_inputs; ++i)
      if (seg.inputs[i] >= 0) seg_inputs[num_inputs++] = value[seg.inputs[i]];

    /* Output shapes: the segment is a fusion of its own (its text), whose
     * inputs are exactly seg_inputs. */
    char* text = NULL;
    kf_fusion standalone = NULL;
    CHECK(kf_segment_to_text(segmentation, k, &text));
    CHECK(kf_fusion_from_text(text, &standalone));
    kf_string_free(text);
    DLTensor* seg_outputs[kMaxValues];
    for (size_t j = 0; j < seg.num_outputs; ++j) {
      kf_value_info out_info = {sizeof out_info, 0, 0, KF_FLOAT32, 0};
      int64_t shape[kMaxRank];
      CHECK(kf_fusion_output(standalone, j, &out_info));
      CHECK(kf_output_shape(standalone, seg_inputs, num_inputs, j, shape, (size_t)out_info.rank));
      const int64_t id = seg.outputs[j];
      owned[id] = allocate(shape, out_info.rank, (DLDataType){kDLFloat, 32, 1});
      value[id] = &owned[id]->t;
      seg_outputs[j] = &owned[id]->t;
    }
    kf_fusion_release(standalone);

    CHECK(kf_execute_segment(segmentation, k, seg_inputs, num_inputs, seg_outputs,
                             seg.num_outputs, NULL));
    printf("segment %zu (%s): %zu value inputs, %zu outputs, %zu freed after\n", k,
           seg.scheduler, num_inputs, seg.num_outputs, seg.num_dead_after);
    for (size_t j = 0; j < seg.num_dead_after; ++j) {
      release(owned[seg.dead_after[j]]);
      owned[seg.dead_after[j]] = NULL;
      value[seg.dead_after[j]] = NULL;
    }
  }

  /* The fusion's output, compared with one kf_execute call. */
  kf_value_info out_info = {sizeof out_info, 0, 0, KF_FLOAT32, 0};
  CHECK(kf_fusion_output(fusion, 0, &out_info));
  const float* by_segments = (const float*)value[out_info.id]->data;
  DLManagedTensor* whole = NULL;
  CHECK(kf_execute(fusion, inputs, 1, &whole, 1, NULL));
  const float* at_once = (const float*)whole->dl_tensor.data;
  int wrong = 0;
  for (int i = 0; i < 32; ++i)
    if (fabsf(by_segments[i] - at_once[i]) > 1e-6f) wrong = 1;
  printf("row 0: %.4f %.4f %.4f ... (%s kf_execute)\n", by_segments[0], by_segments[1],
         by_segments[2], wrong ? "differs from" : "equals");

  whole->deleter(whole);
  for (int id = 0; id < kMaxValues; ++id) release(owned[id]);
  release(x);
  kf_segmentation_release(segmentation);
  kf_concrete_release(concrete);
  kf_fusion_release(fusion);
  return wrong;
}
