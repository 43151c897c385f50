/* SWIG interface for the JNI layer of the Java binding. It wraps kfuse.h as
 * is; the typemaps below turn its C conventions into JNI ones:
 *  - a failed kf_status throws org.kfuse.KfuseException with the status and
 *    kf_last_error(), read inside the same native call;
 *  - handles are Java longs, out-parameters long[]/String[] of length 1,
 *    (pointer, count) pairs Java arrays;
 *  - kf_exec_options is built from a CUstream passed as a long.
 * The generated classes are package-private in org.kfuse, except the enums
 * Op, DType and Status, which the public API uses. */
%module KfuseNative

%{
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <kfuse/kfuse.h>

static void kfj_throw(JNIEnv* env, int code, const char* message) {
  jclass cls = (*env)->FindClass(env, "org/kfuse/KfuseException");
  if (cls == NULL) return; /* NoClassDefFoundError is pending */
  jmethodID ctor = (*env)->GetMethodID(env, cls, "<init>", "(ILjava/lang/String;)V");
  jstring text = (*env)->NewStringUTF(env, message);
  if (ctor == NULL || text == NULL) return;
  jobject error = (*env)->NewObject(env, cls, ctor, (jint)code, text);
  if (error != NULL) (*env)->Throw(env, (jthrowable)error);
}
%}

%include <stdint.i>
%include <typemaps.i>
%include <enums.swg>
%javaconst(1);

%pragma(java) moduleclassmodifiers="final class"
%pragma(java) jniclassclassmodifiers="final class"
%pragma(java) jniclasscode=%{
  static {
    NativeLibrary.load();
  }
%}

%rename(Status) kf_status;
%rename(DType) kf_dtype;
%rename(Op) kf_op;
/* KF_OP_GELU -> Op.GELU, KF_ERR_PARSE -> Status.PARSE, KF_FLOAT32 -> DType.FLOAT32 */
%rename("%(regex:/^KF_(OP_|ERR_)?(.*)$/\\2/)s", %$isenumitem) "";
%ignore KF_DTYPE_COUNT;
%ignore KF_OP_COUNT;
%ignore KF_STATUS_MAX_ENUM;
%ignore KF_DTYPE_MAX_ENUM;
%ignore KF_OP_MAX_ENUM;

/* Java's enums have their names; the status enum is only ever returned. */
%ignore kf_status_name;
/* Strings come back as Java strings; the typemap for char** frees them. */
%ignore kf_string_free;
/* Structs the typemaps below flatten, and the segment API (not wrapped). */
%ignore kf_value_info;
%ignore kf_cache_stats;
%ignore kf_exec_options;
%ignore kf_allocator;
/* The concretize/segment API is for tools; the binding does not wrap it. */
%ignore kf_concretize;
%ignore kf_concrete_release;
%ignore kf_concrete_describe;
%ignore kf_segment;
%ignore kf_segmentation_release;
%ignore kf_segmentation_count;
%ignore kf_segment_info;
%ignore kf_segmentation_get;
%ignore kf_task_info;
%ignore kf_segment_child;
%ignore kf_segment_to_text;
%ignore kf_segment_schedule;
%ignore kf_segment_schedulers;
%ignore kf_fusion_value;
%ignore kf_value_shape;
%ignore kf_segment_cuda_source;
%ignore kf_bundle_create;
%ignore kf_bundle_destroy;
%ignore kf_bundle_add;
%ignore kf_bundle_count;
%ignore kf_bundle_save;
%ignore kf_bundle_load;
%ignore kf_fusion_is_ready;
%ignore kf_fusion_prepare;
%ignore kf_execute_segment;

/* kf_status: void in Java; a failure throws. */
%typemap(jni) kf_status "void"
%typemap(jtype) kf_status "void"
%typemap(jstype) kf_status "void"
%typemap(javaout) kf_status { $jnicall; }
%typemap(out) kf_status %{
  if ($1 != KF_OK) {
    kfj_throw(jenv, (int)$1, kf_last_error());
    return $null;
  }
%}

/* Opaque handles as longs; T* out-parameters as long[1]. */
%define KFJ_HANDLE(T)
%typemap(jni) T "jlong"
%typemap(jtype) T "long"
%typemap(jstype) T "long"
%typemap(javain) T "$javainput"
%typemap(javaout) T { return $jnicall; }
%typemap(in) T %{ $1 = (T)(intptr_t)$input; %}
%typemap(out) T %{ $result = (jlong)(intptr_t)$1; %}
%typemap(jni) T* "jlongArray"
%typemap(jtype) T* "long[]"
%typemap(jstype) T* "long[]"
%typemap(javain) T* "$javainput"
%typemap(in) T* (T temp = NULL) %{
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "out-parameter needs a long[1]");
    return $null;
  }
  $1 = &temp;
%}
%typemap(argout) T* %{
  { jlong value = (jlong)(intptr_t)temp$argnum; (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &value); }
%}
%enddef
KFJ_HANDLE(kf_builder)
KFJ_HANDLE(kf_fusion)
KFJ_HANDLE(kf_concrete)
KFJ_HANDLE(kf_segmentation)

%apply int64_t* OUTPUT { int64_t* out_id, int64_t* out, int64_t* out_var, int64_t* out_mean };

/* size_t* out (counts) as long[1]. */
%typemap(jni) size_t* out "jlongArray"
%typemap(jtype) size_t* out "long[]"
%typemap(jstype) size_t* out "long[]"
%typemap(javain) size_t* out "$javainput"
%typemap(in) size_t* out (size_t temp = 0) %{
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "out-parameter needs a long[1]");
    return $null;
  }
  $1 = &temp;
%}
%typemap(argout) size_t* out %{
  { jlong value = (jlong)temp$argnum; (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &value); }
%}

/* (array, count) pairs as Java long[]; null gives (NULL, 0). */
%define KFJ_LONG_ARRAY(TYPE, RELEASE_MODE)
%typemap(jni) (TYPE, size_t LEN) "jlongArray"
%typemap(jtype) (TYPE, size_t LEN) "long[]"
%typemap(jstype) (TYPE, size_t LEN) "long[]"
%typemap(javain) (TYPE, size_t LEN) "$javainput"
%typemap(in) (TYPE, size_t LEN) %{
  $1 = NULL;
  $2 = 0;
  if ($input != NULL) {
    $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
    $1 = ($1_ltype)(*jenv)->GetLongArrayElements(jenv, $input, NULL);
  }
%}
%typemap(freearg) (TYPE, size_t LEN) %{
  if ($1 != NULL) (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong*)$1, RELEASE_MODE);
%}
%enddef
/* jlong and int64_t / pointers are both 64 bits on the platforms kfuse supports. */
KFJ_LONG_ARRAY(const int64_t* IN, JNI_ABORT)
KFJ_LONG_ARRAY(int64_t* INOUT, 0)
KFJ_LONG_ARRAY(const DLTensor* const* IN, JNI_ABORT)
KFJ_LONG_ARRAY(DLTensor* const* IN, JNI_ABORT)
KFJ_LONG_ARRAY(DLManagedTensor** INOUT, 0)

%apply (const int64_t* IN, size_t LEN) {
  (const int64_t* args, size_t num_args), (const int64_t* attrs, size_t num_attrs),
  (const int64_t* axes, size_t num_axes), (const int64_t* shape, size_t rank),
  (const int64_t* broadcast_dims, size_t num_dims), (const int64_t* perm, size_t rank),
  (const int64_t* dims, size_t num_dims), (const int64_t* pads, size_t num_pads),
  (const int64_t* inputs, size_t num_inputs), (const int64_t* stride_order, size_t rank),
  (const int64_t* strides, size_t num_strides)
};
%apply (int64_t* INOUT, size_t LEN) { (int64_t* outs, size_t num_outs), (int64_t* shape, size_t rank) };
%apply (const DLTensor* const* IN, size_t LEN) { (const DLTensor* const* inputs, size_t num_inputs) };
%apply (DLTensor* const* IN, size_t LEN) { (DLTensor* const* outputs, size_t num_outputs) };
%apply (DLManagedTensor** INOUT, size_t LEN) { (DLManagedTensor** outputs, size_t num_outputs) };

/* Options: Java passes the CUstream (0 = default stream). */
%typemap(jni) const kf_exec_options* options "jlong"
%typemap(jtype) const kf_exec_options* options "long"
%typemap(jstype) const kf_exec_options* options "long"
%typemap(javain) const kf_exec_options* options "$javainput"
%typemap(in) const kf_exec_options* options (kf_exec_options temp) %{
  memset(&temp, 0, sizeof temp);
  temp.struct_size = sizeof temp;
  temp.stream = (void*)(intptr_t)$input;
  $1 = &temp;
%}

/* char** out: a String[1]; the C string is freed with kf_string_free. */
%typemap(jni) char** out "jobjectArray"
%typemap(jtype) char** out "String[]"
%typemap(jstype) char** out "String[]"
%typemap(javain) char** out "$javainput"
%typemap(in) char** out (char* temp = NULL) %{ $1 = &temp; %}
%typemap(argout) char** out %{
  if ($input != NULL) (*jenv)->SetObjectArrayElement(jenv, $input, 0, (*jenv)->NewStringUTF(jenv, temp$argnum));
  kf_string_free(temp$argnum);
%}

/* kf_value_info*: long[4] = {id, rank, dtype, is_scalar}. */
%typemap(jni) kf_value_info* info "jlongArray"
%typemap(jtype) kf_value_info* info "long[]"
%typemap(jstype) kf_value_info* info "long[]"
%typemap(javain) kf_value_info* info "$javainput"
%typemap(in) kf_value_info* info (kf_value_info temp) %{
  memset(&temp, 0, sizeof temp);
  temp.struct_size = sizeof temp;
  $1 = &temp;
%}
%typemap(argout) kf_value_info* info %{
  { jlong v[4] = {temp$argnum.id, temp$argnum.rank, temp$argnum.dtype, temp$argnum.is_scalar};
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 4, v); }
%}

/* kf_cache_stats*: long[7] in the struct's field order. */
%typemap(jni) kf_cache_stats* out "jlongArray"
%typemap(jtype) kf_cache_stats* out "long[]"
%typemap(jstype) kf_cache_stats* out "long[]"
%typemap(javain) kf_cache_stats* out "$javainput"
%typemap(in) kf_cache_stats* out (kf_cache_stats temp) %{
  memset(&temp, 0, sizeof temp);
  temp.struct_size = sizeof temp;
  $1 = &temp;
%}
%typemap(argout) kf_cache_stats* out %{
  { jlong v[7] = {(jlong)temp$argnum.definitions, (jlong)temp$argnum.hits, (jlong)temp$argnum.misses,
                  (jlong)temp$argnum.evictions, (jlong)temp$argnum.fusions,
                  (jlong)temp$argnum.concretizations, (jlong)temp$argnum.concretization_hits};
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 7, v); }
%}

/* A direct ByteBuffer as its address. */
%typemap(jni) void* DIRECT_BUFFER "jobject"
%typemap(jtype) void* DIRECT_BUFFER "java.nio.ByteBuffer"
%typemap(jstype) void* DIRECT_BUFFER "java.nio.ByteBuffer"
%typemap(javain) void* DIRECT_BUFFER "$javainput"
%typemap(in) void* DIRECT_BUFFER %{
  $1 = $input ? (*jenv)->GetDirectBufferAddress(jenv, $input) : NULL;
  if ($1 == NULL) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "expected a direct ByteBuffer");
    return $null;
  }
%}

%include "kfuse/kfuse.h"

/* DLPack plumbing that Java cannot do itself: DLTensor structs in native
 * memory, and reading tensors kfuse returns. */
%inline %{
/* One allocation: the DLTensor, then its shape, then its strides (if any). */
static int64_t kfj_tensor_new(int64_t data, int device_type, int device_id, int dtype_code,
                              int dtype_bits, const int64_t* shape, size_t rank,
                              const int64_t* strides, size_t num_strides) {
  size_t extra = rank * sizeof(int64_t) * (strides != NULL ? 2 : 1);
  DLTensor* t = (DLTensor*)calloc(1, sizeof(DLTensor) + extra);
  if (t == NULL) return 0;
  int64_t* dims = (int64_t*)(t + 1);
  if (rank > 0) memcpy(dims, shape, rank * sizeof(int64_t));
  t->data = (void*)(intptr_t)data;
  t->device.device_type = (DLDeviceType)device_type;
  t->device.device_id = device_id;
  t->ndim = (int)rank;
  t->dtype.code = (uint8_t)dtype_code;
  t->dtype.bits = (uint8_t)dtype_bits;
  t->dtype.lanes = 1;
  t->shape = dims;
  if (strides != NULL && num_strides == rank) {
    t->strides = dims + rank;
    if (rank > 0) memcpy(t->strides, strides, rank * sizeof(int64_t));
  }
  return (int64_t)(intptr_t)t;
}

static void kfj_tensor_free(int64_t tensor) { free((void*)(intptr_t)tensor); }

static int64_t kfj_buffer_address(void* DIRECT_BUFFER) { return (int64_t)(intptr_t)DIRECT_BUFFER; }

static int64_t kfj_managed_tensor(int64_t managed) {
  return (int64_t)(intptr_t)&((DLManagedTensor*)(intptr_t)managed)->dl_tensor;
}

static void kfj_managed_delete(int64_t managed) {
  DLManagedTensor* m = (DLManagedTensor*)(intptr_t)managed;
  if (m != NULL && m->deleter != NULL) m->deleter(m);
}

static int kfj_tensor_ndim(int64_t t) { return ((DLTensor*)(intptr_t)t)->ndim; }
static int kfj_tensor_device_type(int64_t t) { return (int)((DLTensor*)(intptr_t)t)->device.device_type; }
static int kfj_tensor_device_id(int64_t t) { return ((DLTensor*)(intptr_t)t)->device.device_id; }
static int kfj_tensor_dtype_code(int64_t t) { return ((DLTensor*)(intptr_t)t)->dtype.code; }
static int kfj_tensor_dtype_bits(int64_t t) { return ((DLTensor*)(intptr_t)t)->dtype.bits; }
static int64_t kfj_tensor_data(int64_t t) {
  DLTensor* d = (DLTensor*)(intptr_t)t;
  return (int64_t)(intptr_t)((char*)d->data + d->byte_offset);
}

/* Copies shape (and strides, or row-major ones when NULL) into `shape`:
 * 2*ndim entries, shape first. */
static void kfj_tensor_layout(int64_t t, int64_t* shape, size_t rank) {
  DLTensor* d = (DLTensor*)(intptr_t)t;
  size_t n = (size_t)d->ndim;
  if (rank < 2 * n) return;
  int64_t step = 1;
  for (size_t i = n; i-- > 0;) {
    shape[i] = d->shape[i];
    shape[n + i] = d->strides != NULL ? d->strides[i] : step;
    step *= d->shape[i] > 1 ? d->shape[i] : 1;
  }
}

/* Gathers a host tensor into `DIRECT_BUFFER` in row-major order. The caller
 * checked the device and that the buffer holds every element. */
static void kfj_tensor_copy_compact(int64_t t, void* DIRECT_BUFFER) {
  DLTensor* d = (DLTensor*)(intptr_t)t;
  size_t n = (size_t)d->ndim, elem = d->dtype.bits / 8, count = 1;
  int64_t index[16] = {0}, strides[16];
  int64_t step = 1;
  for (size_t i = n; i-- > 0;) {
    strides[i] = d->strides != NULL ? d->strides[i] : step;
    step *= d->shape[i] > 1 ? d->shape[i] : 1;
    count *= (size_t)d->shape[i];
  }
  const char* base = (const char*)d->data + d->byte_offset;
  char* out = (char*)DIRECT_BUFFER;
  for (size_t k = 0; k < count; ++k) {
    int64_t offset = 0;
    for (size_t i = 0; i < n; ++i) offset += index[i] * strides[i];
    memcpy(out + k * elem, base + offset * (int64_t)elem, elem);
    for (size_t i = n; i-- > 0;) {
      if (++index[i] < d->shape[i]) break;
      index[i] = 0;
    }
  }
}
%}
