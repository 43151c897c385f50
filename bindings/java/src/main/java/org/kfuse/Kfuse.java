package org.kfuse;

/** Library-wide functions: version and the definition cache. */
public final class Kfuse {
  private static volatile boolean versionChecked;

  private Kfuse() {}

  /** The library's API version. */
  public static long version() {
    return KfuseNative.kf_version();
  }

  /** Throws VERSION_MISMATCH if the library does not implement the header this binding was built from. */
  public static void checkVersion() {
    if (!versionChecked) {
      KfuseNative.kf_check_version(KfuseNativeConstants.KF_API_VERSION);
      versionChecked = true;
    }
  }

  /**
   * Where the JNI library was loaded from: the file extracted from the jar,
   * the path of {@code -Dkfuse.jni.library}, or "java.library.path".
   */
  public static String nativeLibrary() {
    version(); // loads it
    return NativeLibrary.loadedFrom();
  }

  /** Counters of the definition cache. */
  public record CacheStats(long definitions, long hits, long misses, long evictions, long fusions,
      long concretizations, long concretizationHits) {}

  public static CacheStats cacheStats() {
    long[] s = new long[7];
    KfuseNative.kf_cache_get_stats(s);
    return new CacheStats(s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
  }

  /** Drops every cached fusion (open Fusion objects stay valid). */
  public static void clearCache() {
    KfuseNative.kf_cache_clear();
  }
}
