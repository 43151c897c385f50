package org.kfuse;

/** The layernorm definition and its double precision reference, for the tests. */
final class LayerNorm {
  static final double EPS = 1e-5;

  private LayerNorm() {}

  /** y = (x - mean) * rsqrt(var + eps) * w + b over the last dim of x. */
  static Fusion define() {
    try (Builder b = new Builder()) {
      Value x = b.tensor(2, DType.FLOAT32);
      Value w = b.tensor(1, DType.FLOAT32);
      Value bias = b.tensor(1, DType.FLOAT32);
      Value[] varMean = b.varMean(x, 0, true, -1);
      Value eps = b.constant(EPS, DType.FLOAT32);
      Value normed = b.mul(b.sub(x, varMean[1]), b.unary(Op.RSQRT, b.add(varMean[0], eps)));
      b.output(b.add(b.mul(normed, w), bias));
      return b.build();
    }
  }

  static float[] data(int n, int seed) {
    float[] out = new float[n];
    for (int i = 0; i < n; i++) {
      int h = i * -1640531535 + seed;
      out[i] = ((h >>> 8) % 2000) / 250.0f - 4.0f;
    }
    return out;
  }

  static double[] reference(float[] x, float[] w, float[] b, int rows, int cols) {
    double[] y = new double[rows * cols];
    for (int r = 0; r < rows; r++) {
      double mean = 0;
      for (int c = 0; c < cols; c++) {
        mean += x[r * cols + c];
      }
      mean /= cols;
      double var = 0;
      for (int c = 0; c < cols; c++) {
        double d = x[r * cols + c] - mean;
        var += d * d;
      }
      var /= cols;
      double invStd = 1.0 / Math.sqrt(var + EPS);
      for (int c = 0; c < cols; c++) {
        y[r * cols + c] = (x[r * cols + c] - mean) * invStd * w[c] + b[c];
      }
    }
    return y;
  }

  static void assertClose(float[] got, double[] want) {
    org.junit.jupiter.api.Assertions.assertEquals(want.length, got.length);
    for (int i = 0; i < got.length; i++) {
      double tol = 1e-4 + 1e-4 * Math.abs(want[i]);
      if (Math.abs(got[i] - want[i]) > tol) {
        org.junit.jupiter.api.Assertions.fail("element " + i + ": got " + got[i] + ", want " + want[i]);
      }
    }
  }
}
