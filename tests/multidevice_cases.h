/* Fusions over a device mesh, checked against the same fusion without a
 * mesh: each case runs once unsharded on whole tensors (CPU backend), then
 * sharded over `ranks` ranks, each rank passing its blocks of the sharded
 * inputs (run_ranks, defined by the including test: CPU threads with local
 * communicators, or one GPU per rank with NCCL). Every rank's outputs must
 * equal its block of the unsharded outputs (all of them, for a replicated
 * output). The cases cover what the shard stage decides: reductions over
 * the sharded dim (allreduce, reduce_scatter), var_mean's two passes,
 * replicated operands cut to a rank's block, operands sharded on different
 * dims, permutes, size() of a sharded dim, outputs asked replicated or
 * sharded. Include after <cmocka.h> and test_util.h. */
#ifndef KFUSE_TESTS_MULTIDEVICE_CASES_H
#define KFUSE_TESTS_MULTIDEVICE_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN 5
#define MAX_OUT 3
#define MAX_RANKS 4

typedef struct {
  const char* name;
  const char* body;    /* the definition without mesh/shard statements */
  const char* shards;  /* shard / replicate statements (appended) */
  int num_inputs;
  int rank[MAX_IN];        /* 0: a float32 scalar input (value 1e-5) */
  int64_t shape[MAX_IN][3];
  int shard_dim[MAX_IN];   /* -1: replicated */
  int is_label[MAX_IN];    /* int64 labels in [0, label_range) */
  int64_t label_range;
  double tol;              /* 0: 2e-5 (relative and absolute) */
} mesh_case;

static const mesh_case kCases[] = {
    {"layernorm over a sharded hidden dim",
     "input x: tensor<float32, 2>\n"
     "input w: tensor<float32, 1>\n"
     "input b: tensor<float32, 1>\n"
     "input eps: scalar<float32>\n"
     "var, mean = var_mean(x) {axes=[1], keepdim=true, correction=0}\n"
     "c = sub(x, mean)\n"
     "s = add(var, eps)\n"
     "r = rsqrt(s)\n"
     "n = mul(c, r)\n"
     "g = mul(n, w)\n"
     "y = add(g, b)\n"
     "output y\n",
     "shard x {dim=1}\nshard w {dim=0}\nshard b {dim=0}\n",
     4, {2, 1, 1, 0}, {{5, 48}, {48}, {48}, {0}}, {1, 0, 0, -1}, {0}, 0, 0},
    {"softmax over a sharded dim, output gathered",
     "input x: tensor<float32, 2>\n"
     "m = max(x) {axes=[1], keepdim=true}\n"
     "d = sub(x, m)\n"
     "e = exp(d)\n"
     "s = sum(e) {axes=[1], keepdim=true}\n"
     "y = div(e, s)\n"
     "output y\n",
     "shard x {dim=1}\nreplicate y\n",
     1, {2}, {{3, 24}}, {1}, {0}, 0, 0},
    {"cross-entropy over a sharded vocabulary",
     "input x: tensor<float32, 2>\n"
     "input label: tensor<int64, 1>\n"
     "m = max(x) {axes=[1], keepdim=true}\n"
     "d = sub(x, m)\n"
     "e = exp(d)\n"
     "s = sum(e) {axes=[1], keepdim=true}\n"
     "l = log(s)\n"
     "lse = add(l, m)\n"
     "v = size(x) {dim=1}\n"
     "const zero: int64 = 0\n"
     "const one: int64 = 1\n"
     "ids = iota(v, zero, one) {dtype=int64}\n"
     "lab = unsqueeze(label) {dim=1}\n"
     "hot = eq(ids, lab)\n"
     "const fz: float32 = 0\n"
     "pick = where(hot, x, fz)\n"
     "picked = sum(pick) {axes=[1], keepdim=true}\n"
     "loss = sub(lse, picked)\n"
     "output loss\n",
     "shard x {dim=1}\n",
     2, {2, 1}, {{6, 36}, {6}}, {1, -1}, {0, 1}, 36, 0},
    {"residual + rmsnorm, residual output gathered",
     "input x: tensor<float32, 2>\n"
     "input r: tensor<float32, 2>\n"
     "input w: tensor<float32, 1>\n"
     "input eps: scalar<float32>\n"
     "h = add(x, r)\n"
     "sq = mul(h, h)\n"
     "ms = mean(sq) {axes=[1], keepdim=true}\n"
     "t = add(ms, eps)\n"
     "k = rsqrt(t)\n"
     "n = mul(h, k)\n"
     "y = mul(n, w)\n"
     "output y\n"
     "output h\n",
     "shard x {dim=1}\nshard r {dim=1}\nshard w {dim=0}\nreplicate h\n",
     4, {2, 2, 1, 0}, {{4, 24}, {4, 24}, {24}, {0}}, {1, 1, 0, -1}, {0}, 0, 0},
    {"bias + gelu on a column-parallel block; a replicated bias is cut",
     "input a: tensor<float32, 3>\n"
     "input bias: tensor<float32, 1>\n"
     "z = add(a, bias)\n"
     "y = gelu(z)\n"
     "output y\n",
     "shard a {dim=2}\n",
     2, {3, 1}, {{2, 3, 24}, {24}}, {2, -1}, {0}, 0, 0},
    {"column sums of a row-sharded block, reduce-scattered",
     "input x: tensor<float32, 2>\n"
     "cs = sum(x) {axes=[0], keepdim=false}\n"
     "sq = mul(x, x)\n"
     "ss = sum(sq) {axes=[0], keepdim=false}\n"
     "output cs\n"
     "output ss\n",
     "shard x {dim=0}\nshard cs {dim=0}\n",
     1, {2}, {{12, 36}}, {0}, {0}, 0, 0},
    {"operands sharded on different dims; permute; var over the sharded dim",
     "input x: tensor<float32, 2>\n"
     "input y: tensor<float32, 2>\n"
     "s = add(x, y)\n"
     "p = permute(s) {perm=[1, 0]}\n"
     "v = var(p) {axes=[0], keepdim=false, correction=1}\n"
     "output p\n"
     "output v\n",
     "shard x {dim=0}\nshard y {dim=1}\n",
     2, {2, 2}, {{12, 12}, {12, 12}}, {0, 1}, {0}, 0, 0},
    {"tensor-parallel MLP: column- then row-parallel linear, bias after the allreduce, residual",
     "input x: tensor<float32, 2>\n"
     "input w1: tensor<float32, 2>\n"
     "input b1: tensor<float32, 1>\n"
     "input w2: tensor<float32, 2>\n"
     "input b2: tensor<float32, 1>\n"
     "h = linear(x, w1, b1)\n"
     "g = gelu(h)\n"
     "y = linear(g, w2, b2)\n"
     "r = add(y, x)\n"
     "output r\n",
     "shard w1 {dim=0}\nshard b1 {dim=0}\nshard w2 {dim=1}\n",
     5, {2, 2, 1, 2, 1}, {{8, 12}, {48, 12}, {48}, {12, 48}, {12}}, {-1, 0, 0, 1, -1}, {0}, 0, 1e-4},
    {"row-parallel matmul reduce-scattered over rows; batch-sharded linear",
     "input a: tensor<float32, 2>\n"
     "input b: tensor<float32, 2>\n"
     "input x: tensor<float32, 2>\n"
     "input w: tensor<float32, 2>\n"
     "c = matmul(a, b)\n"
     "z = linear(x, w)\n"
     "output c\n"
     "output z\n",
     "shard a {dim=1}\nshard b {dim=0}\nshard x {dim=0}\nshard c {dim=0}\n",
     4, {2, 2, 2, 2}, {{12, 24}, {24, 12}, {24, 12}, {12, 12}}, {1, 0, 0, -1}, {0}, 0, 1e-4},
};

/* ---- tensors ------------------------------------------------------------- */

typedef struct {
  int rank;
  int64_t shape[3];
  int is_int;   /* int64 */
  int scalar;   /* a float32 0-dim input */
  void* data;
} host_tensor;

static int64_t numel(const host_tensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; ++d) n *= t->shape[d];
  return n;
}

static size_t elem(const host_tensor* t) { return t->is_int ? 8 : 4; }

static DLTensor as_dl(host_tensor* t) {
  DLDataType dt = t->is_int ? kf_test_i64() : kf_test_f32();
  return kf_test_tensor(t->data, dt, t->rank, t->shape, NULL);
}

/* Block `r` of `ranks` along `dim` (dim < 0: a copy of the whole). */
static host_tensor block_of(const host_tensor* t, int dim, int r, int ranks) {
  host_tensor b = *t;
  if (dim >= 0) b.shape[dim] = t->shape[dim] / ranks;
  b.data = malloc((size_t)(numel(&b) > 0 ? numel(&b) : 1) * elem(t));
  int64_t idx[3] = {0, 0, 0};
  const int64_t n = numel(&b);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k, src = 0, stride = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      idx[d] = rem % b.shape[d];
      rem /= b.shape[d];
    }
    for (int d = t->rank - 1; d >= 0; --d) {
      const int64_t i = d == dim ? idx[d] + (int64_t)r * b.shape[d] : idx[d];
      src += i * stride;
      stride *= t->shape[d];
    }
    memcpy((char*)b.data + (size_t)k * elem(t), (const char*)t->data + (size_t)src * elem(t), elem(t));
  }
  return b;
}

/* ---- one rank ------------------------------------------------------------ */

/* One rank's call: its input blocks in, its outputs back as host tensors
 * (malloc'd data, shape in out_shape), filled by the test's run_ranks. */
typedef struct {
  kf_fusion fusion;
  int rank, ranks;
  host_tensor in[MAX_IN];
  int num_inputs;
  DLTensor out[MAX_OUT];
  int64_t out_shape[MAX_OUT][3];
  size_t num_outputs;
  kf_status status;
  char message[512];
} rank_job;

/* Runs jobs[0..ranks) concurrently (one thread per rank), each with its
 * communicator; defined by the including test. */
static void run_ranks(rank_job* jobs, int ranks);

/* A compact row-major host copy of `t` (any strides: kfuse may return an
 * output in another layout) into *d, its shape in `shape`; `to_host`
 * copies bytes from t's memory. */
static void compact_copy(DLTensor* d, int64_t* shape, const DLTensor* t,
                         void (*to_host)(void*, const void*, size_t)) {
  const size_t es = t->dtype.bits / 8;
  int64_t n = 1, span = 1;
  for (int k = 0; k < t->ndim; ++k) {
    shape[k] = t->shape[k];
    n *= t->shape[k];
    if (t->shape[k] > 0) span += (t->shape[k] - 1) * (t->strides ? t->strides[k] : 0);
  }
  if (t->strides == NULL) span = n;
  char* raw = (char*)malloc((size_t)(span > 0 ? span : 1) * es);
  to_host(raw, (const char*)t->data + t->byte_offset, (size_t)(n > 0 ? span : 0) * es);
  *d = *t;
  d->shape = shape;
  d->strides = NULL;
  d->byte_offset = 0;
  d->device.device_type = kDLCPU;
  d->device.device_id = 0;
  d->data = malloc((size_t)(n > 0 ? n : 1) * es);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k, off = 0, step = 1;
    for (int a = t->ndim - 1; a >= 0; --a) {
      const int64_t i = rem % t->shape[a];
      rem /= t->shape[a];
      off += i * (t->strides ? t->strides[a] : step);
      step *= t->shape[a];
    }
    memcpy((char*)d->data + (size_t)k * es, raw + (size_t)off * es, es);
  }
  free(raw);
}

static void keep_output(rank_job* j, size_t o, const DLTensor* t, void (*to_host)(void*, const void*, size_t)) {
  compact_copy(&j->out[o], j->out_shape[o], t, to_host);
}

static void host_to_host(void* dst, const void* src, size_t bytes) { memcpy(dst, src, bytes); }

/* ---- the check ----------------------------------------------------------- */

static double value_at(const DLTensor* t, int64_t k) {
  if (t->dtype.code == kDLInt) return (double)((const int64_t*)t->data)[k];
  return (double)((const float*)t->data)[k];
}

/* Element k (row-major) of block r along dim of whole tensor `w`. */
static int64_t whole_index(const DLTensor* w, const DLTensor* b, int dim, int r, int64_t k) {
  int64_t idx[8], src = 0, stride = 1;
  for (int d = b->ndim - 1; d >= 0; --d) {
    idx[d] = k % b->shape[d];
    k /= b->shape[d];
  }
  for (int d = w->ndim - 1; d >= 0; --d) {
    const int64_t i = d == dim ? idx[d] + (int64_t)r * b->shape[d] : idx[d];
    src += i * stride;
    stride *= w->shape[d];
  }
  return src;
}

static void check_case(const mesh_case* c, int ranks) {
  /* Whole inputs. */
  host_tensor whole[MAX_IN];
  uint32_t seed = 12345u;
  for (int i = 0; i < c->num_inputs; ++i) {
    host_tensor* t = &whole[i];
    memset(t, 0, sizeof *t);
    t->rank = c->rank[i];
    t->scalar = c->rank[i] == 0;
    t->is_int = c->is_label[i];
    for (int d = 0; d < t->rank; ++d) t->shape[d] = c->shape[i][d];
    const int64_t n = numel(t);
    t->data = malloc((size_t)n * elem(t));
    for (int64_t k = 0; k < n; ++k) {
      seed = seed * 1664525u + 1013904223u;
      if (t->is_int) ((int64_t*)t->data)[k] = (int64_t)(seed >> 8) % c->label_range;
      else ((float*)t->data)[k] = t->scalar ? 1e-5f : (float)((seed >> 8) % 4001) / 1000.0f - 2.0f;
    }
  }
  /* Unsharded reference. */
  kf_fusion ref;
  KF_CHECK(kf_fusion_from_text(c->body, &ref));
  size_t num_outputs;
  KF_CHECK(kf_fusion_num_outputs(ref, &num_outputs));
  DLTensor dl[MAX_IN];
  const DLTensor* ins[MAX_IN];
  for (int i = 0; i < c->num_inputs; ++i) {
    dl[i] = as_dl(&whole[i]);
    ins[i] = &dl[i];
  }
  DLManagedTensor* expected[MAX_OUT];
  KF_CHECK(kf_execute(ref, ins, (size_t)c->num_inputs, expected, num_outputs, NULL));

  /* Sharded, one thread per rank. */
  char text[4096];
  snprintf(text, sizeof text, "mesh %d\n%s%s", ranks, c->body, c->shards);
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  int64_t mesh = 0;
  KF_CHECK(kf_fusion_mesh(f, &mesh));
  assert_int_equal(mesh, ranks);
  rank_job jobs[MAX_RANKS];
  for (int r = 0; r < ranks; ++r) {
    rank_job* j = &jobs[r];
    memset(j, 0, sizeof *j);
    j->fusion = f;
    j->rank = r;
    j->ranks = ranks;
    j->num_inputs = c->num_inputs;
    j->num_outputs = num_outputs;
    for (int i = 0; i < c->num_inputs; ++i) j->in[i] = block_of(&whole[i], c->shard_dim[i], r, ranks);
  }
  run_ranks(jobs, ranks);
  for (int r = 0; r < ranks; ++r) {
    if (jobs[r].status != KF_OK) fail_msg("%s, %d ranks, rank %d: %s", c->name, ranks, r, jobs[r].message);
    for (size_t o = 0; o < num_outputs; ++o) {
      int64_t dim;
      KF_CHECK(kf_output_sharding(f, o, &dim));
      int64_t wshape[3];
      DLTensor whole_out;
      compact_copy(&whole_out, wshape, &expected[o]->dl_tensor, host_to_host);
      const DLTensor* w = &whole_out;
      const DLTensor* b = &jobs[r].out[o];
      assert_int_equal(b->ndim, w->ndim);
      for (int d = 0; d < w->ndim; ++d)
        assert_int_equal(b->shape[d], d == dim ? w->shape[d] / ranks : w->shape[d]);
      int64_t n = 1;
      for (int d = 0; d < b->ndim; ++d) n *= b->shape[d];
      for (int64_t k = 0; k < n; ++k) {
        const double want = value_at(w, whole_index(w, b, (int)dim, r, k));
        const double got = value_at(b, k);
        const double tol = c->tol > 0 ? c->tol : 2e-5;
        if (fabs(got - want) > tol + tol * fabs(want))
          fail_msg("%s, %d ranks, rank %d, output %zu (sharded on %lld), element %lld: got %.9g, expected %.9g",
                   c->name, ranks, r, o, (long long)dim, (long long)k, got, want);
      }
      free(whole_out.data);
    }
  }
  for (int r = 0; r < ranks; ++r) {
    for (size_t o = 0; o < num_outputs; ++o) free(jobs[r].out[o].data);
    for (int i = 0; i < c->num_inputs; ++i) free(jobs[r].in[i].data);
  }
  for (size_t o = 0; o < num_outputs; ++o) expected[o]->deleter(expected[o]);
  for (int i = 0; i < c->num_inputs; ++i) free(whole[i].data);
  kf_fusion_release(f);
  kf_fusion_release(ref);
}

#endif
