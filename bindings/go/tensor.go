package kfuse

/*
#include <stdlib.h>
#include <string.h>
#include <dlpack/dlpack.h>

// cgo cannot call C function pointers.
static void kfgo_call_deleter(DLManagedTensor* m) { m->deleter(m); }
// Raw addresses (device memory) become pointers on the C side.
static void* kfgo_pointer(uintptr_t address) { return (void*)address; }
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// DeviceType is a DLPack device type kfuse accepts.
type DeviceType int

const (
	CPU         DeviceType = C.kDLCPU
	CUDA        DeviceType = C.kDLCUDA
	CUDAHost    DeviceType = C.kDLCUDAHost
	CUDAManaged DeviceType = C.kDLCUDAManaged
)

// Device is where a tensor's memory lives.
type Device struct {
	Type DeviceType
	ID   int
}

// IsHost reports whether the host can read the memory directly.
func (d Device) IsHost() bool { return d.Type == CPU || d.Type == CUDAHost }

// DLPackTensor is anything kfuse can take as a tensor: a *HostTensor, a
// *RawTensor, an *Output, or a framework's DLTensor.
type DLPackTensor interface {
	// DLTensor returns a DLTensor in C memory, valid while the call runs.
	DLTensor() unsafe.Pointer
}

// Element is a Go type whose values are laid out as a kfuse dtype.
type Element interface {
	~float64 | ~float32 | ~int64 | ~int32 | ~bool
}

func dtypeOf[T Element]() DType {
	var zero T
	switch any(zero).(type) {
	case float64:
		return Float64
	case float32:
		return Float32
	case int64:
		return Int64
	case int32:
		return Int32
	}
	return Bool
}

// kfuse.h's KF_DLPACK_BOOL_CODE and DLPack 1.1's float8 codes (this file
// sees only dlpack.h, which may predate them).
const (
	dlpackBoolCode         = 6
	dlpackFloat8E4M3FNCode = 10
	dlpackFloat8E5M2Code   = 12
)

func dlpackType(d DType) C.DLDataType {
	var code C.uint8_t
	switch d {
	case Float64, Float32, Float16:
		code = C.kDLFloat
	case BFloat16:
		code = C.kDLBfloat
	case Int64, Int32, Int8:
		code = C.kDLInt
	case Uint8:
		code = C.kDLUInt
	case Float8E4M3FN:
		code = dlpackFloat8E4M3FNCode
	case Float8E5M2:
		code = dlpackFloat8E5M2Code
	default:
		code = dlpackBoolCode // bool
	}
	return C.DLDataType{code: code, bits: C.uint8_t(d.Size() * 8), lanes: 1}
}

func dtypeFromDLPack(t C.DLDataType) (DType, bool) {
	for _, d := range []DType{Float64, Float32, Float16, BFloat16, Int64, Int32, Bool, Float8E4M3FN, Float8E5M2, Int8, Uint8} {
		if want := dlpackType(d); want.code == t.code && want.bits == t.bits {
			return d, true
		}
	}
	return Bool, false
}

// newDLTensor allocates a DLTensor with its shape and strides in one C
// block: cgo forbids C memory that points to Go memory.
func newDLTensor(data unsafe.Pointer, device Device, dtype DType, shape, strides []int64) *C.DLTensor {
	n := len(shape)
	extra := n
	if strides != nil {
		extra = 2 * n
	}
	block := C.calloc(1, C.size_t(unsafe.Sizeof(C.DLTensor{}))+C.size_t(8*extra))
	t := (*C.DLTensor)(block)
	dims := unsafe.Slice((*int64)(unsafe.Add(block, unsafe.Sizeof(C.DLTensor{}))), extra)
	copy(dims, shape)
	t.data = data
	t.device = C.DLDevice{device_type: C.DLDeviceType(device.Type), device_id: C.int32_t(device.ID)}
	t.ndim = C.int32_t(n)
	t.dtype = dlpackType(dtype)
	if n > 0 {
		t.shape = (*C.int64_t)(unsafe.Pointer(&dims[0]))
	}
	if strides != nil && n > 0 {
		copy(dims[n:], strides)
		t.strides = (*C.int64_t)(unsafe.Pointer(&dims[n]))
	}
	return t
}

func count(shape []int64) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, &Error{Status: StatusShapeMismatch, Message: fmt.Sprintf("negative size %d in shape %v", d, shape)}
		}
		n *= int(d)
	}
	return n, nil
}

// HostTensor is a row-major host tensor whose data kfuse's C side owns (a
// copy of a Go slice in C memory). Close frees it.
type HostTensor struct {
	t *C.DLTensor
}

// NewHostTensor copies data into C memory as a tensor of shape.
func NewHostTensor[T Element](data []T, shape ...int64) (*HostTensor, error) {
	n, err := count(shape)
	if err != nil {
		return nil, err
	}
	if n != len(data) {
		return nil, &Error{Status: StatusShapeMismatch,
			Message: fmt.Sprintf("shape %v has %d elements, the slice has %d", shape, n, len(data))}
	}
	dtype := dtypeOf[T]()
	bytes := C.size_t(n * dtype.Size())
	buf := C.malloc(bytes + 1)
	if n > 0 {
		C.memcpy(buf, unsafe.Pointer(&data[0]), bytes)
	}
	h := &HostTensor{t: newDLTensor(buf, Device{Type: CPU}, dtype, shape, nil)}
	runtime.SetFinalizer(h, (*HostTensor).Close)
	return h, nil
}

// Scalar is a 0-dim host tensor: the value of a scalar input.
func Scalar[T Element](value T) (*HostTensor, error) { return NewHostTensor([]T{value}) }

// DLTensor implements DLPackTensor; it panics after Close.
func (h *HostTensor) DLTensor() unsafe.Pointer {
	if h.t == nil {
		panic(errClosed)
	}
	return unsafe.Pointer(h.t)
}

// Close frees the tensor and its data. It is idempotent.
func (h *HostTensor) Close() error {
	if h.t != nil {
		C.free(h.t.data)
		C.free(unsafe.Pointer(h.t))
		h.t = nil
		runtime.SetFinalizer(h, nil)
	}
	return nil
}

// RawTensor views memory owned elsewhere, e.g. a CUDA device pointer.
type RawTensor struct {
	t *C.DLTensor
}

// NewRawTensor views data (on device) with shape and strides in elements
// (nil = row-major). The memory must stay valid while the view is used.
func NewRawTensor(data uintptr, device Device, dtype DType, shape, strides []int64) (*RawTensor, error) {
	if strides != nil && len(strides) != len(shape) {
		return nil, &Error{Status: StatusInvalidArgument, Message: "strides and shape differ in length"}
	}
	r := &RawTensor{t: newDLTensor(C.kfgo_pointer(C.uintptr_t(data)), device, dtype, shape, strides)}
	runtime.SetFinalizer(r, (*RawTensor).Close)
	return r, nil
}

// DLTensor implements DLPackTensor; it panics after Close.
func (r *RawTensor) DLTensor() unsafe.Pointer {
	if r.t == nil {
		panic(errClosed)
	}
	return unsafe.Pointer(r.t)
}

// Close frees the view (not the data). It is idempotent.
func (r *RawTensor) Close() error {
	if r.t != nil {
		C.free(unsafe.Pointer(r.t))
		r.t = nil
		runtime.SetFinalizer(r, nil)
	}
	return nil
}

// Output is a tensor kfuse allocated (a DLManagedTensor). Close calls its
// DLPack deleter; Release hands it to someone else.
type Output struct {
	m *C.DLManagedTensor
}

func newOutput(m *C.DLManagedTensor) *Output {
	o := &Output{m: m}
	runtime.SetFinalizer(o, (*Output).Close)
	return o
}

func (o *Output) tensor() *C.DLTensor {
	if o.m == nil {
		panic(errClosed)
	}
	return &o.m.dl_tensor
}

// DLTensor implements DLPackTensor (outputs can feed other fusions).
func (o *Output) DLTensor() unsafe.Pointer { return unsafe.Pointer(o.tensor()) }

// Shape returns the sizes.
func (o *Output) Shape() []int64 {
	t := o.tensor()
	if t.ndim == 0 {
		return []int64{}
	}
	return append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(t.shape)), int(t.ndim))...)
}

// Strides returns strides in elements (row-major ones if the tensor has none).
func (o *Output) Strides() []int64 {
	t := o.tensor()
	n := int(t.ndim)
	if t.strides != nil && n > 0 {
		return append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(t.strides)), n)...)
	}
	shape := o.Shape()
	strides := make([]int64, n)
	step := int64(1)
	for i := n - 1; i >= 0; i-- {
		strides[i] = step
		if shape[i] > 1 {
			step *= shape[i]
		}
	}
	return strides
}

// DType returns the element type.
func (o *Output) DType() DType {
	d, _ := dtypeFromDLPack(o.tensor().dtype)
	return d
}

// Device returns where the data lives.
func (o *Output) Device() Device {
	t := o.tensor()
	return Device{Type: DeviceType(t.device.device_type), ID: int(t.device.device_id)}
}

// DataPointer is the address of the first element (device memory for CUDA).
func (o *Output) DataPointer() uintptr {
	t := o.tensor()
	return uintptr(t.data) + uintptr(t.byte_offset)
}

// Close calls the DLPack deleter. It is idempotent.
func (o *Output) Close() error {
	if o.m != nil {
		if o.m.deleter != nil {
			C.kfgo_call_deleter(o.m)
		}
		o.m = nil
		runtime.SetFinalizer(o, nil)
	}
	return nil
}

// Release gives up ownership: the receiver must call the deleter of the
// returned DLManagedTensor.
func (o *Output) Release() unsafe.Pointer {
	m := o.m
	o.m = nil
	runtime.SetFinalizer(o, nil)
	return unsafe.Pointer(m)
}

// ToSlice copies a host output, following its strides, into a row-major slice.
func ToSlice[T Element](o *Output) ([]T, error) {
	if want := dtypeOf[T](); o.DType() != want {
		return nil, &Error{Status: StatusDTypeMismatch, Message: fmt.Sprintf("output is %v, not %v", o.DType(), want)}
	}
	if !o.Device().IsHost() {
		return nil, &Error{Status: StatusDeviceMismatch,
			Message: fmt.Sprintf("output is on device type %d; copy device memory yourself", o.Device().Type)}
	}
	shape, strides := o.Shape(), o.Strides()
	n, _ := count(shape)
	out := make([]T, n)
	t := o.tensor()
	base := unsafe.Add(t.data, t.byte_offset)
	size := unsafe.Sizeof(out[0])
	index := make([]int64, len(shape))
	for k := 0; k < n; k++ {
		var offset int64
		for i := range index {
			offset += index[i] * strides[i]
		}
		out[k] = *(*T)(unsafe.Add(base, uintptr(offset)*size))
		for i := len(shape) - 1; i >= 0; i-- {
			index[i]++
			if index[i] < shape[i] {
				break
			}
			index[i] = 0
		}
	}
	runtime.KeepAlive(o)
	return out, nil
}
