package org.kfuse;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class LayerNormTest {
  @Test
  void layerNormMatchesReferenceOnCpu() {
    int rows = 5, cols = 33;
    float[] x = LayerNorm.data(rows * cols, 1), w = LayerNorm.data(cols, 2), b = LayerNorm.data(cols, 3);
    try (Fusion f = LayerNorm.define();
        Tensor xt = Tensor.of(x, rows, cols);
        Tensor wt = Tensor.of(w, cols);
        Tensor bt = Tensor.of(b, cols)) {
      OutputTensor[] out = f.execute(xt, wt, bt);
      assertEquals(1, out.length);
      try (OutputTensor y = out[0]) {
        assertArrayEquals(new long[] {rows, cols}, y.shape());
        assertEquals(DType.FLOAT32, y.dtype());
        assertEquals(Device.CPU, y.device());
        LayerNorm.assertClose(y.toFloatArray(), LayerNorm.reference(x, w, b, rows, cols));
      }
    }
  }

  @Test
  void sizeIsReadPerCall() {
    Fusion f;
    try (Builder b = new Builder()) {
      Value x = b.tensor(2, DType.FLOAT32);
      b.output(b.mul(x, b.size(x, 0)));
      f = b.build();
    }
    try (Fusion fusion = f) {
      for (int rows : new int[] {2, 5}) {
        float[] x = LayerNorm.data(rows * 3, 7);
        try (Tensor xt = Tensor.of(x, rows, 3)) {
          OutputTensor[] out = fusion.execute(xt);
          try (OutputTensor y = out[0]) {
            float[] got = y.toFloatArray();
            for (int i = 0; i < x.length; ++i) assertEquals(x[i] * rows, got[i]);
          }
        }
      }
    }
  }

  @Test
  void directBuffersAndExecuteInto() {
    int rows = 3, cols = 8;
    float[] x = LayerNorm.data(rows * cols, 4), w = LayerNorm.data(cols, 5), b = LayerNorm.data(cols, 6);
    ByteBuffer xb = ByteBuffer.allocateDirect(x.length * 4).order(ByteOrder.nativeOrder());
    xb.asFloatBuffer().put(x);
    ByteBuffer yb = ByteBuffer.allocateDirect(x.length * 4).order(ByteOrder.nativeOrder());
    try (Fusion f = LayerNorm.define();
        Tensor xt = Tensor.of(xb, DType.FLOAT32, rows, cols);
        Tensor wt = Tensor.of(w, cols);
        Tensor bt = Tensor.of(b, cols);
        Tensor yt = Tensor.of(yb, DType.FLOAT32, rows, cols)) {
      assertArrayEquals(new long[] {rows, cols}, f.outputShape(0, xt, wt, bt));
      f.executeInto(new DLPackTensor[] {xt, wt, bt}, new DLPackTensor[] {yt});
      float[] y = new float[x.length];
      yb.asFloatBuffer().get(y);
      LayerNorm.assertClose(y, LayerNorm.reference(x, w, b, rows, cols));
    }
  }

  @Test
  void sameDefinitionSameFusionAndTextRoundTrip() {
    try (Fusion a = LayerNorm.define(); Fusion b = LayerNorm.define()) {
      assertTrue(a.isSameFusion(b));
      String text = a.toText();
      assertTrue(text.contains("var_mean"), text);
      try (Fusion parsed = Fusion.fromText(text)) {
        assertTrue(parsed.isSameFusion(a));
      }
      ValueInfo[] inputs = a.inputs();
      assertEquals(3, inputs.length);
      assertEquals(new ValueInfo(0, 2, DType.FLOAT32, false), inputs[0]);
      assertEquals(2, a.outputs()[0].rank());
      assertTrue(Kfuse.cacheStats().hits() >= 1);
      assertEquals(KfuseNativeConstants.KF_API_VERSION, Kfuse.version());
    }
  }

  @Test
  void badInputThrowsWithKfuseMessage() {
    try (Fusion f = LayerNorm.define();
        Tensor flat = Tensor.of(LayerNorm.data(12, 1), 12);
        Tensor w = Tensor.of(LayerNorm.data(4, 2), 4)) {
      KfuseException e = assertThrows(KfuseException.class, () -> f.execute(flat, w, w));
      assertEquals(Status.SHAPE_MISMATCH, e.status());
      assertEquals(Status.SHAPE_MISMATCH.swigValue(), e.code());
      assertTrue(e.getMessage().contains("rank"), e.getMessage());
    }
    KfuseException parse = assertThrows(KfuseException.class,
        () -> Fusion.fromText("input x: tensor<float32, 1>\ny = nope(x)\n"));
    assertEquals(Status.PARSE, parse.status());
    assertTrue(parse.getMessage().contains("line 2"), parse.getMessage());
    try (Builder b = new Builder()) {
      Value x = b.tensor(1, DType.FLOAT32);
      KfuseException e = assertThrows(KfuseException.class, () -> b.binary(Op.SHIFT_LEFT, x, x));
      assertEquals(Status.DTYPE_MISMATCH, e.status());
      e = assertThrows(KfuseException.class, () -> b.unary(Op.NEG, new Value(42)));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("42"), e.getMessage());
    }
  }

  @Test
  void useAfterCloseThrowsAndCloseIsIdempotent() {
    Builder b = new Builder();
    b.close();
    b.close();
    assertThrows(IllegalStateException.class, () -> b.tensor(1, DType.FLOAT32));
    Fusion f = LayerNorm.define();
    Fusion second = f.retain();
    f.close();
    f.close();
    assertThrows(IllegalStateException.class, f::toText);
    assertNotNull(second.toText()); // the other reference stays valid
    second.close();
    Tensor t = Tensor.of(new float[] {1, 2}, 2);
    t.close();
    assertThrows(IllegalStateException.class, t::dlTensorAddress);
  }

  @Test
  void threadsShareAFusionAndEachSeesItsOwnError() throws Exception {
    try (Fusion f = LayerNorm.define()) {
      ExecutorService pool = Executors.newFixedThreadPool(8);
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        final int thread = t;
        done.add(pool.submit(() -> {
          for (int i = 0; i < 100; i++) {
            int cols = 4 + (thread + i) % 5;
            try (Tensor x = Tensor.of(LayerNorm.data(3 * cols, thread), 3, cols);
                Tensor bad = Tensor.of(LayerNorm.data(cols + 1, 0), cols + 1);
                Tensor good = Tensor.of(LayerNorm.data(cols, 1), cols)) {
              KfuseException e = assertThrows(KfuseException.class, () -> f.execute(x, bad, bad));
              assertTrue(e.getMessage().contains(Integer.toString(cols + 1)), e.getMessage());
              for (OutputTensor o : f.execute(x, good, good)) {
                o.close();
              }
            }
          }
          return null;
        }));
      }
      for (Future<?> d : done) {
        d.get();
      }
      pool.shutdown();
    }
  }

  @Test
  void layerNormOnGpuWhenPresent() {
    assumeTrue(CudaTestSupport.present(), "no CUDA driver (libcuda.so.1)");
    int rows = 64, cols = 129;
    float[] x = LayerNorm.data(rows * cols, 7), w = LayerNorm.data(cols, 8), b = LayerNorm.data(cols, 9);
    long dx = CudaTestSupport.upload(x), dw = CudaTestSupport.upload(w), db = CudaTestSupport.upload(b);
    assertTrue(dx != 0 && dw != 0 && db != 0, "cuMemAlloc/cuMemcpyHtoD failed");
    try (Fusion f = LayerNorm.define();
        Tensor xt = Tensor.ofPointer(dx, Device.cuda(0), DType.FLOAT32, new long[] {rows, cols}, null);
        Tensor wt = Tensor.ofPointer(dw, Device.cuda(0), DType.FLOAT32, new long[] {cols}, null);
        Tensor bt = Tensor.ofPointer(db, Device.cuda(0), DType.FLOAT32, new long[] {cols}, null)) {
      OutputTensor[] out;
      try {
        out = f.execute(xt, wt, bt);
      } catch (KfuseException e) {
        assumeTrue(e.status() != Status.NO_DEVICE && e.status() != Status.UNSUPPORTED, e.toString());
        throw e;
      }
      try (OutputTensor y = out[0]) {
        assertEquals(Device.cuda(0), y.device());
        assertArrayEquals(new long[] {cols, 1}, y.strides());
        float[] host = CudaTestSupport.download(y.dataPointer(), rows * cols);
        LayerNorm.assertClose(host, LayerNorm.reference(x, w, b, rows, cols));
      }
    } finally {
      CudaTestSupport.free(dx);
      CudaTestSupport.free(dw);
      CudaTestSupport.free(db);
    }
  }
}
