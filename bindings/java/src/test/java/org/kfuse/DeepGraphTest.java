package org.kfuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Deep definitions on a JVM thread with the default stack (1 MiB on Linux x86-64, where the
 * main thread has 8): kfuse's graph walks are iterative and codegen of deep fusions runs on a
 * worker thread of its own, so nothing here may overflow the caller's stack. Once a 6,000-op
 * chain killed the JVM silently (no exception, no hs_err). Issue 43.
 */
class DeepGraphTest {
  /** y = neg(neg(...neg(x)...)), `ops` negations. */
  static String chain(int ops) {
    StringBuilder s = new StringBuilder("input v0: tensor<float32, 1>\n");
    for (int i = 0; i < ops; ++i) s.append("v").append(i + 1).append(" = neg(v").append(i).append(")\n");
    return s.append("output v").append(ops).append('\n').toString();
  }

  /** A balanced tree of adds over 2^levels products x * 1: many ops, little depth. */
  static String tree(int levels) {
    StringBuilder s = new StringBuilder("input x: tensor<float32, 1>\nconst one: float32 = 1\n");
    int n = 1 << levels;
    for (int i = 0; i < n; ++i) s.append("l0_").append(i).append(" = mul(x, one)\n");
    for (int level = 0; n > 1; ++level, n /= 2)
      for (int i = 0; i < n / 2; ++i)
        s.append('l').append(level + 1).append('_').append(i).append(" = add(l").append(level).append('_')
            .append(2 * i).append(", l").append(level).append('_').append(2 * i + 1).append(")\n");
    return s.append("output l").append(levels).append("_0\n").toString();
  }

  /** Runs `body` on a new thread with the JVM's default stack size; rethrows what it threw. */
  static void onDefaultStackThread(Runnable body) throws InterruptedException {
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread t = new Thread(() -> {
      try {
        body.run();
      } catch (Throwable e) {
        failure.set(e);
      }
    });
    t.start();
    t.join();
    if (failure.get() instanceof AssertionError) throw (AssertionError) failure.get();
    assertNull(failure.get(), () -> "the thread threw " + failure.get());
  }

  @Test
  void chainAtTheDepthLimitRuns() throws InterruptedException {
    onDefaultStackThread(() -> {
      float[] x = {1.5f, -2f, 3f};
      try (Fusion f = Fusion.fromText(chain(9_999)); Tensor xt = Tensor.of(x, 3)) {
        OutputTensor[] out = f.execute(xt);
        try (OutputTensor y = out[0]) {
          float[] got = y.toFloatArray();
          for (int i = 0; i < x.length; ++i) assertEquals(-x[i], got[i]);  // an odd number of negations
        }
      }
    });
  }

  @Test
  void chainPastTheLimitIsAnError() throws InterruptedException {
    onDefaultStackThread(() -> {
      KfuseException e = null;
      try (Fusion f = Fusion.fromText(chain(100_000))) {
        // not reached
      } catch (KfuseException thrown) {
        e = thrown;
      }
      assertTrue(e != null, "a 100,000-op chain must be refused");
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("exceeds the limit of 10000"), e.getMessage());
    });
  }

  @Test
  void wideTreeRuns() throws InterruptedException {
    onDefaultStackThread(() -> {
      int levels = 16, leaves = 1 << levels;  // 131,071 ops, 17 deep
      float[] x = {0.5f, -1f};
      try (Fusion f = Fusion.fromText(tree(levels)); Tensor xt = Tensor.of(x, 2)) {
        OutputTensor[] out = f.execute(xt);
        try (OutputTensor y = out[0]) {
          float[] got = y.toFloatArray();
          for (int i = 0; i < x.length; ++i) assertEquals(x[i] * leaves, got[i], Math.abs(x[i] * leaves) * 1e-6);
        }
      }
    });
  }
}
