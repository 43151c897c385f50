package org.kfuse;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A DLPack view of memory owned elsewhere: a direct {@link ByteBuffer} or a
 * raw (device) pointer. The view holds a native {@code DLTensor}, freed by
 * {@link #close()}; the data itself is never copied or freed by kfuse.
 */
public final class Tensor implements DLPackTensor, AutoCloseable {
  private long address;
  // Keeps the buffer (and so its memory) reachable while the view is open.
  private final ByteBuffer buffer;
  private final long[] shape;
  private final DType dtype;

  private Tensor(long data, Device device, DType dtype, long[] shape, long[] strides, ByteBuffer buffer) {
    this.address = KfuseNative.kfj_tensor_new(data, device.type().dlpackCode, device.id(),
        DTypes.dlpackCode(dtype), DTypes.size(dtype) * 8, shape, strides);
    if (address == 0) {
      throw new OutOfMemoryError("cannot allocate a DLTensor");
    }
    this.buffer = buffer;
    this.shape = shape.clone();
    this.dtype = dtype;
  }

  /**
   * A row-major host tensor over a direct buffer, from its position on. The
   * buffer must hold every element, in native byte order.
   */
  public static Tensor of(ByteBuffer buffer, DType dtype, long... shape) {
    if (!buffer.isDirect()) {
      throw new IllegalArgumentException("kfuse needs a direct ByteBuffer (ByteBuffer.allocateDirect)");
    }
    long bytes = elementCount(shape) * DTypes.size(dtype);
    if (buffer.remaining() < bytes) {
      throw new IllegalArgumentException("shape " + java.util.Arrays.toString(shape) + " of " + dtype + " needs "
          + bytes + " bytes, the buffer has " + buffer.remaining());
    }
    long data = KfuseNative.kfj_buffer_address(buffer) + buffer.position();
    return new Tensor(data, Device.CPU, dtype, shape, null, buffer);
  }

  /** Copies {@code data} into a new direct buffer and views it with {@code shape}. */
  public static Tensor of(float[] data, long... shape) {
    checkCount(data.length, shape);
    ByteBuffer b = allocate(data.length * 4L);
    b.asFloatBuffer().put(data);
    return of(b, DType.FLOAT32, shape);
  }

  public static Tensor of(double[] data, long... shape) {
    checkCount(data.length, shape);
    ByteBuffer b = allocate(data.length * 8L);
    b.asDoubleBuffer().put(data);
    return of(b, DType.FLOAT64, shape);
  }

  public static Tensor of(long[] data, long... shape) {
    checkCount(data.length, shape);
    ByteBuffer b = allocate(data.length * 8L);
    b.asLongBuffer().put(data);
    return of(b, DType.INT64, shape);
  }

  public static Tensor of(int[] data, long... shape) {
    checkCount(data.length, shape);
    ByteBuffer b = allocate(data.length * 4L);
    b.asIntBuffer().put(data);
    return of(b, DType.INT32, shape);
  }

  /** A 0-dim host tensor: the value of a scalar input. */
  public static Tensor scalar(double value) {
    return of(new double[] {value});
  }

  public static Tensor scalar(long value) {
    return of(new long[] {value});
  }

  /**
   * A view of raw memory, e.g. a CUDA device pointer. {@code strides} (in
   * elements) may be null for row-major. The memory must stay valid while
   * the view is used.
   */
  public static Tensor ofPointer(long pointer, Device device, DType dtype, long[] shape, long[] strides) {
    if (strides != null && strides.length != shape.length) {
      throw new IllegalArgumentException("strides and shape differ in length");
    }
    return new Tensor(pointer, device, dtype, shape, strides, null);
  }

  private static ByteBuffer allocate(long bytes) {
    return ByteBuffer.allocateDirect((int) Math.max(bytes, 1)).order(ByteOrder.nativeOrder());
  }

  private static void checkCount(int length, long[] shape) {
    if (elementCount(shape) != length) {
      throw new IllegalArgumentException("shape " + java.util.Arrays.toString(shape) + " has "
          + elementCount(shape) + " elements, the array has " + length);
    }
  }

  static long elementCount(long[] shape) {
    long n = 1;
    for (long d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException("negative size " + d);
      }
      n *= d;
    }
    return n;
  }

  public long[] shape() {
    return shape.clone();
  }

  public DType dtype() {
    return dtype;
  }

  /** The buffer this view reads, or null for a pointer view. */
  public ByteBuffer buffer() {
    return buffer;
  }

  @Override
  public long dlTensorAddress() {
    if (address == 0) {
      throw new IllegalStateException("Tensor is closed");
    }
    return address;
  }

  /** Frees the DLTensor struct (not the data). Idempotent. */
  @Override
  public void close() {
    if (address != 0) {
      KfuseNative.kfj_tensor_free(address);
      address = 0;
    }
  }
}
