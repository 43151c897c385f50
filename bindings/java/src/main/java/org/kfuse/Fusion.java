package org.kfuse;

/**
 * A finalized fusion: immutable and safe to execute from many threads at
 * once (as the C API guarantees). Holds one reference of kfuse's cached
 * fusion; {@link #close()} releases it. Use after close throws
 * {@link IllegalStateException}; closing while other threads execute is an
 * error of the caller.
 */
public final class Fusion implements AutoCloseable {
  private volatile long handle;
  private final int numOutputs;

  Fusion(long handle) {
    this.handle = handle;
    long[] n = new long[1];
    try {
      KfuseNative.kf_fusion_num_outputs(handle, n);
    } catch (RuntimeException e) {
      KfuseNative.kf_fusion_release(handle);
      throw e;
    }
    this.numOutputs = (int) n[0];
  }

  /** Parses the text form (docs/text-format.md) through the definition cache. */
  public static Fusion fromText(String text) {
    Kfuse.checkVersion();
    long[] out = new long[1];
    KfuseNative.kf_fusion_from_text(text, out);
    return new Fusion(out[0]);
  }

  private long handle() {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException("Fusion is closed");
    }
    return h;
  }

  /** A second, independent reference to the same fusion. */
  public Fusion retain() {
    long h = handle();
    KfuseNative.kf_fusion_retain(h);
    return new Fusion(h);
  }

  /** Whether both refer to the same cached fusion (equal definitions do). */
  public boolean isSameFusion(Fusion other) {
    return handle() == other.handle();
  }

  public String toText() {
    String[] out = new String[1];
    KfuseNative.kf_fusion_to_text(handle(), out);
    return out[0];
  }

  public int numInputs() {
    long[] n = new long[1];
    KfuseNative.kf_fusion_num_inputs(handle(), n);
    return (int) n[0];
  }

  public int numOutputs() {
    handle();
    return numOutputs;
  }

  private static ValueInfo info(long[] raw) {
    return new ValueInfo(raw[0], (int) raw[1], DType.swigToEnum((int) raw[2]), raw[3] != 0);
  }

  /** Inputs in the order {@link #execute} takes them. */
  public ValueInfo[] inputs() {
    ValueInfo[] infos = new ValueInfo[numInputs()];
    for (int i = 0; i < infos.length; i++) {
      long[] raw = new long[4];
      KfuseNative.kf_fusion_input(handle(), i, raw);
      infos[i] = info(raw);
    }
    return infos;
  }

  public ValueInfo[] outputs() {
    ValueInfo[] infos = new ValueInfo[numOutputs()];
    for (int i = 0; i < infos.length; i++) {
      long[] raw = new long[4];
      KfuseNative.kf_fusion_output(handle(), i, raw);
      infos[i] = info(raw);
    }
    return infos;
  }

  private static long[] addresses(DLPackTensor[] tensors) {
    long[] out = new long[tensors.length];
    for (int i = 0; i < tensors.length; i++) {
      out[i] = tensors[i].dlTensorAddress();
    }
    return out;
  }

  /** Runs the fusion; kfuse allocates the outputs on the inputs' device. */
  public OutputTensor[] execute(DLPackTensor... inputs) {
    return executeOnStream(0, inputs);
  }

  /** {@link #execute} with GPU work enqueued on {@code stream} (a CUstream; 0 = default). */
  public OutputTensor[] executeOnStream(long stream, DLPackTensor... inputs) {
    long[] outputs = new long[numOutputs];
    KfuseNative.kf_execute(handle(), addresses(inputs), outputs, stream);
    OutputTensor[] result = new OutputTensor[outputs.length];
    for (int i = 0; i < outputs.length; i++) {
      result[i] = new OutputTensor(outputs[i]);
    }
    return result;
  }

  /** Runs into caller-provided outputs of the right shapes, dtypes and device. */
  public void executeInto(DLPackTensor[] inputs, DLPackTensor[] outputs) {
    KfuseNative.kf_execute_into(handle(), addresses(inputs), addresses(outputs), 0);
  }

  /** The shape output {@code index} will have for these inputs. */
  public long[] outputShape(int index, DLPackTensor... inputs) {
    ValueInfo[] outs = outputs();
    if (index < 0 || index >= outs.length) {
      throw new IndexOutOfBoundsException("output " + index + " of " + outs.length);
    }
    long[] shape = new long[outs[index].rank()];
    KfuseNative.kf_output_shape(handle(), addresses(inputs), index, shape);
    return shape;
  }

  /** Releases this reference. Idempotent. */
  @Override
  public void close() {
    long h = handle;
    if (h != 0) {
      handle = 0;
      KfuseNative.kf_fusion_release(h);
    }
  }
}
