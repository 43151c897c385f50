package org.kfuse;

/** Test-only access to GPU memory (native/cuda_test_support.c). */
final class CudaTestSupport {
  private static final boolean LOADED = load();

  private CudaTestSupport() {}

  private static boolean load() {
    String path = System.getProperty("kfuse.test.cuda.library");
    if (path == null) {
      return false;
    }
    System.load(path);
    return true;
  }

  /** Whether libcuda.so.1 loads and device 0 has a context. */
  static boolean present() {
    return LOADED && available();
  }

  private static native boolean available();

  /** Device pointer with a copy of {@code data} (0 on failure). */
  static native long upload(float[] data);

  static native float[] download(long pointer, int count);

  static native void free(long pointer);
}
