package kfuse

import (
	"errors"
	"runtime"

	"github.com/kfuse/kfuse/bindings/go/internal/capi"
)

// Builder records a fusion definition op by op; Finalize returns the cached
// Fusion. A Builder is not safe for concurrent use (the C API makes builders
// single-threaded). Close it when done; a finalizer only backs that up.
type Builder struct {
	ptr uintptr
}

var errClosed = errors.New("kfuse: use of a closed handle")

// NewBuilder starts an empty definition.
func NewBuilder() (*Builder, error) {
	if err := CheckVersion(); err != nil {
		return nil, err
	}
	var ptr uintptr
	if err := check(capi.Kf_builder_create(&ptr)); err != nil {
		return nil, err
	}
	b := &Builder{ptr: ptr}
	runtime.SetFinalizer(b, (*Builder).Close)
	return b, nil
}

// Close destroys the builder. It is idempotent.
func (b *Builder) Close() error {
	if b.ptr != 0 {
		capi.Kf_builder_destroy(b.ptr)
		b.ptr = 0
		runtime.SetFinalizer(b, nil)
	}
	return nil
}

// one runs a builder call that defines one value.
func (b *Builder) one(call func(ptr uintptr, out *int64) int64) (Value, error) {
	if b.ptr == 0 {
		return -1, errClosed
	}
	var id int64 = -1
	err := check(call(b.ptr, &id))
	runtime.KeepAlive(b)
	return Value(id), err
}

func ids(values []Value) (*int64, int64) {
	if len(values) == 0 {
		return nil, 0
	}
	out := make([]int64, len(values))
	for i, v := range values {
		out[i] = int64(v)
	}
	return &out[0], int64(len(out))
}

func ints(values []int64) (*int64, int64) {
	if len(values) == 0 {
		return nil, 0
	}
	return &values[0], int64(len(values))
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Tensor defines a tensor input of rank and dtype; sizes are bound at execution.
func (b *Builder) Tensor(rank int, dtype DType) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_define_tensor(p, rank, capi.Enum_SS_kf_dtype(dtype), out)
	})
}

// Scalar defines a scalar input (a 0-dim host tensor at execution).
func (b *Builder) Scalar(dtype DType) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_define_scalar(p, capi.Enum_SS_kf_dtype(dtype), out)
	})
}

// ConstantFloat defines a constant from a float64.
func (b *Builder) ConstantFloat(value float64, dtype DType) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_define_constant_f64(p, value, capi.Enum_SS_kf_dtype(dtype), out)
	})
}

// ConstantInt defines a constant from an int64.
func (b *Builder) ConstantInt(value int64, dtype DType) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_define_constant_i64(p, value, capi.Enum_SS_kf_dtype(dtype), out)
	})
}

// Op records any op with its raw attributes (docs/text-format.md).
func (b *Builder) Op(op Op, args []Value, attrs []int64) ([]Value, error) {
	if b.ptr == 0 {
		return nil, errClosed
	}
	outs := make([]int64, op.NumOutputs())
	a, na := ids(args)
	t, nt := ints(attrs)
	o, no := ints(outs)
	err := check(capi.Kf_builder_op(b.ptr, capi.Enum_SS_kf_op(op), a, na, t, nt, o, no))
	runtime.KeepAlive(b)
	if err != nil {
		return nil, err
	}
	values := make([]Value, len(outs))
	for i, id := range outs {
		values[i] = Value(id)
	}
	return values, nil
}

// Unary records a unary op.
func (b *Builder) Unary(op Op, a Value) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_unary(p, capi.Enum_SS_kf_op(op), int64(a), out)
	})
}

// Binary records a binary op; operands broadcast like torch (right-aligned).
func (b *Builder) Binary(op Op, x, y Value) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_binary(p, capi.Enum_SS_kf_op(op), int64(x), int64(y), out)
	})
}

// Ternary records a ternary op (where, clamp, lerp, fma).
func (b *Builder) Ternary(op Op, x, y, z Value) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_ternary(p, capi.Enum_SS_kf_op(op), int64(x), int64(y), int64(z), out)
	})
}

var opAdd, opSub, opMul, opDiv = MustOp("add"), MustOp("sub"), MustOp("mul"), MustOp("div")

func (b *Builder) Add(x, y Value) (Value, error) { return b.Binary(opAdd, x, y) }
func (b *Builder) Sub(x, y Value) (Value, error) { return b.Binary(opSub, x, y) }
func (b *Builder) Mul(x, y Value) (Value, error) { return b.Binary(opMul, x, y) }
func (b *Builder) Div(x, y Value) (Value, error) { return b.Binary(opDiv, x, y) }

// Cast converts a value to dtype.
func (b *Builder) Cast(a Value, dtype DType) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		return capi.Kf_cast(p, int64(a), capi.Enum_SS_kf_dtype(dtype), out)
	})
}

// Reduce records a reduction (sum, max, mean, ...) over axes (none = all).
func (b *Builder) Reduce(op Op, a Value, axes []int64, keepdim bool) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		x, n := ints(axes)
		return capi.Kf_reduce(p, capi.Enum_SS_kf_op(op), int64(a), x, n, flag(keepdim), out)
	})
}

// Var records a variance over axes.
func (b *Builder) Var(a Value, axes []int64, correction int64, keepdim bool) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		x, n := ints(axes)
		return capi.Kf_var(p, int64(a), x, n, correction, flag(keepdim), out)
	})
}

// VarMean records variance and mean in one pass.
func (b *Builder) VarMean(a Value, axes []int64, correction int64, keepdim bool) (variance, mean Value, err error) {
	if b.ptr == 0 {
		return -1, -1, errClosed
	}
	var v, m int64 = -1, -1
	x, n := ints(axes)
	err = check(capi.Kf_var_mean(b.ptr, int64(a), x, n, correction, flag(keepdim), &v, &m))
	runtime.KeepAlive(b)
	return Value(v), Value(m), err
}

// Reshape records a reshape; shape holds integer scalars (one may be -1).
func (b *Builder) Reshape(a Value, shape []Value) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		s, n := ids(shape)
		return capi.Kf_reshape(p, int64(a), s, n, out)
	})
}

// Expand broadcasts like torch.expand; shape holds integer scalars.
func (b *Builder) Expand(a Value, shape []Value) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		s, n := ids(shape)
		return capi.Kf_expand(p, int64(a), s, n, out)
	})
}

// Permute reorders dims.
func (b *Builder) Permute(a Value, perm []int64) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		x, n := ints(perm)
		return capi.Kf_permute(p, int64(a), x, n, out)
	})
}

// Squeeze removes size-1 dims.
func (b *Builder) Squeeze(a Value, dims []int64) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		x, n := ints(dims)
		return capi.Kf_squeeze(p, int64(a), x, n, out)
	})
}

// Unsqueeze inserts a size-1 dim.
func (b *Builder) Unsqueeze(a Value, dim int64) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 { return capi.Kf_unsqueeze(p, int64(a), dim, out) })
}

// Size is a's extent along dim as an int64 scalar, read on each call.
func (b *Builder) Size(a Value, dim int64) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 { return capi.Kf_size(p, int64(a), dim, out) })
}

// Slice has Python slice semantics on one dim; stop = math.MaxInt64 runs to the end.
func (b *Builder) Slice(a Value, dim, start, stop, step int64) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 { return capi.Kf_slice(p, int64(a), dim, start, stop, step, out) })
}

// Cat concatenates along dim.
func (b *Builder) Cat(inputs []Value, dim int64) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 {
		x, n := ids(inputs)
		return capi.Kf_cat(p, x, n, dim, out)
	})
}

// Matmul follows torch.matmul.
func (b *Builder) Matmul(x, y Value) (Value, error) {
	return b.one(func(p uintptr, out *int64) int64 { return capi.Kf_matmul(p, int64(x), int64(y), out) })
}

// Output marks value as the next output.
func (b *Builder) Output(value Value) error {
	return b.OutputWith(value, nil, -1)
}

// OutputWith marks an output, pinning its layout (strideOrder: dims
// outermost first, or nil) and/or writing it into tensor input aliasInput
// (-1 for none).
func (b *Builder) OutputWith(value Value, strideOrder []int64, aliasInput int) error {
	if b.ptr == 0 {
		return errClosed
	}
	x, n := ints(strideOrder)
	err := check(capi.Kf_add_output(b.ptr, int64(value), x, n, int64(aliasInput)))
	runtime.KeepAlive(b)
	return err
}

// Finalize ends the definition and returns the cached fusion; the same
// definition gives the same fusion. The builder stays usable.
func (b *Builder) Finalize() (*Fusion, error) {
	if b.ptr == 0 {
		return nil, errClosed
	}
	var ptr uintptr
	err := check(capi.Kf_builder_finalize(b.ptr, &ptr))
	runtime.KeepAlive(b)
	if err != nil {
		return nil, err
	}
	return newFusion(ptr)
}
