package org.kfuse;

/** Loads the JNI library once, before the first native call. */
final class NativeLibrary {
  private static boolean loaded;

  private NativeLibrary() {}

  /**
   * Loads {@code libkfuse_jni.so}: from the path in the system property
   * {@code kfuse.jni.library} if set, else from {@code java.library.path}.
   */
  static synchronized void load() {
    if (loaded) {
      return;
    }
    String path = System.getProperty("kfuse.jni.library");
    if (path != null) {
      System.load(path);
    } else {
      System.loadLibrary("kfuse_jni");
    }
    loaded = true;
  }
}
