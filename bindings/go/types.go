package kfuse

import (
	"sync"

	"github.com/kfuse/kfuse/bindings/go/internal/capi"
)

// DType is the element type of a value (kf_dtype).
type DType int

const (
	Float64 DType = iota
	Float32
	Float16
	BFloat16
	Int64
	Int32
	Bool
	// Float8E4M3FN and Float8E5M2 are float8 storage (DLPack 1.1 codes 10
	// and 12); math on them runs in float32.
	Float8E4M3FN
	Float8E5M2
	// Int8 and Uint8 are 8-bit integers; arithmetic wraps at 8 bits.
	Int8
	Uint8
)

// String returns kfuse's name, e.g. "float32".
func (d DType) String() string { return capi.Kf_dtype_name(capi.Enum_SS_kf_dtype(d)) }

// Size is the number of bytes per element.
func (d DType) Size() int {
	switch d {
	case Float64, Int64:
		return 8
	case Float32, Int32:
		return 4
	case Float16, BFloat16:
		return 2
	}
	return 1
}

// Op is an op of kfuse's op table (kf_op). Ops are named as in the text
// form: LookupOp("rsqrt"), MustOp("var_mean").
type Op int

var (
	opsOnce   sync.Once
	opsByName map[string]Op
)

// LookupOp returns the op called name in the text form.
func LookupOp(name string) (Op, bool) {
	opsOnce.Do(func() {
		// kf_op_num_outputs is 0 past the last op.
		opsByName = map[string]Op{}
		for op := 0; capi.Kf_op_num_outputs(capi.Enum_SS_kf_op(op)) > 0; op++ {
			opsByName[capi.Kf_op_name(capi.Enum_SS_kf_op(op))] = Op(op)
		}
	})
	op, ok := opsByName[name]
	return op, ok
}

// MustOp is LookupOp for names known to exist; it panics otherwise.
func MustOp(name string) Op {
	op, ok := LookupOp(name)
	if !ok {
		panic("kfuse: no op named " + name)
	}
	return op
}

// String returns the op's name in the text form.
func (o Op) String() string { return capi.Kf_op_name(capi.Enum_SS_kf_op(o)) }

// NumOutputs is the number of values the op defines (2 for var_mean).
func (o Op) NumOutputs() int { return capi.Kf_op_num_outputs(capi.Enum_SS_kf_op(o)) }

// Value is a value of a definition: its dense id.
type Value int64

// ValueInfo describes an input or output of a fusion.
type ValueInfo struct {
	ID       int64
	Rank     int
	DType    DType
	IsScalar bool
}

// Version is the library's API version.
func Version() uint { return capi.Kf_version() }

var (
	versionOnce sync.Once
	versionErr  error
)

// CheckVersion fails with ErrVersionMismatch if the library does not
// implement the header this package was generated from.
func CheckVersion() error {
	versionOnce.Do(func() { versionErr = check(capi.Kf_check_version(uint(capi.KF_API_VERSION))) })
	return versionErr
}
