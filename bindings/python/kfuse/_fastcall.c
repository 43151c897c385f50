/* kfuse._fastcall: the per-call path of kfuse.Fusion.__call__ in C.
 *
 * The pure-Python call (kfuse/_core.py) spends about 30 us of ctypes work
 * around a C call of about 5 us; this module does the same work with
 * Python's C API. It is optional: kfuse/_ext.py loads it, and without it
 * (or with KFUSE_PYTHON_EXTENSION=0) the package runs the ctypes code.
 *
 * Caller.run(tensors) takes a call without out=, stream= or communicator=
 * and returns its result, or None to hand the whole call to the Python
 * path (a closed fusion; a torch tensor of rank > 16, which the Python
 * path reports). It decides before anything has a side effect:
 *
 *  - torch mode, the Python path's _call_torch: every argument a Python
 *    number for a scalar input or a plain torch.Tensor/Parameter that does
 *    not require grad, of a dtype kfuse knows, in CUDA or CPU memory. The
 *    DLTensors are built on the C stack from data_ptr(), shape, stride()
 *    and get_device(), and the call runs on torch's current stream of the
 *    tensors' device, asked of torch._C._cuda_getCurrentRawStream at every
 *    call (never cached: `with torch.cuda.stream(s)` switches it without
 *    telling anyone; asking is one call into torch's C code).
 *  - DLPack mode, the Python path's _borrow_inputs and dl.borrow: numbers
 *    for scalar inputs, __dlpack__ capsules for everything else, consumed
 *    in C. Whatever is unusual (an object without __dlpack__, a producer
 *    that raises BufferError, a capsule of another DLPack major, a number
 *    of a subclass or of float16/bfloat16/float8) goes to the Python
 *    helper the Python path uses for that argument, so errors and
 *    fallbacks are the Python path's own.
 *
 * Outputs are kfuse.Tensor objects over an Owner (this module's type):
 * the Owner calls kfuse's deleter when it goes, then drops what it keeps
 * (the inputs an in-place output is a view of). Failed calls raise
 * kfuse.KfuseError with kf_last_error() read on this thread right after
 * the call. The GIL is released during kf_execute_flagged, as ctypes does.
 *
 * No link to libkfuse: init() receives kf_execute_flagged and
 * kf_last_error as addresses from the ctypes library, so the package has
 * one way of finding and loading the library. The DLPack and kfuse
 * structs are declared here (the ABI is fixed: DLPack 1.0, kf_exec_options
 * of API version 1); the CMake build checks them against kfuse.h.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030A0000
#error "kfuse._fastcall needs Python 3.10 or newer (the package falls back to ctypes)"
#endif

/* Bump when init()'s arguments or Caller's constructor change: _ext.py
 * refuses a module of another version (a stale build). */
#define FC_ABI_VERSION 1
#define FC_MAX_RANK 16 /* the Python path's torch bridge holds up to 16 */
#define FC_SMALL 8     /* arguments and outputs kept on the C stack */

/* ---------------------------------------------------------------------- */
/* DLPack 1.0 and kfuse ABI */

enum { FC_CPU = 1, FC_CUDA = 2, FC_CUDA_MANAGED = 13 };

typedef struct {
  int32_t device_type;
  int32_t device_id;
} fc_device;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} fc_dtype;

typedef struct {
  void* data;
  fc_device device;
  int32_t ndim;
  fc_dtype dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} fc_tensor;

typedef struct fc_managed { /* DLManagedTensor (0.6) */
  fc_tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct fc_managed*);
} fc_managed;

typedef struct fc_versioned { /* DLManagedTensorVersioned (1.x) */
  struct {
    uint32_t major;
    uint32_t minor;
  } version;
  void* manager_ctx;
  void (*deleter)(struct fc_versioned*);
  uint64_t flags;
  fc_tensor dl_tensor;
} fc_versioned;

typedef struct { /* kf_exec_options */
  size_t struct_size;
  void* stream;
  const void* allocator;
  void* communicator;
} fc_exec_options;

typedef int (*fc_execute_fn)(void* fusion, const fc_tensor* const* inputs, const uint64_t* input_flags,
                             size_t num_inputs, fc_versioned** outputs, size_t num_outputs,
                             const fc_exec_options* options);
typedef const char* (*fc_last_error_fn)(void);

#ifdef KFUSE_FASTCALL_CHECK_ABI /* the CMake build: the structs above are kfuse.h's */
#include <kfuse/kfuse.h>
#define FC_SAME(a, b, f) _Static_assert(offsetof(a, f) == offsetof(b, f), #a "." #f)
_Static_assert(sizeof(fc_tensor) == sizeof(DLTensor), "DLTensor");
FC_SAME(fc_tensor, DLTensor, device);
FC_SAME(fc_tensor, DLTensor, dtype);
FC_SAME(fc_tensor, DLTensor, shape);
FC_SAME(fc_tensor, DLTensor, strides);
FC_SAME(fc_tensor, DLTensor, byte_offset);
_Static_assert(sizeof(fc_managed) == sizeof(DLManagedTensor), "DLManagedTensor");
FC_SAME(fc_managed, DLManagedTensor, deleter);
_Static_assert(sizeof(fc_versioned) == sizeof(DLManagedTensorVersioned), "DLManagedTensorVersioned");
FC_SAME(fc_versioned, DLManagedTensorVersioned, deleter);
FC_SAME(fc_versioned, DLManagedTensorVersioned, flags);
FC_SAME(fc_versioned, DLManagedTensorVersioned, dl_tensor);
_Static_assert(sizeof(fc_exec_options) == sizeof(kf_exec_options), "kf_exec_options");
FC_SAME(fc_exec_options, kf_exec_options, stream);
FC_SAME(fc_exec_options, kf_exec_options, communicator);
_Static_assert(KF_API_VERSION == 1, "kf_exec_options of another API version");
_Static_assert(__builtin_types_compatible_p(__typeof__(kf_execute_flagged),
                                            kf_status(kf_fusion, const DLTensor* const*, const uint64_t*, size_t,
                                                      DLManagedTensorVersioned**, size_t, const kf_exec_options*)),
               "kf_execute_flagged's signature");
_Static_assert(__builtin_types_compatible_p(__typeof__(kf_last_error), const char*(void)), "kf_last_error");
#endif

/* kf_dtype codes converted here (the others go to _core._scalar_tensor). */
enum { FC_F64 = 0, FC_F32 = 1, FC_I64 = 4, FC_I32 = 5, FC_BOOL = 6, FC_I8 = 9, FC_U8 = 10 };
#ifdef KFUSE_FASTCALL_CHECK_ABI
_Static_assert((int)FC_F64 == (int)KF_FLOAT64 && (int)FC_F32 == (int)KF_FLOAT32 && (int)FC_I64 == (int)KF_INT64 &&
                   (int)FC_I32 == (int)KF_INT32 && (int)FC_BOOL == (int)KF_BOOL && (int)FC_I8 == (int)KF_INT8 &&
                   (int)FC_U8 == (int)KF_UINT8,
               "kf_dtype codes");
_Static_assert((int)FC_CPU == (int)kDLCPU && (int)FC_CUDA == (int)kDLCUDA &&
                   (int)FC_CUDA_MANAGED == (int)kDLCUDAManaged,
               "DLPack device types");
#endif

/* ---------------------------------------------------------------------- */
/* module state: set once by init() */

static struct {
  fc_execute_fn execute;
  fc_last_error_fn last_error;
  PyObject* kfuse_error;     /* kfuse.KfuseError */
  PyTypeObject* tensor_type; /* kfuse.Tensor */
  PyObject* slot_owner;      /* its slot descriptors */
  PyObject* slot_t;
  PyObject* slot_stream;
  PyObject* borrow;               /* _dlpack.borrow(obj, stream, what) */
  PyObject* from_capsule;         /* _dlpack.from_capsule(capsule, what) */
  PyObject* from_array_interface; /* _dlpack.from_array_interface(obj, what) */
  PyObject* scalar_tensor;        /* _core._scalar_tensor(value, dtype) */
  PyObject* torch_bridge;         /* _core._torch_bridge() */
  /* from the bridge, once torch is imported */
  PyObject* torch_tensor;
  PyObject* torch_parameter;
  PyObject* torch_codes; /* torch dtype -> (DLPack code, bits) */
  PyObject* raw_stream;  /* torch._C._cuda_getCurrentRawStream, or NULL */
  int torch_ready;
} fc;

static struct {
  PyObject *dlpack, *dlpack_device, *array_interface, *requires_grad, *dtype, *is_cuda, *is_cpu, *data_ptr, *shape,
      *stride, *get_device, *release, *ptr, *flags, *data, *torch, *types, *codes, *raw_stream;
  PyObject* kw_max_version;        /* ("max_version",) */
  PyObject* kw_max_version_stream; /* ("max_version", "stream") */
  PyObject* kw_stream;             /* ("stream",) */
  PyObject* version_1_0;           /* (1, 0) */
  PyObject* zero;
  PyObject* one;          /* DLPack's legacy default stream */
  PyObject* cuda;         /* 2 (FC_CUDA) */
  PyObject* cuda_managed; /* 13 */
} names;

/* Static types whose __dlpack__ rejects max_version (NumPy 1.x's ndarray):
 * their methods cannot change, so the first TypeError answers for every
 * later call and the retry is made directly. Heap types (Python classes)
 * are asked every time, as the Python path does. */
#define FC_LEGACY_TYPES 8
static PyTypeObject* legacy_types[FC_LEGACY_TYPES];

static int is_legacy_type(PyTypeObject* t) {
  for (int i = 0; i < FC_LEGACY_TYPES && legacy_types[i]; ++i)
    if (legacy_types[i] == t) return 1;
  return 0;
}

static void note_legacy_type(PyTypeObject* t) {
  if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) return;
  for (int i = 0; i < FC_LEGACY_TYPES; ++i) {
    if (legacy_types[i] == t) return;
    if (!legacy_types[i]) {
      legacy_types[i] = t;
      return;
    }
  }
}

/* ---------------------------------------------------------------------- */
/* Owner: one output's DLManagedTensorVersioned */

typedef struct {
  PyObject_HEAD fc_versioned* managed;
  PyObject* keep; /* what an in-place output is a view of, or NULL */
  PyObject* weakrefs;
} fc_owner;

static int owner_traverse(fc_owner* self, visitproc visit, void* arg) {
  Py_VISIT(self->keep);
  return 0;
}

static int owner_clear(fc_owner* self) {
  Py_CLEAR(self->keep);
  return 0;
}

static void owner_dealloc(fc_owner* self) {
  PyObject_GC_UnTrack(self);
  PyObject *type, *value, *tb; /* what is kept may run Python code (a deleter in Python) */
  PyErr_Fetch(&type, &value, &tb);
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject*)self);
  fc_versioned* m = self->managed;
  self->managed = NULL;
  if (m && m->deleter) m->deleter(m);
  owner_clear(self);
  PyErr_Restore(type, value, tb);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* owner_addr(fc_owner* self, void* closure) {
  (void)closure;
  if (!self->managed) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(self->managed);
}

static PyGetSetDef owner_getset[] = {
    {"addr", (getter)owner_addr, NULL, "address of the DLManagedTensorVersioned kfuse made", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject owner_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kfuse._fastcall.Owner",
    .tp_basicsize = sizeof(fc_owner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Owns one output kfuse made; calls its deleter when the last reference goes.",
    .tp_traverse = (traverseproc)owner_traverse,
    .tp_clear = (inquiry)owner_clear,
    .tp_dealloc = (destructor)owner_dealloc,
    .tp_weaklistoffset = offsetof(fc_owner, weakrefs),
    .tp_getset = owner_getset,
};

/* A kfuse.Tensor over `managed` (owned from here on: on failure its deleter
 * has run) keeping `keep` (a new reference or NULL, always consumed). */
static PyObject* make_tensor(fc_versioned* managed, PyObject* keep, PyObject* stream) {
  fc_owner* owner = PyObject_GC_New(fc_owner, &owner_type);
  if (!owner) {
    managed->deleter(managed);
    Py_XDECREF(keep);
    return NULL;
  }
  owner->managed = managed;
  owner->keep = keep;
  owner->weakrefs = NULL;
  PyObject_GC_Track(owner);
  PyTypeObject* tt = fc.tensor_type;
  PyObject* t = tt->tp_alloc(tt, 0);
  if (!t) {
    Py_DECREF(owner);
    return NULL;
  }
  /* Tensor.__init__'s work, through the slot descriptors (no Python frame). */
  if (Py_TYPE(fc.slot_owner)->tp_descr_set(fc.slot_owner, t, (PyObject*)owner) < 0 ||
      Py_TYPE(fc.slot_t)->tp_descr_set(fc.slot_t, t, Py_None) < 0 ||
      Py_TYPE(fc.slot_stream)->tp_descr_set(fc.slot_stream, t, stream) < 0) {
    Py_DECREF(owner);
    Py_DECREF(t);
    return NULL;
  }
  Py_DECREF(owner);
  return t;
}

/* Capsule that calls a consumed input's deleter when it goes: what an
 * Owner keeps for an in-place output of a DLPack input. */
static const char kept_name[] = "kfuse.kept_dltensor";

static void kept_destructor(PyObject* capsule) {
  PyObject *type, *value, *tb; /* the producer's deleter may be Python code */
  PyErr_Fetch(&type, &value, &tb);
  void* m = PyCapsule_GetPointer(capsule, kept_name);
  if (!m) {
    PyErr_WriteUnraisable(capsule);
  } else if (PyCapsule_GetContext(capsule)) {
    fc_versioned* v = m;
    if (v->deleter) v->deleter(v);
  } else {
    fc_managed* u = m;
    if (u->deleter) u->deleter(u);
  }
  PyErr_Restore(type, value, tb);
}

/* ---------------------------------------------------------------------- */
/* arguments */

typedef struct {
  const fc_tensor* tensor; /* what kfuse reads */
  uint64_t flags;
  uintptr_t data;   /* data + byte_offset: in-place outputs keep inputs by it */
  void* managed;    /* a consumed capsule's managed tensor: its deleter is ours */
  int versioned;    /* managed is a DLManagedTensorVersioned */
  int delegated;    /* held is a _dlpack.Borrowed: release() when done */
  int scalar_input; /* never kept by an output (the Python path's rule) */
  PyObject* held;   /* torch tensor, Borrowed, or NULL */
  PyObject* kept;   /* set once an output keeps this argument */
  fc_tensor local;  /* torch tensors and converted numbers */
  int64_t shape[FC_MAX_RANK];
  int64_t strides[FC_MAX_RANK];
  union {
    double f64;
    float f32;
    int64_t i64;
    int32_t i32;
    int8_t i8;
    uint8_t u8;
  } value;
} fc_arg;

static void reset_arg(fc_arg* a, int scalar_input) {
  a->tensor = NULL;
  a->flags = 0;
  a->data = 0;
  a->managed = NULL;
  a->versioned = 0;
  a->delegated = 0;
  a->scalar_input = scalar_input;
  a->held = NULL;
  a->kept = NULL;
}

/* Gives an argument back (its producer's deleter, Borrowed.release()).
 * A pending exception stays pending: deleters may run Python code (a
 * ctypes callback, a capsule made in Python), which must not see it. */
static void release_arg(fc_arg* a) {
  if (!a->managed && !a->held && !a->kept) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (a->kept) { /* an output holds it now */
    Py_CLEAR(a->kept);
    a->managed = NULL;
    a->delegated = 0;
  }
  if (a->managed) {
    if (a->versioned) {
      fc_versioned* v = a->managed;
      if (v->deleter) v->deleter(v);
    } else {
      fc_managed* u = a->managed;
      if (u->deleter) u->deleter(u);
    }
    a->managed = NULL;
  }
  if (a->held && a->delegated) {
    PyObject* r = PyObject_CallMethodNoArgs(a->held, names.release);
    if (r)
      Py_DECREF(r);
    else
      PyErr_WriteUnraisable(a->held);
  }
  Py_CLEAR(a->held);
  PyErr_Restore(type, value, tb);
}

static void release_args(fc_arg* args, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; ++i) release_arg(&args[i]);
}

/* Takes what a _dlpack.Borrowed points to (a delegated argument). */
static int take_borrowed(fc_arg* a, PyObject* borrowed) {
  a->held = borrowed;
  a->delegated = 1;
  PyObject* p = PyObject_GetAttr(borrowed, names.ptr);
  if (!p) return -1;
  a->tensor = PyLong_AsVoidPtr(p);
  Py_DECREF(p);
  if (PyErr_Occurred()) return -1;
  PyObject* f = PyObject_GetAttr(borrowed, names.flags);
  if (!f) return -1;
  a->flags = PyLong_AsUnsignedLongLongMask(f);
  Py_DECREF(f);
  if (PyErr_Occurred()) return -1;
  PyObject* d = PyObject_GetAttr(borrowed, names.data);
  if (!d) return -1;
  a->data = (uintptr_t)PyLong_AsUnsignedLongLongMask(d);
  Py_DECREF(d);
  return PyErr_Occurred() ? -1 : 0;
}

static int is_number(PyObject* v) { return PyLong_Check(v) || PyFloat_Check(v); }

/* float(v) for an exact float, int or bool */
static double as_double(PyObject* v) { return PyFloat_CheckExact(v) ? PyFloat_AS_DOUBLE(v) : PyLong_AsDouble(v); }

/* int(v) for an exact float, int or bool, masked to 64 bits as ctypes'
 * integer types store it */
static uint64_t as_masked_int(PyObject* v, int* failed) {
  *failed = 0;
  if (PyFloat_CheckExact(v)) {
    PyObject* i = PyNumber_Long(v);
    if (!i) {
      *failed = 1;
      return 0;
    }
    uint64_t r = PyLong_AsUnsignedLongLongMask(i);
    Py_DECREF(i);
    return r;
  }
  uint64_t r = PyLong_AsUnsignedLongLongMask(v);
  if (r == (uint64_t)-1 && PyErr_Occurred()) *failed = 1;
  return r;
}

/* A Python number for a scalar input: converted here as _core._scalar_tensor
 * converts it, or by _scalar_tensor itself (number subclasses, whose
 * __float__/__int__ may differ, and float16, bfloat16, float8). */
static int take_number(fc_arg* a, PyObject* v, int kf_code, int dl_code, int bits, PyObject* dtype) {
  int native = PyFloat_CheckExact(v) || PyLong_CheckExact(v) || PyBool_Check(v);
  int failed = 0;
  uint64_t u = 0;
  switch (native ? kf_code : -1) {
    case FC_F64:
      a->value.f64 = as_double(v);
      failed = a->value.f64 == -1.0 && PyErr_Occurred();
      break;
    case FC_F32: {
      double d = as_double(v);
      failed = d == -1.0 && PyErr_Occurred();
      a->value.f32 = (float)d;
      break;
    }
    case FC_I64:
      u = as_masked_int(v, &failed);
      a->value.i64 = (int64_t)u;
      break;
    case FC_I32:
      u = as_masked_int(v, &failed);
      a->value.i32 = (int32_t)(uint32_t)u;
      break;
    case FC_I8:
      u = as_masked_int(v, &failed);
      a->value.i8 = (int8_t)(uint8_t)u;
      break;
    case FC_U8:
      u = as_masked_int(v, &failed);
      a->value.u8 = (uint8_t)u;
      break;
    case FC_BOOL: {
      int t = PyObject_IsTrue(v);
      failed = t < 0;
      a->value.u8 = t > 0;
      break;
    }
    default: {
      PyObject* b = PyObject_CallFunctionObjArgs(fc.scalar_tensor, v, dtype, NULL);
      return b ? take_borrowed(a, b) : -1;
    }
  }
  if (failed) return -1;
  a->local = (fc_tensor){&a->value, {FC_CPU, 0}, 0, {(uint8_t)dl_code, (uint8_t)bits, 1}, a->shape, NULL, 0};
  a->tensor = &a->local;
  a->data = (uintptr_t)&a->value;
  return 0;
}

/* "input {i}": what the Python helpers name an argument in their errors */
static PyObject* what(Py_ssize_t i) { return PyUnicode_FromFormat("input %zd", i); }

static PyObject* call_helper(PyObject* fn, PyObject* obj, Py_ssize_t i) {
  PyObject* w = what(i);
  if (!w) return NULL;
  PyObject* r = PyObject_CallFunctionObjArgs(fn, obj, w, NULL);
  Py_DECREF(w);
  return r;
}

static PyObject* call_borrow(PyObject* obj, Py_ssize_t i) {
  PyObject* w = what(i);
  if (!w) return NULL;
  PyObject* r = PyObject_CallFunctionObjArgs(fc.borrow, obj, Py_None, w, NULL);
  Py_DECREF(w);
  return r;
}

/* getattr(obj, name, None), NULL (no error) for None or absent */
static PyObject* optional_attr(PyObject* obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj, name);
  if (!r && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
  if (r == Py_None) Py_CLEAR(r);
  return r;
}

/* _dlpack._is_cuda(device()[0]) */
static int is_cuda_device(PyObject* device_fn) {
  PyObject* dev = PyObject_CallNoArgs(device_fn);
  if (!dev) return -1;
  PyObject* type = PyObject_GetItem(dev, names.zero);
  Py_DECREF(dev);
  if (!type) return -1;
  int r;
  if (PyLong_CheckExact(type)) {
    long t = PyLong_AsLong(type);
    r = t == FC_CUDA || t == FC_CUDA_MANAGED;
    if (t == -1 && PyErr_Occurred()) {
      PyErr_Clear(); /* out of range: neither */
      r = 0;
    }
  } else {
    r = PyObject_RichCompareBool(type, names.cuda, Py_EQ);
    if (r == 0) r = PyObject_RichCompareBool(type, names.cuda_managed, Py_EQ);
  }
  Py_DECREF(type);
  return r;
}

/* The capsule of a DLPack producer, consumed as _dlpack.from_capsule does;
 * anything but an unconsumed capsule of major version 1 or 0.6 goes to
 * from_capsule itself, which raises the Python path's error. */
static int take_capsule(fc_arg* a, PyObject* capsule, Py_ssize_t i) {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    fc_versioned* m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m && m->version.major == 1) {
      if (PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0) return -1;
      a->managed = m;
      a->versioned = 1;
      a->tensor = &m->dl_tensor;
      a->flags = m->flags;
      a->data = (uintptr_t)m->dl_tensor.data + m->dl_tensor.byte_offset;
      return 0;
    }
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    fc_managed* m = PyCapsule_GetPointer(capsule, "dltensor");
    if (m) {
      if (PyCapsule_SetName(capsule, "used_dltensor") < 0) return -1;
      a->managed = m;
      a->versioned = 0;
      a->tensor = &m->dl_tensor;
      a->flags = 0;
      a->data = (uintptr_t)m->dl_tensor.data + m->dl_tensor.byte_offset;
      return 0;
    }
  }
  PyErr_Clear();
  PyObject* b = call_helper(fc.from_capsule, capsule, i);
  return b ? take_borrowed(a, b) : -1;
}

/* _dlpack.borrow(obj, None, "input i") */
static int take_dlpack(fc_arg* a, PyObject* obj, Py_ssize_t i) {
  PyObject* dlpack = optional_attr(obj, names.dlpack);
  if (!dlpack) {
    if (PyErr_Occurred()) return -1;
    PyObject* b = call_borrow(obj, i); /* __array_interface__, or its TypeError */
    return b ? take_borrowed(a, b) : -1;
  }
  int cuda = 0;
  PyObject* device_fn = optional_attr(obj, names.dlpack_device);
  if (device_fn) {
    cuda = is_cuda_device(device_fn);
    Py_DECREF(device_fn);
  }
  if (PyErr_Occurred()) {
    Py_DECREF(dlpack);
    return -1;
  }
  /* capsule = dlpack(max_version=(1, 0)[, stream=1]); on TypeError without max_version */
  PyObject* kwargs[3] = {NULL, names.version_1_0, names.one};
  PyObject* capsule = NULL;
  int legacy = is_legacy_type(Py_TYPE(obj));
  if (!legacy) {
    capsule = PyObject_Vectorcall(dlpack, kwargs + 1, PY_VECTORCALL_ARGUMENTS_OFFSET,
                                  cuda ? names.kw_max_version_stream : names.kw_max_version);
    if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      legacy = 2;
    }
  }
  if (legacy) {
    capsule = PyObject_Vectorcall(dlpack, kwargs + 2, PY_VECTORCALL_ARGUMENTS_OFFSET, cuda ? names.kw_stream : NULL);
    if (capsule && legacy == 2) note_legacy_type(Py_TYPE(obj));
  }
  Py_DECREF(dlpack);
  if (!capsule) {
    if (!PyErr_ExceptionMatches(PyExc_BufferError)) return -1;
    /* NumPy 1.x: read-only and bool arrays; the array interface instead */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject* ai = PyObject_GetAttr(obj, names.array_interface); /* hasattr() */
    if (!ai) {
      if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Restore(type, value, tb); /* re-raise the BufferError */
      } else {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
      }
      return -1;
    }
    Py_DECREF(ai);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyObject* b = call_helper(fc.from_array_interface, obj, i);
    return b ? take_borrowed(a, b) : -1;
  }
  int r = take_capsule(a, capsule, i);
  Py_DECREF(capsule);
  return r;
}

/* ---------------------------------------------------------------------- */
/* torch */

/* The Python path's bridge, once torch is imported (_core._torch_bridge). */
static int torch_ready(void) {
  if (fc.torch_ready) return 1;
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* torch = PyDict_GetItemWithError(modules, names.torch);
  if (!torch) return PyErr_Occurred() ? -1 : 0;
  PyObject* bridge = PyObject_CallNoArgs(fc.torch_bridge);
  if (!bridge) return -1;
  if (bridge == Py_None) {
    Py_DECREF(bridge);
    return 0;
  }
  PyObject* types = PyObject_GetAttr(bridge, names.types);
  PyObject* codes = PyObject_GetAttr(bridge, names.codes);
  PyObject* raw = PyObject_GetAttr(bridge, names.raw_stream);
  Py_DECREF(bridge);
  if (!types || !codes || !raw || !PyTuple_Check(types) || PyTuple_GET_SIZE(types) != 2 || !PyDict_Check(codes)) {
    Py_XDECREF(types);
    Py_XDECREF(codes);
    Py_XDECREF(raw);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "kfuse._fastcall: unexpected torch bridge");
    return -1;
  }
  fc.torch_tensor = Py_NewRef(PyTuple_GET_ITEM(types, 0));
  fc.torch_parameter = Py_NewRef(PyTuple_GET_ITEM(types, 1));
  Py_DECREF(types);
  fc.torch_codes = codes;
  if (raw == Py_None)
    Py_DECREF(raw);
  else
    fc.raw_stream = raw;
  fc.torch_ready = 1;
  return 1;
}

static int attr_true(PyObject* obj, PyObject* name) {
  PyObject* v = PyObject_GetAttr(obj, name);
  if (!v) return -1;
  int r = v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
  Py_DECREF(v);
  return r;
}

static int int64_items(PyObject* seq, int64_t* out, Py_ssize_t n) {
  if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
    PyErr_SetString(PyExc_RuntimeError, "kfuse._fastcall: torch returned an unexpected shape or stride");
    return -1;
  }
  for (Py_ssize_t k = 0; k < n; ++k) {
    out[k] = (int64_t)PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(seq, k));
    if (out[k] == -1 && PyErr_Occurred()) return -1;
  }
  return 0;
}

/* _TorchBridge.takes(t) then .tensor(t, t.data_ptr()): 1 taken, 0 not a
 * tensor the bridge takes, 2 rank above 16 (the Python path raises), -1
 * error. `device` receives the CUDA device, or stays. */
static int take_torch(fc_arg* a, PyObject* t, int* device, int allow_grad) {
  PyTypeObject* type = Py_TYPE(t);
  if ((PyObject*)type != fc.torch_tensor && (PyObject*)type != fc.torch_parameter) return 0;
  if (!allow_grad) { /* run_torch: the caller (a compiled graph) tracks no gradient through kfuse */
    int grad = attr_true(t, names.requires_grad);
    if (grad != 0) return grad < 0 ? -1 : 0;
  }
  PyObject* dtype = PyObject_GetAttr(t, names.dtype);
  if (!dtype) return -1;
  PyObject* code = PyDict_GetItemWithError(fc.torch_codes, dtype);
  Py_DECREF(dtype);
  if (!code) return PyErr_Occurred() ? -1 : 0;
  int cuda = attr_true(t, names.is_cuda);
  if (cuda < 0) return -1;
  if (!cuda) {
    int cpu = attr_true(t, names.is_cpu);
    if (cpu <= 0) return cpu;
  }
  PyObject* p = PyObject_CallMethodNoArgs(t, names.data_ptr);
  if (!p) return -1;
  void* data = PyLong_AsVoidPtr(p);
  Py_DECREF(p);
  if (!data && PyErr_Occurred()) return -1;
  PyObject* shape = PyObject_GetAttr(t, names.shape);
  if (!shape) return -1;
  Py_ssize_t nd = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
  if (nd > FC_MAX_RANK) {
    Py_DECREF(shape);
    return 2;
  }
  int bad = int64_items(shape, a->shape, nd);
  Py_DECREF(shape);
  if (bad) return -1;
  PyObject* stride = PyObject_CallMethodNoArgs(t, names.stride);
  if (!stride) return -1;
  bad = int64_items(stride, a->strides, nd);
  Py_DECREF(stride);
  if (bad) return -1;
  fc_device dev = {FC_CPU, 0};
  if (cuda) {
    PyObject* d = PyObject_CallMethodNoArgs(t, names.get_device);
    if (!d) return -1;
    long id = PyLong_AsLong(d);
    Py_DECREF(d);
    if (id == -1 && PyErr_Occurred()) return -1;
    dev = (fc_device){FC_CUDA, (int32_t)id};
    *device = (int)id;
  }
  long dl_code = PyLong_AsLong(PyTuple_GET_ITEM(code, 0));
  long bits = PyLong_AsLong(PyTuple_GET_ITEM(code, 1));
  if (PyErr_Occurred()) return -1;
  a->local = (fc_tensor){data, dev, (int32_t)nd, {(uint8_t)dl_code, (uint8_t)bits, 1}, a->shape, a->strides, 0};
  a->tensor = &a->local;
  a->flags = 0;
  a->data = (uintptr_t)data;
  a->held = Py_NewRef(t);
  return 1;
}

/* ---------------------------------------------------------------------- */
/* Caller: one fusion's call path */

typedef struct {
  int is_scalar;
  int kf_code;
  int dl_code;
  int bits;
} fc_input;

typedef struct {
  PyObject_HEAD void* handle; /* kf_fusion, borrowed from the Fusion; NULL once closed */
  Py_ssize_t num_inputs;
  Py_ssize_t num_outputs;
  fc_input* inputs;
  PyObject* dtypes; /* tuple: each input's kfuse.DType (for _scalar_tensor) */
} fc_caller;

static void caller_dealloc(fc_caller* self) {
  PyMem_Free(self->inputs);
  Py_XDECREF(self->dtypes);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* caller_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *handle, *inputs;
  Py_ssize_t num_outputs;
  static char* keywords[] = {"handle", "inputs", "num_outputs", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!n:Caller", keywords, &handle, &PyTuple_Type, &inputs,
                                   &num_outputs))
    return NULL;
  if (!fc.execute) {
    PyErr_SetString(PyExc_RuntimeError, "kfuse._fastcall: init() was not called");
    return NULL;
  }
  void* h = PyLong_AsVoidPtr(handle);
  if (!h && PyErr_Occurred()) return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(inputs);
  fc_caller* self = (fc_caller*)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->handle = h;
  self->num_inputs = n;
  self->num_outputs = num_outputs;
  self->inputs = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(fc_input));
  self->dtypes = PyTuple_New(n);
  if (!self->inputs || !self->dtypes) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* dtype;
    fc_input* in = &self->inputs[i];
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(inputs, i), "piiiO:Caller input", &in->is_scalar, &in->kf_code, &in->dl_code,
                          &in->bits, &dtype)) {
      Py_DECREF(self);
      return NULL;
    }
    PyTuple_SET_ITEM(self->dtypes, i, Py_NewRef(dtype));
  }
  return (PyObject*)self;
}

static PyObject* caller_close(fc_caller* self, PyObject* unused) {
  (void)unused;
  self->handle = NULL;
  Py_RETURN_NONE;
}

static PyObject* raise_kfuse_error(int status, const char* message) {
  PyObject* msg = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
  if (!msg) return NULL;
  PyObject* e = PyObject_CallFunction(fc.kfuse_error, "iNs", status, msg, "kf_execute_flagged");
  if (!e) return NULL;
  PyErr_SetObject((PyObject*)Py_TYPE(e), e);
  Py_DECREF(e);
  return NULL;
}

/* Builds every argument; returns 1 done, 0 to hand the call to the Python
 * path, -1 error (arguments built so far released). */
static int build_torch(fc_caller* self, PyObject* tensors, fc_arg* args, int* device, int allow_grad) {
  Py_ssize_t n = PyTuple_GET_SIZE(tensors);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyTuple_GET_ITEM(tensors, i);
    fc_arg* a = &args[i];
    const fc_input* in = &self->inputs[i];
    reset_arg(a, in->is_scalar);
    int r;
    if (in->is_scalar && is_number(t))
      r = take_number(a, t, in->kf_code, in->dl_code, in->bits, PyTuple_GET_ITEM(self->dtypes, i)) < 0 ? -1 : 1;
    else
      r = take_torch(a, t, device, allow_grad);
    if (r != 1) {
      release_args(args, i + 1);
      return r;
    }
  }
  return 1;
}

static int build_dlpack(fc_caller* self, PyObject* tensors, fc_arg* args) {
  Py_ssize_t n = PyTuple_GET_SIZE(tensors);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyTuple_GET_ITEM(tensors, i);
    fc_arg* a = &args[i];
    const fc_input* in = i < self->num_inputs ? &self->inputs[i] : NULL;
    reset_arg(a, in && in->is_scalar);
    int r = a->scalar_input && is_number(t)
                ? take_number(a, t, in->kf_code, in->dl_code, in->bits, PyTuple_GET_ITEM(self->dtypes, i))
                : take_dlpack(a, t, i);
    if (r < 0) {
      release_args(args, i + 1);
      return -1;
    }
  }
  return 1;
}

/* What output `out` keeps alive: the non-scalar arguments whose memory it
 * is (an in-place update), as a tuple, or NULL (none, or an error). */
static PyObject* kept_by(const fc_versioned* out, fc_arg* args, Py_ssize_t n) {
  uintptr_t ptr = (uintptr_t)out->dl_tensor.data + out->dl_tensor.byte_offset;
  if (!ptr) return NULL;
  Py_ssize_t count = 0;
  for (Py_ssize_t i = 0; i < n; ++i) count += args[i].data == ptr && !args[i].scalar_input;
  if (!count) return NULL;
  PyObject* keep = PyTuple_New(count);
  if (!keep) return NULL;
  Py_ssize_t k = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    fc_arg* a = &args[i];
    if (a->data != ptr || a->scalar_input) continue;
    if (!a->kept) {
      if (a->managed) {
        a->kept = PyCapsule_New(a->managed, kept_name, kept_destructor);
        if (!a->kept || PyCapsule_SetContext(a->kept, a->versioned ? (void*)1 : NULL) < 0) {
          if (a->kept) { /* the capsule would call the deleter: not yet ours */
            PyCapsule_SetDestructor(a->kept, NULL);
            Py_CLEAR(a->kept);
          }
          Py_DECREF(keep);
          return NULL;
        }
      } else {
        a->kept = Py_NewRef(a->held); /* torch tensor, or Borrowed (its __del__ releases) */
      }
    }
    PyTuple_SET_ITEM(keep, k++, Py_NewRef(a->kept));
  }
  return keep;
}

/* run_torch's outputs: a legacy DLManagedTensor over kfuse's versioned one
 * (shape and strides shared), handed to torch._C._from_dlpack in a
 * "dltensor" capsule; its deleter frees kfuse's output and drops the
 * inputs an in-place output keeps (taking the GIL: torch may free the
 * tensor on a thread without it). */
typedef struct {
  fc_managed managed;
  fc_versioned* source;
  PyObject* keep;
} fc_export;

static void export_deleter(fc_managed* managed) {
  fc_export* e = (fc_export*)managed->manager_ctx;
  e->source->deleter(e->source);
  if (e->keep && Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(e->keep);
    PyGILState_Release(g);
  }
  PyMem_RawFree(e);
}

static void export_capsule_destructor(PyObject* capsule) {
  /* a consumed capsule was renamed ("used_dltensor"): torch owns it then */
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    fc_managed* m = (fc_managed*)PyCapsule_GetPointer(capsule, "dltensor");
    m->deleter(m);
  }
}

/* torch's tensor over `out` (owned from here on: on failure its deleter has
 * run), keeping `keep` (a new reference or NULL, always consumed). */
static PyObject* make_torch(fc_versioned* out, PyObject* keep, PyObject* from_dlpack) {
  fc_export* e = PyMem_RawMalloc(sizeof(fc_export));
  if (!e) {
    out->deleter(out);
    Py_XDECREF(keep);
    return PyErr_NoMemory();
  }
  e->managed.dl_tensor = out->dl_tensor;
  e->managed.manager_ctx = e;
  e->managed.deleter = export_deleter;
  e->source = out;
  e->keep = keep;
  PyObject* capsule = PyCapsule_New(&e->managed, "dltensor", export_capsule_destructor);
  if (!capsule) {
    export_deleter(&e->managed);
    return NULL;
  }
  PyObject* t = PyObject_CallOneArg(from_dlpack, capsule);
  Py_DECREF(capsule); /* unconsumed (an error): its destructor frees the output */
  return t;
}

static PyObject* caller_call(fc_caller* self, PyObject* tensors, PyObject* from_dlpack);

static PyObject* caller_run(fc_caller* self, PyObject* tensors) { return caller_call(self, tensors, NULL); }

static PyObject* caller_run_torch(fc_caller* self, PyObject* const* argv, Py_ssize_t argc) {
  if (argc != 2) {
    PyErr_SetString(PyExc_TypeError, "Caller.run_torch takes (tensors, from_dlpack)");
    return NULL;
  }
  return caller_call(self, argv[0], argv[1]);
}

/* from_dlpack NULL: run(), kfuse Tensors out; else run_torch(): torch mode
 * only (None when an argument is not a torch tensor or number), inputs that
 * require grad taken as they are, outputs from_dlpack(capsule). */
static PyObject* caller_call(fc_caller* self, PyObject* tensors, PyObject* from_dlpack) {
  if (!PyTuple_Check(tensors)) {
    PyErr_SetString(PyExc_TypeError, "Caller.run takes the tuple of call arguments");
    return NULL;
  }
  if (!self->handle) Py_RETURN_NONE; /* closed: the Python path raises */
  Py_ssize_t n = PyTuple_GET_SIZE(tensors), m = self->num_outputs;
  fc_arg small[FC_SMALL];
  fc_arg* args = n <= FC_SMALL ? small : PyMem_Malloc((size_t)n * sizeof(fc_arg));
  const fc_tensor* ptr_small[FC_SMALL];
  uint64_t flag_small[FC_SMALL];
  fc_versioned* out_small[FC_SMALL];
  const fc_tensor** ptrs = n <= FC_SMALL ? ptr_small : PyMem_Malloc((size_t)n * sizeof(void*));
  uint64_t* flags = n <= FC_SMALL ? flag_small : PyMem_Malloc((size_t)n * sizeof(uint64_t));
  fc_versioned** outs = m <= FC_SMALL ? out_small : PyMem_Calloc((size_t)m, sizeof(void*));
  PyObject* result = NULL;
  PyObject* stream = NULL; /* torch's current stream, in torch mode on CUDA */
  if (!args || !ptrs || !flags || !outs) {
    PyErr_NoMemory();
    goto done;
  }
  /* torch mode, as _call_torch; otherwise (or where it returns None) DLPack mode */
  int device = -1, built = 0;
  if (n == self->num_inputs) {
    int ready = torch_ready();
    if (ready < 0) goto done;
    if (ready) {
      built = build_torch(self, tensors, args, &device, from_dlpack != NULL);
      if (built < 0) goto done;
      if (built == 2) {
        result = Py_NewRef(Py_None);
        goto done;
      }
      if (built && device >= 0) {
        if (!fc.raw_stream) {
          release_args(args, n);
          built = 0;
        } else {
          stream = PyObject_CallFunction(fc.raw_stream, "i", device);
          if (!stream) {
            release_args(args, n);
            goto done;
          }
        }
      }
    }
  }
  if (!built && from_dlpack) { /* run_torch: the caller's Python path takes it */
    result = Py_NewRef(Py_None);
    goto done;
  }
  if (!built && build_dlpack(self, tensors, args) < 0) goto done;

  fc_exec_options opts = {sizeof(fc_exec_options), NULL, NULL, NULL};
  if (stream) {
    opts.stream = PyLong_AsVoidPtr(stream);
    if (!opts.stream && PyErr_Occurred()) {
      release_args(args, n);
      goto done;
    }
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    ptrs[i] = args[i].tensor;
    flags[i] = args[i].flags;
  }
  int status;
  const char* message = NULL;
  void* handle = self->handle;
  Py_BEGIN_ALLOW_THREADS status =
      fc.execute(handle, ptrs, flags, (size_t)n, outs, (size_t)m, opts.stream ? &opts : NULL);
  if (status) message = fc.last_error();
  Py_END_ALLOW_THREADS if (status) {
    release_args(args, n);
    raise_kfuse_error(status, message ? message : "");
    goto done;
  }

  /* outputs: Tensor(_Owner(addr, keep), stream) */
  PyObject* tuple = m == 1 && !from_dlpack ? NULL : PyTuple_New(m); /* run_torch: always a tuple */
  Py_ssize_t made = 0;
  if (!tuple && (m != 1 || from_dlpack)) goto fail_outputs;
  for (; made < m; ++made) {
    PyObject* keep = kept_by(outs[made], args, n);
    if (!keep && PyErr_Occurred()) goto fail_outputs;
    PyObject* t = from_dlpack ? make_torch(outs[made], keep, from_dlpack)
                              : make_tensor(outs[made], keep, stream ? stream : Py_None);
    outs[made] = NULL;
    if (!t) {
      ++made;
      goto fail_outputs;
    }
    if (tuple)
      PyTuple_SET_ITEM(tuple, made, t);
    else
      result = t;
  }
  if (tuple) result = tuple;
  release_args(args, n);
  goto done;

fail_outputs:
  for (Py_ssize_t k = made; k < m; ++k)
    if (outs[k]) outs[k]->deleter(outs[k]);
  Py_XDECREF(tuple);
  release_args(args, n);

done:
  Py_XDECREF(stream);
  if (args != small) PyMem_Free(args);
  if (ptrs != ptr_small) PyMem_Free(ptrs);
  if (flags != flag_small) PyMem_Free(flags);
  if (outs != out_small) PyMem_Free(outs);
  return result;
}

static PyMethodDef caller_methods[] = {
    {"run", (PyCFunction)caller_run, METH_O,
     "run(tensors): the call's result, or None to hand the call to the Python path"},
    {"run_torch", (PyCFunction)(void (*)(void))caller_run_torch, METH_FASTCALL,
     "run_torch(tensors, from_dlpack): run() for kfuse.torch's partitions: torch tensors and numbers only\n"
     "(None otherwise, and for what run() hands back), requires_grad not checked, a tuple of each output\n"
     "from_dlpack(a legacy \"dltensor\" capsule) (torch._C._from_dlpack: no stream handshake, the\n"
     "call ran on torch's current stream)"},
    {"close", (PyCFunction)caller_close, METH_NOARGS, "forgets the handle: run() returns None from now on"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject caller_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kfuse._fastcall.Caller",
    .tp_basicsize = sizeof(fc_caller),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Caller(handle, inputs, num_outputs): the C call path of one fusion.\n"
        "inputs: per input (is_scalar, kf_dtype code, DLPack code, bits, kfuse.DType).",
    .tp_new = caller_new,
    .tp_dealloc = (destructor)caller_dealloc,
    .tp_methods = caller_methods,
};

/* ---------------------------------------------------------------------- */
/* module */

static int slot(PyObject* type, const char* name, PyObject** out) {
  *out = PyObject_GetAttrString(type, name);
  if (!*out) return -1;
  if (!Py_TYPE(*out)->tp_descr_set) {
    PyErr_Format(PyExc_TypeError, "kfuse._fastcall: Tensor.%s is not a slot", name);
    return -1;
  }
  return 0;
}

static PyObject* fc_init(PyObject* module, PyObject* args) {
  (void)module;
  PyObject *execute, *last_error, *kfuse_error, *tensor_type, *borrow, *from_capsule, *from_array_interface,
      *scalar_tensor, *torch_bridge;
  if (!PyArg_ParseTuple(args, "OOOO!OOOOO:init", &execute, &last_error, &kfuse_error, &PyType_Type, &tensor_type,
                        &borrow, &from_capsule, &from_array_interface, &scalar_tensor, &torch_bridge))
    return NULL;
  if (fc.execute) {
    PyErr_SetString(PyExc_RuntimeError, "kfuse._fastcall: init() was called already");
    return NULL;
  }
  void* e = PyLong_AsVoidPtr(execute);
  void* l = PyLong_AsVoidPtr(last_error);
  if (PyErr_Occurred()) return NULL;
  if (!e || !l) {
    PyErr_SetString(PyExc_ValueError, "kfuse._fastcall: NULL function address");
    return NULL;
  }
  fc.tensor_type = (PyTypeObject*)tensor_type;
  if (slot(tensor_type, "_owner", &fc.slot_owner) || slot(tensor_type, "_t", &fc.slot_t) ||
      slot(tensor_type, "_stream", &fc.slot_stream))
    return NULL;
  Py_INCREF(tensor_type);
  fc.kfuse_error = Py_NewRef(kfuse_error);
  fc.borrow = Py_NewRef(borrow);
  fc.from_capsule = Py_NewRef(from_capsule);
  fc.from_array_interface = Py_NewRef(from_array_interface);
  fc.scalar_tensor = Py_NewRef(scalar_tensor);
  fc.torch_bridge = Py_NewRef(torch_bridge);
  /* ISO C forbids converting an object pointer to a function pointer; an
   * address from dlsym is one (POSIX) */
  memcpy(&fc.execute, &e, sizeof e);
  memcpy(&fc.last_error, &l, sizeof l);
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"init", fc_init, METH_VARARGS,
     "init(kf_execute_flagged, kf_last_error, KfuseError, Tensor, borrow, from_capsule, "
     "from_array_interface, scalar_tensor, torch_bridge): once, from kfuse._ext"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kfuse._fastcall",
    .m_doc = "The per-call path of kfuse.Fusion.__call__ in C (docs/python.md).",
    .m_size = -1,
    .m_methods = module_methods,
};

static int intern(PyObject** out, const char* s) {
  *out = PyUnicode_InternFromString(s);
  return *out ? 0 : -1;
}

PyMODINIT_FUNC PyInit__fastcall(void); /* the one exported symbol */

PyMODINIT_FUNC PyInit__fastcall(void) {
  if (intern(&names.dlpack, "__dlpack__") || intern(&names.dlpack_device, "__dlpack_device__") ||
      intern(&names.array_interface, "__array_interface__") || intern(&names.requires_grad, "requires_grad") ||
      intern(&names.dtype, "dtype") || intern(&names.is_cuda, "is_cuda") || intern(&names.is_cpu, "is_cpu") ||
      intern(&names.data_ptr, "data_ptr") || intern(&names.shape, "shape") || intern(&names.stride, "stride") ||
      intern(&names.get_device, "get_device") || intern(&names.release, "release") || intern(&names.ptr, "ptr") ||
      intern(&names.flags, "flags") || intern(&names.data, "data") || intern(&names.torch, "torch") ||
      intern(&names.types, "types") || intern(&names.codes, "codes") || intern(&names.raw_stream, "raw_stream"))
    return NULL;
  names.kw_max_version = Py_BuildValue("(s)", "max_version");
  names.kw_max_version_stream = Py_BuildValue("(ss)", "max_version", "stream");
  names.kw_stream = Py_BuildValue("(s)", "stream");
  names.version_1_0 = Py_BuildValue("(ii)", 1, 0);
  names.zero = PyLong_FromLong(0);
  names.one = PyLong_FromLong(1);
  names.cuda = PyLong_FromLong(FC_CUDA);
  names.cuda_managed = PyLong_FromLong(FC_CUDA_MANAGED);
  if (!names.kw_max_version || !names.kw_max_version_stream || !names.kw_stream || !names.version_1_0 || !names.zero ||
      !names.one || !names.cuda || !names.cuda_managed)
    return NULL;
  if (PyType_Ready(&owner_type) < 0 || PyType_Ready(&caller_type) < 0) return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (PyModule_AddIntConstant(m, "ABI_VERSION", FC_ABI_VERSION) < 0 ||
      PyModule_AddObjectRef(m, "Owner", (PyObject*)&owner_type) < 0 ||
      PyModule_AddObjectRef(m, "Caller", (PyObject*)&caller_type) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
