/* Fusions over a device mesh on the CPU backend: one thread per rank with
 * local communicators (kf_communicator_create_local), meshes of 1 to 4
 * ranks; the cases and the check are in multidevice_cases.h. Also the
 * definition API's errors, the text form of a mesh, and the errors of a
 * call without the right communicator. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"
#include "multidevice_cases.h"

typedef struct {
  rank_job* job;
  kf_communicator comm;
} cpu_rank;

static void* run_rank(void* arg) {
  cpu_rank* cr = (cpu_rank*)arg;
  rank_job* j = cr->job;
  DLTensor dl[MAX_IN];
  const DLTensor* ins[MAX_IN];
  for (int i = 0; i < j->num_inputs; ++i) {
    dl[i] = as_dl(&j->in[i]);
    ins[i] = &dl[i];
  }
  kf_exec_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.communicator = cr->comm;
  DLManagedTensor* out[MAX_OUT];
  j->status = kf_execute(j->fusion, ins, (size_t)j->num_inputs, out, j->num_outputs, &o);
  if (j->status != KF_OK) {
    snprintf(j->message, sizeof j->message, "%s", kf_last_error());
    return NULL;
  }
  for (size_t k = 0; k < j->num_outputs; ++k) {
    keep_output(j, k, &out[k]->dl_tensor, host_to_host);
    out[k]->deleter(out[k]);
  }
  return NULL;
}

static void run_ranks(rank_job* jobs, int ranks) {
  kf_communicator comms[MAX_RANKS];
  KF_CHECK(kf_communicator_create_local(ranks, comms));
  cpu_rank cr[MAX_RANKS];
  pthread_t threads[MAX_RANKS];
  for (int r = 0; r < ranks; ++r) {
    cr[r].job = &jobs[r];
    cr[r].comm = comms[r];
    assert_int_equal(pthread_create(&threads[r], NULL, run_rank, &cr[r]), 0);
  }
  for (int r = 0; r < ranks; ++r) pthread_join(threads[r], NULL);
  for (int r = 0; r < ranks; ++r) kf_communicator_destroy(comms[r]);
}

static void test_cases(void** state) {
  (void)state;
  for (size_t k = 0; k < sizeof kCases / sizeof kCases[0]; ++k)
    for (int ranks = 1; ranks <= MAX_RANKS; ++ranks) check_case(&kCases[k], ranks);
}

/* What the shard stage inserts, as kf_segment_info reports it: layernorm
 * over a sharded dim is three kernels and two allreduces. */
static void test_segments(void** state) {
  (void)state;
  char text[4096];
  snprintf(text, sizeof text, "mesh 2\n%s%s", kCases[0].body, kCases[0].shards);
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  char* explained = NULL;
  float x[5 * 24], w[24], b[24], eps = 1e-5f;
  int64_t sx[2] = {5, 24}, sw[1] = {24};
  int64_t* none = NULL;
  DLTensor t[4] = {kf_test_tensor(x, kf_test_f32(), 2, sx, NULL), kf_test_tensor(w, kf_test_f32(), 1, sw, NULL),
                   kf_test_tensor(b, kf_test_f32(), 1, sw, NULL), kf_test_tensor(&eps, kf_test_f32(), 0, none, NULL)};
  const DLTensor* ins[4] = {&t[0], &t[1], &t[2], &t[3]};
  kf_concrete c;
  KF_CHECK(kf_concretize(f, ins, 4, &c));
  kf_segmentation s;
  KF_CHECK(kf_segment(c, &s));
  size_t n;
  KF_CHECK(kf_segmentation_count(s, &n));
  assert_int_equal(n, 5);
  int collectives = 0;
  for (size_t i = 0; i < n; ++i) {
    kf_segment_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KF_CHECK(kf_segmentation_get(s, i, &info));
    if (strcmp(info.scheduler, "communication") == 0) ++collectives;
  }
  assert_int_equal(collectives, 2);
  /* Without a communicator the call is refused, naming the option. */
  DLManagedTensor* out[1];
  KF_EXPECT_ERROR(kf_execute(f, ins, 4, out, 1, NULL), KF_ERR_INVALID_ARGUMENT, "communicator");
  /* A communicator of the wrong size too. */
  kf_communicator comms[3];
  KF_CHECK(kf_communicator_create_local(3, comms));
  kf_exec_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.communicator = comms[0];
  KF_EXPECT_ERROR(kf_execute(f, ins, 4, out, 1, &o), KF_ERR_INVALID_ARGUMENT, "3 ranks");
  for (int r = 0; r < 3; ++r) kf_communicator_destroy(comms[r]);
  (void)explained;
  kf_segmentation_release(s);
  kf_concrete_release(c);
  kf_fusion_release(f);
}

/* Segment by segment, as a framework scheduling kfuse's segments itself:
 * on each of 2 ranks, every segment (communication ones included) runs
 * through kf_execute_segment, its outputs allocated from
 * kf_segment_output_shape; the result equals kf_execute's. */
typedef struct {
  kf_fusion f;
  kf_communicator comm;
  host_tensor in[4];
  float* by_segments;
  float* at_once;
  int64_t n;
  kf_status status;
  char message[512];
} segment_rank;

#define MAX_VALUES 128

static void* run_segments(void* arg) {
  segment_rank* s = (segment_rank*)arg;
  DLTensor dl[4];
  const DLTensor* ins[4];
  for (int i = 0; i < 4; ++i) {
    dl[i] = as_dl(&s->in[i]);
    ins[i] = &dl[i];
  }
  kf_exec_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.communicator = s->comm;
  const DLTensor* value[MAX_VALUES] = {0};
  DLTensor owned[MAX_VALUES];
  int64_t shapes[MAX_VALUES][3];
  int is_owned[MAX_VALUES] = {0};
  kf_concrete c = NULL;
  kf_segmentation seg = NULL;
  size_t count = 0;
#define SEG_CHECK(call)                                                                 do {                                                                                    s->status = (call);                                                                   if (s->status != KF_OK) {                                                               snprintf(s->message, sizeof s->message, "%s: %s", #call, kf_last_error());            goto done;                                                                          }                                                                                   } while (0)
  for (size_t i = 0; i < 4; ++i) {
    kf_value_info info = {sizeof info, 0, 0, KF_FLOAT32, 0};
    SEG_CHECK(kf_fusion_input(s->f, i, &info));
    value[info.id] = ins[i];
  }
  SEG_CHECK(kf_concretize(s->f, ins, 4, &c));
  SEG_CHECK(kf_segment(c, &seg));
  SEG_CHECK(kf_segmentation_count(seg, &count));
  for (size_t k = 0; k < count; ++k) {
    kf_segment_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    SEG_CHECK(kf_segmentation_get(seg, k, &info));
    const DLTensor* seg_in[16];
    size_t n_in = 0;
    for (size_t i = 0; i < info.num_inputs; ++i)
      if (info.inputs[i] >= 0) seg_in[n_in++] = value[info.inputs[i]];
    DLTensor* seg_out[16];
    for (size_t j = 0; j < info.num_outputs; ++j) {
      const int64_t id = info.outputs[j];
      kf_value_info v = {sizeof v, 0, 0, KF_FLOAT32, 0};
      SEG_CHECK(kf_fusion_value(s->f, id, &v));
      SEG_CHECK(kf_segment_output_shape(seg, k, seg_in, n_in, j, shapes[id], (size_t)v.rank));
      int64_t n = 1;
      for (int d = 0; d < v.rank; ++d) n *= shapes[id][d];
      owned[id] = kf_test_tensor(calloc((size_t)(n > 0 ? n : 1), 8), kf_test_f32(), v.rank, shapes[id], NULL);
      is_owned[id] = 1;
      value[id] = &owned[id];
      seg_out[j] = &owned[id];
    }
    SEG_CHECK(kf_execute_segment(seg, k, seg_in, n_in, seg_out, info.num_outputs, &o));
  }
  {
    kf_value_info out = {sizeof out, 0, 0, KF_FLOAT32, 0};
    SEG_CHECK(kf_fusion_output(s->f, 0, &out));
    s->n = 1;
    for (int d = 0; d < out.rank; ++d) s->n *= value[out.id]->shape[d];
    s->by_segments = malloc((size_t)s->n * 4);
    memcpy(s->by_segments, value[out.id]->data, (size_t)s->n * 4);
    DLManagedTensor* whole = NULL;
    SEG_CHECK(kf_execute(s->f, ins, 4, &whole, 1, &o));
    s->at_once = malloc((size_t)s->n * 4);
    memcpy(s->at_once, whole->dl_tensor.data, (size_t)s->n * 4);
    whole->deleter(whole);
  }
done:
  for (int i = 0; i < MAX_VALUES; ++i)
    if (is_owned[i]) free(owned[i].data);
  kf_segmentation_release(seg);
  kf_concrete_release(c);
  return NULL;
}

static void test_segment_by_segment(void** state) {
  (void)state;
  const mesh_case* lc = &kCases[0];
  char text[4096];
  snprintf(text, sizeof text, "mesh 2\n%s%s", lc->body, lc->shards);
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  kf_communicator comms[2];
  KF_CHECK(kf_communicator_create_local(2, comms));
  segment_rank ranks[2];
  pthread_t threads[2];
  host_tensor whole[4];
  uint32_t seed = 99u;
  for (int i = 0; i < 4; ++i) {
    memset(&whole[i], 0, sizeof whole[i]);
    whole[i].rank = lc->rank[i];
    whole[i].scalar = lc->rank[i] == 0;
    for (int d = 0; d < whole[i].rank; ++d) whole[i].shape[d] = lc->shape[i][d];
    whole[i].data = malloc((size_t)numel(&whole[i]) * 4);
    for (int64_t k = 0; k < numel(&whole[i]); ++k) {
      seed = seed * 1664525u + 1013904223u;
      ((float*)whole[i].data)[k] = whole[i].scalar ? 1e-5f : (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    }
  }
  for (int r = 0; r < 2; ++r) {
    memset(&ranks[r], 0, sizeof ranks[r]);
    ranks[r].f = f;
    ranks[r].comm = comms[r];
    for (int i = 0; i < 4; ++i) ranks[r].in[i] = block_of(&whole[i], lc->shard_dim[i], r, 2);
    assert_int_equal(pthread_create(&threads[r], NULL, run_segments, &ranks[r]), 0);
  }
  for (int r = 0; r < 2; ++r) pthread_join(threads[r], NULL);
  for (int r = 0; r < 2; ++r) {
    if (ranks[r].status != KF_OK) fail_msg("rank %d: %s", r, ranks[r].message);
    for (int64_t k = 0; k < ranks[r].n; ++k)
      if (fabsf(ranks[r].by_segments[k] - ranks[r].at_once[k]) > 1e-6f)
        fail_msg("rank %d element %lld: %g by segments, %g at once", r, (long long)k, ranks[r].by_segments[k],
                 ranks[r].at_once[k]);
    free(ranks[r].by_segments);
    free(ranks[r].at_once);
    for (int i = 0; i < 4; ++i) free(ranks[r].in[i].data);
    kf_communicator_destroy(comms[r]);
  }
  for (int i = 0; i < 4; ++i) free(whole[i].data);
  kf_fusion_release(f);
}

/* Definition errors name the argument. */
static void test_definition_errors(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_EXPECT_ERROR(kf_shard(b, x, 0), KF_ERR_INVALID_ARGUMENT, "no mesh");
  KF_EXPECT_ERROR(kf_builder_set_mesh(b, 0), KF_ERR_INVALID_ARGUMENT, "num_ranks");
  KF_CHECK(kf_builder_set_mesh(b, 2));
  KF_EXPECT_ERROR(kf_builder_set_mesh(b, 2), KF_ERR_INVALID_ARGUMENT, "already");
  KF_EXPECT_ERROR(kf_shard(b, x, 2), KF_ERR_INVALID_ARGUMENT, "dim");
  KF_CHECK(kf_shard(b, x, -1));
  KF_EXPECT_ERROR(kf_shard(b, x, 0), KF_ERR_INVALID_ARGUMENT, "already sharded");
  int64_t y;
  KF_CHECK(kf_unary(b, KF_OP_NEG, x, &y));
  KF_EXPECT_ERROR(kf_shard(b, y, 0), KF_ERR_INVALID_ARGUMENT, "neither");
  int64_t bad;
  const int64_t attrs[2] = {0, 2};
  KF_EXPECT_ERROR(kf_builder_op(b, KF_OP_ALLREDUCE, &x, 1, attrs, 2, &bad, 1), KF_ERR_UNSUPPORTED,
                  "inserted by kfuse");
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  KF_CHECK(kf_replicate(b, y));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  int64_t dim;
  KF_CHECK(kf_output_sharding(f, 0, &dim));
  assert_int_equal(dim, -1);
  /* The text form round-trips the mesh and the shardings. */
  char* text;
  KF_CHECK(kf_fusion_to_text(f, &text));
  assert_non_null(strstr(text, "mesh 2"));
  assert_non_null(strstr(text, "shard t0 {dim=1}"));
  assert_non_null(strstr(text, "replicate v1"));
  kf_fusion back;
  KF_CHECK(kf_fusion_from_text(text, &back));
  assert_ptr_equal(back, f);
  kf_string_free(text);
  kf_fusion_release(back);
  kf_fusion_release(f);
  kf_builder_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_definition_errors),
      cmocka_unit_test(test_segments),
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_segment_by_segment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
