package org.kfuse;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * Many define/execute/fail cycles keep native memory bounded. Run with a
 * fixed, pre-touched Java heap (-Xms=-Xmx, -XX:+AlwaysPreTouch) so that RSS
 * measures native memory.
 */
class LeakTest {
  private static long rssKib() throws Exception {
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("VmRSS:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    }
    throw new IllegalStateException("no VmRSS");
  }

  private static void cycle(Tensor x, Tensor w) {
    try (Fusion f = LayerNorm.define(); Fusion copy = f.retain()) {
      OutputTensor[] out = f.execute(x, w, w);
      out[0].close();
      assertThrows(KfuseException.class, () -> copy.execute(x));
    }
    assertThrows(KfuseException.class, () -> Fusion.fromText("y = nope("));
  }

  @Test
  void repeatedCyclesDoNotGrowMemory() throws Exception {
    try (Tensor x = Tensor.of(LayerNorm.data(16 * 64, 1), 16, 64);
        Tensor w = Tensor.of(LayerNorm.data(64, 2), 64)) {
      for (int i = 0; i < 2000; i++) {
        cycle(x, w);
      }
      System.gc();
      long before = rssKib();
      for (int i = 0; i < 20000; i++) {
        cycle(x, w);
      }
      System.gc();
      long grown = rssKib() - before;
      // A leaked 16x64 output alone would be 80 MB over 20000 cycles.
      assertTrue(grown < 16 * 1024, "RSS grew by " + grown + " KiB over 20000 cycles");
    }
  }
}
