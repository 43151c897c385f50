/* kfuse quick start: load libkfuse at run time, define y = relu(x + b),
 * run it on CPU data and print the result.
 *
 *   quickstart [path/to/libkfuse.so]
 *
 * Without an argument it loads the library built beside it (the build
 * tree's, KFUSE_BUILT_LIBRARY), else the installed libkfuse.so.0 from the
 * loader's search path.
 *
 * dlopen() keeps this program free of a link-time dependency: the same
 * binary runs against any libkfuse with a matching API version. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "kfuse/kfuse.h"

/* The functions this program uses, resolved by name. */
static struct {
  const char* (*last_error)(void);
  const char* (*status_name)(kf_status);
  kf_status (*check_version)(uint32_t);
  kf_status (*builder_create)(kf_builder*);
  void (*builder_destroy)(kf_builder);
  kf_status (*define_tensor)(kf_builder, int, kf_dtype, int64_t*);
  kf_status (*binary)(kf_builder, kf_op, int64_t, int64_t, int64_t*);
  kf_status (*unary)(kf_builder, kf_op, int64_t, int64_t*);
  kf_status (*add_output)(kf_builder, int64_t, const int64_t*, size_t, int64_t);
  kf_status (*builder_finalize)(kf_builder, kf_fusion*);
  void (*fusion_release)(kf_fusion);
  kf_status (*execute)(kf_fusion, const DLTensor* const*, size_t, DLManagedTensor**, size_t,
                       const kf_exec_options*);
} kf;

static int resolve(void* lib, void** slot, const char* name) {
  *slot = dlsym(lib, name);
  if (*slot == NULL) fprintf(stderr, "quickstart: %s not found: %s\n", name, dlerror());
  return *slot != NULL;
}

/* Prints kfuse's message for a failed call and exits. */
static void check(kf_status status, const char* call) {
  if (status == KF_OK) return;
  fprintf(stderr, "quickstart: %s failed: %s: %s\n", call, kf.status_name(status), kf.last_error());
  exit(1);
}

int main(int argc, char** argv) {
#ifdef KFUSE_BUILT_LIBRARY
  const char* path = argc > 1 ? argv[1] : KFUSE_BUILT_LIBRARY;
#else
  const char* path = argc > 1 ? argv[1] : "libkfuse.so.0";
#endif
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL && argc <= 1) lib = dlopen(path = "libkfuse.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "quickstart: cannot load %s: %s\n", path, dlerror());
    return 1;
  }
  int ok = resolve(lib, (void**)&kf.last_error, "kf_last_error") &&
           resolve(lib, (void**)&kf.status_name, "kf_status_name") &&
           resolve(lib, (void**)&kf.check_version, "kf_check_version") &&
           resolve(lib, (void**)&kf.builder_create, "kf_builder_create") &&
           resolve(lib, (void**)&kf.builder_destroy, "kf_builder_destroy") &&
           resolve(lib, (void**)&kf.define_tensor, "kf_define_tensor") &&
           resolve(lib, (void**)&kf.binary, "kf_binary") &&
           resolve(lib, (void**)&kf.unary, "kf_unary") &&
           resolve(lib, (void**)&kf.add_output, "kf_add_output") &&
           resolve(lib, (void**)&kf.builder_finalize, "kf_builder_finalize") &&
           resolve(lib, (void**)&kf.fusion_release, "kf_fusion_release") &&
           resolve(lib, (void**)&kf.execute, "kf_execute");
  if (!ok) return 1;
  /* A library built from another header version is refused, not guessed at. */
  check(kf.check_version(KF_API_VERSION), "kf_check_version");

  /* Define once: x is float32 of rank 2, b float32 of rank 1 (sizes come
   * with the tensors at execute time). */
  kf_builder builder = NULL;
  int64_t x, b, sum, y;
  check(kf.builder_create(&builder), "kf_builder_create");
  check(kf.define_tensor(builder, 2, KF_FLOAT32, &x), "kf_define_tensor");
  check(kf.define_tensor(builder, 1, KF_FLOAT32, &b), "kf_define_tensor");
  check(kf.binary(builder, KF_OP_ADD, x, b, &sum), "kf_binary");
  check(kf.unary(builder, KF_OP_RELU, sum, &y), "kf_unary");
  check(kf.add_output(builder, y, NULL, 0, -1), "kf_add_output");
  kf_fusion fusion = NULL;
  check(kf.builder_finalize(builder, &fusion), "kf_builder_finalize");
  kf.builder_destroy(builder);

  /* Execute on CPU tensors: x is 2x3, b broadcasts over the rows. */
  float x_data[6] = {-1.0f, 0.5f, 2.0f, -3.0f, 1.5f, -0.25f};
  float b_data[3] = {0.5f, -1.0f, 0.25f};
  int64_t x_shape[2] = {2, 3}, b_shape[1] = {3};
  DLTensor xt = {x_data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, x_shape, NULL, 0};
  DLTensor bt = {b_data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, b_shape, NULL, 0};
  const DLTensor* inputs[2] = {&xt, &bt};
  DLManagedTensor* out = NULL;
  check(kf.execute(fusion, inputs, 2, &out, 1, NULL), "kf_execute");

  /* The output is row-major here; its strides say so in general. */
  const float* result = (const float*)out->dl_tensor.data;
  const int64_t* strides = out->dl_tensor.strides;
  int wrong = 0;
  printf("y = relu(x + b) =\n");
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      float v = result[i * strides[0] + j * strides[1]];
      float want = x_data[i * 3 + j] + b_data[j];
      if (want < 0) want = 0;
      if (v != want) wrong = 1;
      printf(" %6.2f", v);
    }
    printf("\n");
  }
  out->deleter(out);
  kf.fusion_release(fusion);
  if (wrong) fprintf(stderr, "quickstart: result differs from relu(x + b)\n");
  return wrong;
}
