package org.kfuse;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** Loads the JNI library once, before the first native call. */
final class NativeLibrary {
  /** The system property that names the JNI library's path. */
  static final String PROPERTY = "kfuse.jni.library";

  private static String loadedFrom;

  private NativeLibrary() {}

  /**
   * The folder inside the jar that holds the native libraries of this
   * platform, e.g. {@code org/kfuse/native/linux-amd64}.
   */
  static String resourceDir() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).replace(' ', '_');
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    return "org/kfuse/native/" + os + "-" + arch;
  }

  /** Where the JNI library was loaded from (a path, or "java.library.path"); null before. */
  static synchronized String loadedFrom() {
    return loadedFrom;
  }

  /**
   * Loads {@code libkfuse_jni.so}, the first of: the path in the system
   * property {@code kfuse.jni.library}; the copy inside the jar (with the
   * libkfuse it links, extracted into one temporary folder, where the JNI
   * library's RUNPATH {@code $ORIGIN} finds libkfuse); {@code
   * java.library.path}. A failure names the property and what was tried.
   */
  static synchronized void load() {
    if (loadedFrom != null) {
      return;
    }
    List<String> tried = new ArrayList<>();
    String path = System.getProperty(PROPERTY);
    try {
      if (path != null) {
        tried.add("-D" + PROPERTY + "=" + path);
        System.load(path);
        loadedFrom = path;
        return;
      }
      String dir = resourceDir();
      tried.add("the jar's " + dir + "/");
      Path extracted = extract(dir);
      if (extracted != null) {
        System.load(extracted.toString());
        loadedFrom = extracted.toString();
        return;
      }
      tried.set(tried.size() - 1, "the jar's " + dir + "/ (not in this jar or class path)");
      tried.add("java.library.path=" + System.getProperty("java.library.path"));
      System.loadLibrary("kfuse_jni");
      loadedFrom = "java.library.path";
    } catch (UnsatisfiedLinkError | IOException e) {
      UnsatisfiedLinkError error = new UnsatisfiedLinkError(
          "kfuse: cannot load the JNI library libkfuse_jni.so (tried " + String.join("; ", tried)
              + "): " + e.getMessage() + ". Set -D" + PROPERTY
              + "=/path/to/libkfuse_jni.so, or put the kfuse jar for this platform on the class path.");
      error.initCause(e);
      throw error;
    }
  }

  /**
   * Copies the libraries listed in {@code DIR/libraries.txt} (one file name
   * a line, libkfuse_jni.so last) from the class path into a new temporary
   * folder, deleted when the JVM exits; returns the JNI library's path, or
   * null when the class path has no such folder.
   */
  private static Path extract(String dir) throws IOException {
    ClassLoader loader = NativeLibrary.class.getClassLoader();
    List<String> names = new ArrayList<>();
    try (InputStream index = loader.getResourceAsStream(dir + "/libraries.txt")) {
      if (index == null) {
        return null;
      }
      for (String line : new String(index.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
        if (!line.isBlank()) {
          names.add(line.strip());
        }
      }
    }
    Path tmp = Files.createTempDirectory("kfuse-jni");
    tmp.toFile().deleteOnExit();
    Path last = null;
    for (String name : names) {
      try (InputStream in = loader.getResourceAsStream(dir + "/" + name)) {
        if (in == null) {
          throw new IOException(dir + "/libraries.txt lists " + name + ", which the jar lacks");
        }
        last = tmp.resolve(name);
        Files.copy(in, last, StandardCopyOption.REPLACE_EXISTING);
        last.toFile().deleteOnExit();
      }
    }
    if (last == null) {
      throw new IOException(dir + "/libraries.txt lists no library");
    }
    return last;
  }
}
