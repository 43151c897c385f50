use std::ptr::{self, NonNull};

use kfuse_sys as sys;

use crate::dtype::DType;
use crate::error::{check, Error, Result, Status};
use crate::fusion::Fusion;
use crate::op::Op;

/// A value of a definition: an input, a constant or the result of an op.
///
/// Values are the builder's dense ids (`>= 0`, in definition order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Value(i64);

impl Value {
    pub fn id(self) -> i64 {
        self.0
    }
}

fn ids(values: &[Value]) -> *const i64 {
    // `Value` is a transparent i64.
    values.as_ptr() as *const i64
}

/// Records a fusion definition, op by op; [`Builder::finalize`] returns the
/// cached [`Fusion`].
///
/// The C API makes builders single-threaded, so a `Builder` is neither
/// `Send` nor `Sync`.
///
/// ```
/// use kfuse::{Builder, DType, Op, TensorRef};
///
/// let mut b = Builder::new()?;
/// let x = b.tensor(1, DType::F32)?;
/// let y = b.unary(Op::Relu, x)?;
/// b.output(y)?;
/// let fusion = b.finalize()?;
///
/// let data = [-1.0f32, 2.0];
/// let x = TensorRef::from_slice(&data, &[2])?;
/// let out = fusion.execute(&[&x])?;
/// assert_eq!(out[0].to_vec::<f32>()?, vec![0.0, 2.0]);
/// # Ok::<(), kfuse::Error>(())
/// ```
pub struct Builder {
    // A raw pointer: the builder is !Send and !Sync, as the C API requires.
    raw: NonNull<sys::kf_builder_s>,
}

impl Builder {
    /// A new, empty definition. Fails if the library's API version differs
    /// from the header this crate was built with.
    pub fn new() -> Result<Builder> {
        crate::check_version()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; on success we own the builder.
        check(unsafe { sys::kf_builder_create(&mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(Status::Internal, "kf_builder_create returned NULL"))?;
        Ok(Builder { raw })
    }

    fn raw(&self) -> sys::kf_builder {
        self.raw.as_ptr()
    }

    fn one(&mut self, call: impl FnOnce(sys::kf_builder, *mut i64) -> sys::kf_status) -> Result<Value> {
        let mut id = -1i64;
        check(call(self.raw(), &mut id))?;
        Ok(Value(id))
    }

    /// A tensor input of `rank` and `dtype` (sizes are bound at execution).
    pub fn tensor(&mut self, rank: usize, dtype: DType) -> Result<Value> {
        // SAFETY (all calls below): the builder is valid and exclusively
        // borrowed; id arrays live across the call.
        self.one(|b, out| unsafe { sys::kf_define_tensor(b, rank as i32, dtype.to_raw(), out) })
    }

    /// A scalar input (a 0-dim host tensor at execution).
    pub fn scalar(&mut self, dtype: DType) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_define_scalar(b, dtype.to_raw(), out) })
    }

    pub fn constant_f64(&mut self, value: f64, dtype: DType) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_define_constant_f64(b, value, dtype.to_raw(), out) })
    }

    pub fn constant_i64(&mut self, value: i64, dtype: DType) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_define_constant_i64(b, value, dtype.to_raw(), out) })
    }

    /// Any op, with its raw attributes (docs/text-format.md lists them).
    pub fn op(&mut self, op: Op, args: &[Value], attrs: &[i64]) -> Result<Vec<Value>> {
        let mut outs = vec![Value(-1); op.num_outputs()];
        check(unsafe {
            sys::kf_builder_op(
                self.raw(),
                op.to_raw(),
                ids(args),
                args.len(),
                attrs.as_ptr(),
                attrs.len(),
                outs.as_mut_ptr() as *mut i64,
                outs.len(),
            )
        })?;
        Ok(outs)
    }

    pub fn unary(&mut self, op: Op, a: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_unary(b, op.to_raw(), a.0, out) })
    }

    /// A binary op; operands broadcast like torch (right-aligned dims).
    pub fn binary(&mut self, op: Op, a: Value, c: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_binary(b, op.to_raw(), a.0, c.0, out) })
    }

    pub fn ternary(&mut self, op: Op, a: Value, c: Value, d: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_ternary(b, op.to_raw(), a.0, c.0, d.0, out) })
    }

    pub fn add(&mut self, a: Value, c: Value) -> Result<Value> {
        self.binary(Op::Add, a, c)
    }

    pub fn sub(&mut self, a: Value, c: Value) -> Result<Value> {
        self.binary(Op::Sub, a, c)
    }

    pub fn mul(&mut self, a: Value, c: Value) -> Result<Value> {
        self.binary(Op::Mul, a, c)
    }

    pub fn div(&mut self, a: Value, c: Value) -> Result<Value> {
        self.binary(Op::Div, a, c)
    }

    pub fn cast(&mut self, a: Value, dtype: DType) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_cast(b, a.0, dtype.to_raw(), out) })
    }

    /// A reduction (`Op::Sum`, `Max`, `Mean`, ...) over `axes` (none = all).
    pub fn reduce(&mut self, op: Op, a: Value, axes: &[i64], keepdim: bool) -> Result<Value> {
        self.one(|b, out| unsafe {
            sys::kf_reduce(b, op.to_raw(), a.0, axes.as_ptr(), axes.len(), keepdim as i32, out)
        })
    }

    pub fn var(&mut self, a: Value, axes: &[i64], correction: i64, keepdim: bool) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_var(b, a.0, axes.as_ptr(), axes.len(), correction, keepdim as i32, out) })
    }

    /// Variance and mean in one pass: returns `(var, mean)`.
    pub fn var_mean(&mut self, a: Value, axes: &[i64], correction: i64, keepdim: bool) -> Result<(Value, Value)> {
        let (mut var, mut mean) = (-1i64, -1i64);
        check(unsafe {
            sys::kf_var_mean(
                self.raw(),
                a.0,
                axes.as_ptr(),
                axes.len(),
                correction,
                keepdim as i32,
                &mut var,
                &mut mean,
            )
        })?;
        Ok((Value(var), Value(mean)))
    }

    /// `shape` holds integer scalars; `dims[j]` is the output dim of input dim j.
    pub fn broadcast_in_dim(&mut self, a: Value, shape: &[Value], dims: &[i64]) -> Result<Value> {
        self.one(|b, out| unsafe {
            sys::kf_broadcast_in_dim(b, a.0, ids(shape), shape.len(), dims.as_ptr(), dims.len(), out)
        })
    }

    pub fn expand(&mut self, a: Value, shape: &[Value]) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_expand(b, a.0, ids(shape), shape.len(), out) })
    }

    pub fn reshape(&mut self, a: Value, shape: &[Value]) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_reshape(b, a.0, ids(shape), shape.len(), out) })
    }

    pub fn permute(&mut self, a: Value, perm: &[i64]) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_permute(b, a.0, perm.as_ptr(), perm.len(), out) })
    }

    pub fn squeeze(&mut self, a: Value, dims: &[i64]) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_squeeze(b, a.0, dims.as_ptr(), dims.len(), out) })
    }

    pub fn unsqueeze(&mut self, a: Value, dim: i64) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_unsqueeze(b, a.0, dim, out) })
    }

    /// Python slice semantics; `stop = i64::MAX` runs to the end.
    pub fn slice(&mut self, a: Value, dim: i64, start: i64, stop: i64, step: i64) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_slice(b, a.0, dim, start, stop, step, out) })
    }

    /// `pads`: (low, high) per dim; `value`: a scalar.
    pub fn pad(&mut self, a: Value, pads: &[i64], value: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_pad(b, a.0, pads.as_ptr(), pads.len(), value.0, out) })
    }

    pub fn cat(&mut self, inputs: &[Value], dim: i64) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_cat(b, ids(inputs), inputs.len(), dim, out) })
    }

    pub fn index_select(&mut self, a: Value, dim: i64, index: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_index_select(b, a.0, dim, index.0, out) })
    }

    pub fn gather(&mut self, a: Value, dim: i64, index: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_gather(b, a.0, dim, index.0, out) })
    }

    pub fn full(&mut self, shape: &[Value], fill: Value, dtype: DType) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_full(b, ids(shape), shape.len(), fill.0, dtype.to_raw(), out) })
    }

    pub fn iota(&mut self, length: Value, start: Value, step: Value, dtype: DType) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_iota(b, length.0, start.0, step.0, dtype.to_raw(), out) })
    }

    /// Philox uniform numbers in [low, high), keyed by (seed, offset) scalars.
    pub fn uniform(
        &mut self,
        shape: &[Value],
        low: Value,
        high: Value,
        seed: Value,
        offset: Value,
        dtype: DType,
    ) -> Result<Value> {
        self.one(|b, out| unsafe {
            sys::kf_uniform(
                b,
                ids(shape),
                shape.len(),
                low.0,
                high.0,
                seed.0,
                offset.0,
                dtype.to_raw(),
                out,
            )
        })
    }

    pub fn normal(
        &mut self,
        shape: &[Value],
        mean: Value,
        std: Value,
        seed: Value,
        offset: Value,
        dtype: DType,
    ) -> Result<Value> {
        self.one(|b, out| unsafe {
            sys::kf_normal(
                b,
                ids(shape),
                shape.len(),
                mean.0,
                std.0,
                seed.0,
                offset.0,
                dtype.to_raw(),
                out,
            )
        })
    }

    pub fn matmul(&mut self, a: Value, c: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_matmul(b, a.0, c.0, out) })
    }

    /// `x @ w^T (+ bias)`.
    pub fn linear(&mut self, x: Value, w: Value, bias: Option<Value>) -> Result<Value> {
        let bias = bias.map_or(-1, |v| v.0);
        self.one(|b, out| unsafe { sys::kf_linear(b, x.0, w.0, bias, out) })
    }

    /// A segmentation hint: kfuse may cut the fusion here.
    pub fn segment_set(&mut self, a: Value) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_segment_set(b, a.0, out) })
    }

    /// `a`'s extent along `dim` as an int64 scalar, read on each call
    /// (usable in arithmetic and in shape lists).
    pub fn size(&mut self, a: Value, dim: i64) -> Result<Value> {
        self.one(|b, out| unsafe { sys::kf_size(b, a.0, dim, out) })
    }

    /// Marks `value` as the next output.
    pub fn output(&mut self, value: Value) -> Result<()> {
        self.output_with(value, None, None)
    }

    /// Marks an output, pinning its layout (`stride_order`: dims from
    /// outermost to innermost) and/or writing it into tensor input number
    /// `alias_input` (an in-place update).
    pub fn output_with(
        &mut self,
        value: Value,
        stride_order: Option<&[i64]>,
        alias_input: Option<usize>,
    ) -> Result<()> {
        let (order, rank) = stride_order.map_or((ptr::null(), 0), |o| (o.as_ptr(), o.len()));
        let alias = alias_input.map_or(-1, |i| i as i64);
        check(unsafe { sys::kf_add_output(self.raw(), value.0, order, rank, alias) })
    }

    /// Ends the definition and returns the cached fusion; the builder stays
    /// usable. Defining the same ops in the same order gives the same fusion.
    pub fn finalize(&self) -> Result<Fusion> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid builder; on success we own one fusion reference.
        unsafe {
            check(sys::kf_builder_finalize(self.raw(), &mut raw))?;
            Fusion::from_raw(raw)
        }
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        // SAFETY: we own the builder.
        unsafe { sys::kf_builder_destroy(self.raw()) }
    }
}
