/* SWIG interface for the Go binding's generated layer (package capi).
 *
 * Go moves goroutines between OS threads between two cgo calls, so a
 * thread-local kf_last_error() read in a second call may belong to another
 * goroutine. Every kf_status is therefore turned, inside the same native
 * call, into an owned error object (0 on success) that holds the status and
 * a copy of the message; Go reads and frees it with kfgo_error_*. */
%module capi

%{
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <kfuse/kfuse.h>

typedef struct kfgo_error {
  int code;
  char message[];
} kfgo_error;

static long long kfgo_capture(kf_status status) {
  if (status == KF_OK) return 0;
  const char* message = kf_last_error();
  size_t n = strlen(message);
  kfgo_error* e = (kfgo_error*)malloc(sizeof(kfgo_error) + n + 1);
  if (e == NULL) abort(); /* no memory even for the message */
  e->code = (int)status;
  memcpy(e->message, message, n + 1);
  return (long long)(intptr_t)e;
}
%}

%include <stdint.i>

/* Every kf_status return becomes an error handle (0 = success). */
%typemap(gotype) kf_status "int64"
%typemap(out) kf_status %{ $result = kfgo_capture($1); %}

/* Handles and DLPack pointers are plain uintptrs on the Go side; the
 * idiomatic package allocates DLTensors and pointer arrays with C.malloc
 * (cgo forbids passing Go pointers to Go pointers). */
%define KFGO_UINTPTR(T)
%typemap(gotype) T "uintptr"
%typemap(in) T %{ $1 = *($&1_ltype)&$input; %}
%typemap(out) T %{ *($&1_ltype)&$result = $1; %}
%enddef
%define KFGO_UINTPTR_OUT(T)
%typemap(gotype) T "*uintptr"
%typemap(in) T %{ $1 = *($&1_ltype)&$input; %}
%enddef
KFGO_UINTPTR(kf_builder)
KFGO_UINTPTR(kf_fusion)
KFGO_UINTPTR(kf_concrete)
KFGO_UINTPTR(kf_segmentation)
KFGO_UINTPTR(const DLTensor* const*)
KFGO_UINTPTR(DLTensor* const*)
KFGO_UINTPTR(DLManagedTensor**)
KFGO_UINTPTR(const kf_exec_options*)
KFGO_UINTPTR_OUT(kf_builder*)
KFGO_UINTPTR_OUT(kf_fusion*)
KFGO_UINTPTR_OUT(kf_concrete*)
KFGO_UINTPTR_OUT(kf_segmentation*)
KFGO_UINTPTR_OUT(char**)

/* Structs the Go side reads through generated getters; these set struct_size. */
%inline %{
static kf_value_info* kfgo_value_info_new(void) {
  kf_value_info* v = (kf_value_info*)calloc(1, sizeof(kf_value_info));
  if (v != NULL) v->struct_size = sizeof(kf_value_info);
  return v;
}
static kf_cache_stats* kfgo_cache_stats_new(void) {
  kf_cache_stats* v = (kf_cache_stats*)calloc(1, sizeof(kf_cache_stats));
  if (v != NULL) v->struct_size = sizeof(kf_cache_stats);
  return v;
}
static kf_exec_options* kfgo_exec_options_new(void* stream) {
  kf_exec_options* v = (kf_exec_options*)calloc(1, sizeof(kf_exec_options));
  if (v != NULL) {
    v->struct_size = sizeof(kf_exec_options);
    v->stream = stream;
  }
  return v;
}
%}

/* Text results arrive as char* handles: copy to Go, then free. */
%ignore kf_string_free;
KFGO_UINTPTR(uintptr_t)
%inline %{
static const char* kfgo_string(uintptr_t s) { return (const char*)s; }
static void kfgo_string_free(uintptr_t s) { kf_string_free((char*)s); }
%}

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
%ignore kf_allocator;

%include "kfuse/kfuse.h"

%inline %{
static int kfgo_error_code(long long e) { return ((kfgo_error*)(intptr_t)e)->code; }
static const char* kfgo_error_message(long long e) { return ((kfgo_error*)(intptr_t)e)->message; }
static void kfgo_error_free(long long e) { free((void*)(intptr_t)e); }
%}
