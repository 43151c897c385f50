import java.util.Arrays;
import org.kfuse.Builder;
import org.kfuse.DType;
import org.kfuse.Fusion;
import org.kfuse.Kfuse;
import org.kfuse.Op;
import org.kfuse.OutputTensor;
import org.kfuse.Tensor;
import org.kfuse.Value;

/** A user's program with only the kfuse jar on its class path: relu(x + bias) on the CPU. */
public final class Consumer {
  public static void main(String[] args) {
    float[] x = {-1, 2, -3, 4, -5, 6};
    float[] bias = {0.5f, -2.5f, 4};
    float[] want = {0, 0, 1, 4.5f, 0, 10};
    try (Builder b = new Builder()) {
      Value xv = b.tensor(2, DType.FLOAT32);
      Value bv = b.tensor(1, DType.FLOAT32);
      b.output(b.unary(Op.RELU, b.add(xv, bv)));
      try (Fusion f = b.build();
          Tensor xt = Tensor.of(x, 2, 3);
          Tensor bt = Tensor.of(bias, 3);
          OutputTensor y = f.execute(xt, bt)[0]) {
        float[] got = y.toFloatArray();
        System.out.println("JNI library: " + Kfuse.nativeLibrary());
        System.out.println("relu(x + bias) = " + Arrays.toString(got) + " shape " + Arrays.toString(y.shape()));
        if (!Arrays.equals(got, want) || !Arrays.equals(y.shape(), new long[] {2, 3})) {
          System.out.println("FAIL: expected " + Arrays.toString(want) + " shape [2, 3]");
          System.exit(1);
        }
      }
    }
    System.out.println("consumer: OK");
  }
}
