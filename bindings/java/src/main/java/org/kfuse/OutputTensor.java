package org.kfuse;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A tensor kfuse allocated (a {@code DLManagedTensor}). {@link #close()}
 * calls its DLPack deleter; {@link #release()} hands ownership to someone
 * else (a framework's from_dlpack).
 */
public final class OutputTensor implements DLPackTensor, AutoCloseable {
  private long managed;

  OutputTensor(long managed) {
    this.managed = managed;
  }

  private long tensor() {
    if (managed == 0) {
      throw new IllegalStateException("OutputTensor is closed");
    }
    return KfuseNative.kfj_managed_tensor(managed);
  }

  @Override
  public long dlTensorAddress() {
    return tensor();
  }

  private long[] layout() {
    long t = tensor();
    long[] layout = new long[2 * KfuseNative.kfj_tensor_ndim(t)];
    KfuseNative.kfj_tensor_layout(t, layout);
    return layout;
  }

  public long[] shape() {
    long[] layout = layout();
    return java.util.Arrays.copyOf(layout, layout.length / 2);
  }

  /** Strides in elements (row-major ones when the producer left them out). */
  public long[] strides() {
    long[] layout = layout();
    return java.util.Arrays.copyOfRange(layout, layout.length / 2, layout.length);
  }

  public DType dtype() {
    long t = tensor();
    return DTypes.fromDlpack(KfuseNative.kfj_tensor_dtype_code(t), KfuseNative.kfj_tensor_dtype_bits(t));
  }

  public Device device() {
    long t = tensor();
    return new Device(Device.Type.fromDlpack(KfuseNative.kfj_tensor_device_type(t)),
        KfuseNative.kfj_tensor_device_id(t));
  }

  /** Address of the first element (device memory for CUDA tensors). */
  public long dataPointer() {
    return KfuseNative.kfj_tensor_data(tensor());
  }

  public long elementCount() {
    return Tensor.elementCount(shape());
  }

  /** Copies a host tensor, row-major, into {@code dst} from its position on. */
  public void copyTo(ByteBuffer dst) {
    if (!device().isHost()) {
      throw new KfuseException(Status.DEVICE_MISMATCH, "copyTo: the tensor is on " + device()
          + "; copy device memory with your CUDA library");
    }
    if (!dst.isDirect()) {
      throw new IllegalArgumentException("copyTo needs a direct ByteBuffer");
    }
    long bytes = elementCount() * DTypes.size(dtype());
    if (dst.remaining() < bytes) {
      throw new IllegalArgumentException("copyTo needs " + bytes + " bytes, the buffer has " + dst.remaining());
    }
    KfuseNative.kfj_tensor_copy_compact(tensor(), dst.slice());
  }

  private ByteBuffer compact(DType expected) {
    if (dtype() != expected) {
      throw new KfuseException(Status.DTYPE_MISMATCH, "the tensor is " + dtype() + ", not " + expected);
    }
    ByteBuffer b = ByteBuffer.allocateDirect((int) Math.max(1, elementCount() * DTypes.size(expected)))
        .order(ByteOrder.nativeOrder());
    copyTo(b);
    return b;
  }

  public float[] toFloatArray() {
    float[] out = new float[(int) elementCount()];
    compact(DType.FLOAT32).asFloatBuffer().get(out);
    return out;
  }

  public double[] toDoubleArray() {
    double[] out = new double[(int) elementCount()];
    compact(DType.FLOAT64).asDoubleBuffer().get(out);
    return out;
  }

  public long[] toLongArray() {
    long[] out = new long[(int) elementCount()];
    compact(DType.INT64).asLongBuffer().get(out);
    return out;
  }

  public int[] toIntArray() {
    int[] out = new int[(int) elementCount()];
    compact(DType.INT32).asIntBuffer().get(out);
    return out;
  }

  /** Gives up ownership: returns the {@code DLManagedTensor*}; the receiver calls its deleter. */
  public long release() {
    long m = managed;
    if (m == 0) {
      throw new IllegalStateException("OutputTensor is closed");
    }
    managed = 0;
    return m;
  }

  /** Calls the DLPack deleter. Idempotent. */
  @Override
  public void close() {
    if (managed != 0) {
      KfuseNative.kfj_managed_delete(managed);
      managed = 0;
    }
  }
}
