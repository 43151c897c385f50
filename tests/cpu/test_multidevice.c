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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
