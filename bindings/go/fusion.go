package kfuse

/*
#include <stdlib.h>
#include <dlpack/dlpack.h>
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/kfuse/kfuse/bindings/go/internal/capi"
)

// Fusion is a finalized fusion: immutable and safe for concurrent use (the
// C API guarantees it). It holds one reference to kfuse's cached fusion;
// Close releases it, a finalizer only backs that up.
type Fusion struct {
	ptr        atomic.Uintptr
	numOutputs int
}

func newFusion(ptr uintptr) (*Fusion, error) {
	var n int64
	if err := check(capi.Kf_fusion_num_outputs(ptr, &n)); err != nil {
		capi.Kf_fusion_release(ptr)
		return nil, err
	}
	f := &Fusion{numOutputs: int(n)}
	f.ptr.Store(ptr)
	runtime.SetFinalizer(f, (*Fusion).Close)
	return f, nil
}

// FusionFromText parses the text form (docs/text-format.md) through the
// definition cache: the same text gives the same fusion.
func FusionFromText(text string) (*Fusion, error) {
	if err := CheckVersion(); err != nil {
		return nil, err
	}
	var ptr uintptr
	if err := check(capi.Kf_fusion_from_text(text, &ptr)); err != nil {
		return nil, err
	}
	return newFusion(ptr)
}

func (f *Fusion) handle() (uintptr, error) {
	if p := f.ptr.Load(); p != 0 {
		return p, nil
	}
	return 0, errClosed
}

// Close releases this reference. It is idempotent.
func (f *Fusion) Close() error {
	if p := f.ptr.Swap(0); p != 0 {
		capi.Kf_fusion_release(p)
		runtime.SetFinalizer(f, nil)
	}
	return nil
}

// Retain returns a second, independent reference to the same fusion.
func (f *Fusion) Retain() (*Fusion, error) {
	p, err := f.handle()
	if err != nil {
		return nil, err
	}
	if err := check(capi.Kf_fusion_retain(p)); err != nil {
		return nil, err
	}
	runtime.KeepAlive(f)
	return newFusion(p)
}

// Same reports whether both refer to the same cached fusion (equal
// definitions do).
func (f *Fusion) Same(other *Fusion) bool {
	return f.ptr.Load() != 0 && f.ptr.Load() == other.ptr.Load()
}

// Text returns the canonical text form.
func (f *Fusion) Text() (string, error) {
	p, err := f.handle()
	if err != nil {
		return "", err
	}
	var s uintptr
	err = check(capi.Kf_fusion_to_text(p, &s))
	runtime.KeepAlive(f)
	if err != nil {
		return "", err
	}
	defer capi.Kfgo_string_free(s)
	return capi.Kfgo_string(s), nil
}

// NumOutputs is the number of outputs.
func (f *Fusion) NumOutputs() int { return f.numOutputs }

// NumInputs is the number of inputs.
func (f *Fusion) NumInputs() (int, error) {
	p, err := f.handle()
	if err != nil {
		return 0, err
	}
	var n int64
	err = check(capi.Kf_fusion_num_inputs(p, &n))
	runtime.KeepAlive(f)
	return int(n), err
}

func (f *Fusion) infos(count int, get func(uintptr, int64, capi.Kf_value_info) int64) ([]ValueInfo, error) {
	p, err := f.handle()
	if err != nil {
		return nil, err
	}
	info := capi.Kfgo_value_info_new()
	defer capi.DeleteKf_value_info(info)
	out := make([]ValueInfo, count)
	for i := range out {
		if err := check(get(p, int64(i), info)); err != nil {
			return nil, err
		}
		out[i] = ValueInfo{ID: info.GetId(), Rank: info.GetRank(), DType: DType(info.GetDtype()),
			IsScalar: info.GetIs_scalar() != 0}
	}
	runtime.KeepAlive(f)
	return out, nil
}

// Inputs describes the inputs, in the order Execute takes them.
func (f *Fusion) Inputs() ([]ValueInfo, error) {
	n, err := f.NumInputs()
	if err != nil {
		return nil, err
	}
	return f.infos(n, capi.Kf_fusion_input)
}

// Outputs describes the outputs.
func (f *Fusion) Outputs() ([]ValueInfo, error) {
	return f.infos(f.numOutputs, capi.Kf_fusion_output)
}

// pointerArray copies DLTensor addresses into C memory.
func pointerArray(tensors []DLPackTensor) (uintptr, func()) {
	if len(tensors) == 0 {
		return 0, func() {}
	}
	block := C.malloc(C.size_t(len(tensors)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	ptrs := unsafe.Slice((*unsafe.Pointer)(block), len(tensors))
	for i, t := range tensors {
		ptrs[i] = t.DLTensor()
	}
	return uintptr(block), func() { C.free(block) }
}

// Execute runs the fusion; kfuse allocates the outputs on the inputs' device.
func (f *Fusion) Execute(inputs ...DLPackTensor) ([]*Output, error) {
	return f.ExecuteOnStream(0, inputs...)
}

// ExecuteOnStream is Execute with GPU work enqueued on stream (a CUstream;
// 0 = the default stream).
func (f *Fusion) ExecuteOnStream(stream uintptr, inputs ...DLPackTensor) ([]*Output, error) {
	p, err := f.handle()
	if err != nil {
		return nil, err
	}
	in, freeIn := pointerArray(inputs)
	defer freeIn()
	outs := C.calloc(C.size_t(f.numOutputs)+1, C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(outs)
	options := capi.Kfgo_exec_options_new(stream)
	defer capi.DeleteKf_exec_options(options)
	err = check(capi.Kf_execute(p, in, int64(len(inputs)), uintptr(outs), int64(f.numOutputs), options.Swigcptr()))
	runtime.KeepAlive(f)
	runtime.KeepAlive(inputs)
	if err != nil {
		return nil, err
	}
	result := make([]*Output, f.numOutputs)
	for i, m := range unsafe.Slice((**C.DLManagedTensor)(outs), f.numOutputs) {
		result[i] = newOutput((*C.DLManagedTensor)(unsafe.Pointer(m)))
	}
	return result, nil
}

// ExecuteInto runs into caller-provided outputs of the right shapes,
// dtypes and device.
func (f *Fusion) ExecuteInto(inputs, outputs []DLPackTensor) error {
	p, err := f.handle()
	if err != nil {
		return err
	}
	in, freeIn := pointerArray(inputs)
	defer freeIn()
	out, freeOut := pointerArray(outputs)
	defer freeOut()
	err = check(capi.Kf_execute_into(p, in, int64(len(inputs)), out, int64(len(outputs)), 0))
	runtime.KeepAlive(f)
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(outputs)
	return err
}

// OutputShape returns the shape output index will have for these inputs.
func (f *Fusion) OutputShape(index int, inputs ...DLPackTensor) ([]int64, error) {
	outs, err := f.Outputs()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(outs) {
		return nil, &Error{Status: StatusInvalidArgument, Message: "output index out of range"}
	}
	p, err := f.handle()
	if err != nil {
		return nil, err
	}
	in, freeIn := pointerArray(inputs)
	defer freeIn()
	shape := make([]int64, outs[index].Rank+1)
	err = check(capi.Kf_output_shape(p, in, int64(len(inputs)), int64(index), &shape[0], int64(outs[index].Rank)))
	runtime.KeepAlive(f)
	runtime.KeepAlive(inputs)
	return shape[:outs[index].Rank], err
}
