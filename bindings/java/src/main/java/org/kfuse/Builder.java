package org.kfuse;

/**
 * Records a fusion definition op by op; {@link #build()} returns the cached
 * {@link Fusion}. A builder is single-threaded (as in the C API): use it
 * from one thread at a time. Close it when done; use after close throws
 * {@link IllegalStateException}.
 *
 * <pre>{@code
 * try (Builder b = new Builder()) {
 *   Value x = b.tensor(2, DType.FLOAT32);
 *   b.output(b.unary(Op.RELU, x));
 *   try (Fusion f = b.build()) { ... }
 * }
 * }</pre>
 */
public final class Builder implements AutoCloseable {
  private long handle;

  public Builder() {
    Kfuse.checkVersion();
    long[] out = new long[1];
    KfuseNative.kf_builder_create(out);
    handle = out[0];
  }

  private long handle() {
    if (handle == 0) {
      throw new IllegalStateException("Builder is closed");
    }
    return handle;
  }

  private static long[] ids(Value... values) {
    long[] ids = new long[values.length];
    for (int i = 0; i < values.length; i++) {
      ids[i] = values[i].id();
    }
    return ids;
  }

  /** A tensor input of {@code rank} and {@code dtype}; sizes are bound at execution. */
  public Value tensor(int rank, DType dtype) {
    long[] out = new long[1];
    KfuseNative.kf_define_tensor(handle(), rank, dtype, out);
    return new Value(out[0]);
  }

  /** A scalar input (a 0-dim host tensor at execution). */
  public Value scalar(DType dtype) {
    long[] out = new long[1];
    KfuseNative.kf_define_scalar(handle(), dtype, out);
    return new Value(out[0]);
  }

  public Value constant(double value, DType dtype) {
    long[] out = new long[1];
    KfuseNative.kf_define_constant_f64(handle(), value, dtype, out);
    return new Value(out[0]);
  }

  public Value constant(long value, DType dtype) {
    long[] out = new long[1];
    KfuseNative.kf_define_constant_i64(handle(), value, dtype, out);
    return new Value(out[0]);
  }

  /** Any op with its raw attributes (docs/text-format.md lists them). */
  public Value[] op(Op op, Value[] args, long... attrs) {
    long[] outs = new long[KfuseNative.kf_op_num_outputs(op)];
    KfuseNative.kf_builder_op(handle(), op, ids(args), attrs, outs);
    Value[] values = new Value[outs.length];
    for (int i = 0; i < outs.length; i++) {
      values[i] = new Value(outs[i]);
    }
    return values;
  }

  public Value unary(Op op, Value a) {
    long[] out = new long[1];
    KfuseNative.kf_unary(handle(), op, a.id(), out);
    return new Value(out[0]);
  }

  /** A binary op; operands broadcast like torch (right-aligned dims). */
  public Value binary(Op op, Value a, Value b) {
    long[] out = new long[1];
    KfuseNative.kf_binary(handle(), op, a.id(), b.id(), out);
    return new Value(out[0]);
  }

  public Value ternary(Op op, Value a, Value b, Value c) {
    long[] out = new long[1];
    KfuseNative.kf_ternary(handle(), op, a.id(), b.id(), c.id(), out);
    return new Value(out[0]);
  }

  public Value add(Value a, Value b) {
    return binary(Op.ADD, a, b);
  }

  public Value sub(Value a, Value b) {
    return binary(Op.SUB, a, b);
  }

  public Value mul(Value a, Value b) {
    return binary(Op.MUL, a, b);
  }

  public Value div(Value a, Value b) {
    return binary(Op.DIV, a, b);
  }

  public Value cast(Value a, DType dtype) {
    long[] out = new long[1];
    KfuseNative.kf_cast(handle(), a.id(), dtype, out);
    return new Value(out[0]);
  }

  /** A reduction (SUM, MAX, MEAN, ...) over {@code axes} (none = all). */
  public Value reduce(Op op, Value a, boolean keepdim, long... axes) {
    long[] out = new long[1];
    KfuseNative.kf_reduce(handle(), op, a.id(), axes, keepdim ? 1 : 0, out);
    return new Value(out[0]);
  }

  public Value var(Value a, long correction, boolean keepdim, long... axes) {
    long[] out = new long[1];
    KfuseNative.kf_var(handle(), a.id(), axes, correction, keepdim ? 1 : 0, out);
    return new Value(out[0]);
  }

  /** Variance and mean in one pass: returns {var, mean}. */
  public Value[] varMean(Value a, long correction, boolean keepdim, long... axes) {
    long[] var = new long[1];
    long[] mean = new long[1];
    KfuseNative.kf_var_mean(handle(), a.id(), axes, correction, keepdim ? 1 : 0, var, mean);
    return new Value[] {new Value(var[0]), new Value(mean[0])};
  }

  /** {@code shape} holds integer scalars; {@code dims[j]} is the output dim of input dim j. */
  public Value broadcastInDim(Value a, Value[] shape, long... dims) {
    long[] out = new long[1];
    KfuseNative.kf_broadcast_in_dim(handle(), a.id(), ids(shape), dims, out);
    return new Value(out[0]);
  }

  public Value expand(Value a, Value... shape) {
    long[] out = new long[1];
    KfuseNative.kf_expand(handle(), a.id(), ids(shape), out);
    return new Value(out[0]);
  }

  public Value reshape(Value a, Value... shape) {
    long[] out = new long[1];
    KfuseNative.kf_reshape(handle(), a.id(), ids(shape), out);
    return new Value(out[0]);
  }

  public Value permute(Value a, long... perm) {
    long[] out = new long[1];
    KfuseNative.kf_permute(handle(), a.id(), perm, out);
    return new Value(out[0]);
  }

  public Value squeeze(Value a, long... dims) {
    long[] out = new long[1];
    KfuseNative.kf_squeeze(handle(), a.id(), dims, out);
    return new Value(out[0]);
  }

  public Value unsqueeze(Value a, long dim) {
    long[] out = new long[1];
    KfuseNative.kf_unsqueeze(handle(), a.id(), dim, out);
    return new Value(out[0]);
  }

  /** {@code a}'s extent along {@code dim} as an int64 scalar, read on each call. */
  public Value size(Value a, long dim) {
    long[] out = new long[1];
    KfuseNative.kf_size(handle(), a.id(), dim, out);
    return new Value(out[0]);
  }

  /** Python slice semantics; {@code stop = Long.MAX_VALUE} runs to the end. */
  public Value slice(Value a, long dim, long start, long stop, long step) {
    long[] out = new long[1];
    KfuseNative.kf_slice(handle(), a.id(), dim, start, stop, step, out);
    return new Value(out[0]);
  }

  public Value cat(long dim, Value... inputs) {
    long[] out = new long[1];
    KfuseNative.kf_cat(handle(), ids(inputs), dim, out);
    return new Value(out[0]);
  }

  public Value matmul(Value a, Value b) {
    long[] out = new long[1];
    KfuseNative.kf_matmul(handle(), a.id(), b.id(), out);
    return new Value(out[0]);
  }

  /** {@code x @ w^T (+ bias)}; bias may be null. */
  public Value linear(Value x, Value w, Value bias) {
    long[] out = new long[1];
    KfuseNative.kf_linear(handle(), x.id(), w.id(), bias == null ? -1 : bias.id(), out);
    return new Value(out[0]);
  }

  /** Marks {@code value} as the next output. */
  public void output(Value value) {
    KfuseNative.kf_add_output(handle(), value.id(), null, -1);
  }

  /**
   * Marks an output, pinning its layout ({@code strideOrder}: dims outermost
   * first, or null) and/or writing it into tensor input {@code aliasInput}
   * (-1 for none).
   */
  public void output(Value value, long[] strideOrder, int aliasInput) {
    KfuseNative.kf_add_output(handle(), value.id(), strideOrder, aliasInput);
  }

  /** Ends the definition; the same definition always gives the same fusion. */
  public Fusion build() {
    long[] out = new long[1];
    KfuseNative.kf_builder_finalize(handle(), out);
    return new Fusion(out[0]);
  }

  /** Destroys the builder. Idempotent. */
  @Override
  public void close() {
    if (handle != 0) {
      KfuseNative.kf_builder_destroy(handle);
      handle = 0;
    }
  }
}
