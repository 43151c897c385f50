import org.kfuse.Builder;
import org.kfuse.DType;
import org.kfuse.Fusion;
import org.kfuse.Op;
import org.kfuse.OutputTensor;
import org.kfuse.Tensor;
import org.kfuse.Value;

/** Layer normalization with kfuse from Java: define once, run on host data, check. */
public final class LayerNormExample {
  public static void main(String[] args) {
    int rows = 4, cols = 8;
    double eps = 1e-5;
    float[] x = new float[rows * cols];
    for (int i = 0; i < x.length; i++) {
      x[i] = (i * 7) % 11 - 5.0f;
    }
    float[] w = new float[cols];
    float[] b = new float[cols];
    java.util.Arrays.fill(w, 1.5f);
    java.util.Arrays.fill(b, 0.25f);

    try (Builder builder = new Builder()) {
      Value xv = builder.tensor(2, DType.FLOAT32);
      Value wv = builder.tensor(1, DType.FLOAT32);
      Value bv = builder.tensor(1, DType.FLOAT32);
      Value[] varMean = builder.varMean(xv, 0, true, -1);
      Value invStd = builder.unary(Op.RSQRT, builder.add(varMean[0], builder.constant(eps, DType.FLOAT32)));
      Value y = builder.add(builder.mul(builder.mul(builder.sub(xv, varMean[1]), invStd), wv), bv);
      builder.output(y);
      try (Fusion fusion = builder.build();
          Tensor xt = Tensor.of(x, rows, cols);
          Tensor wt = Tensor.of(w, cols);
          Tensor bt = Tensor.of(b, cols)) {
        System.out.print(fusion.toText());
        OutputTensor[] out = fusion.execute(xt, wt, bt);
        try (OutputTensor yt = out[0]) {
          float[] ys = yt.toFloatArray();
          double worst = 0;
          for (int r = 0; r < rows; r++) {
            double mean = 0, var = 0;
            for (int c = 0; c < cols; c++) mean += x[r * cols + c];
            mean /= cols;
            for (int c = 0; c < cols; c++) var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
            var /= cols;
            for (int c = 0; c < cols; c++) {
              double want = (x[r * cols + c] - mean) / Math.sqrt(var + eps) * w[c] + b[c];
              worst = Math.max(worst, Math.abs(ys[r * cols + c] - want));
            }
          }
          System.out.println("row 0: " + java.util.Arrays.toString(java.util.Arrays.copyOf(ys, cols)));
          System.out.printf("max abs error vs f64 reference: %.2e%n", worst);
          if (worst > 1e-4) {
            System.exit(1);
          }
        }
      }
    }
  }
}
