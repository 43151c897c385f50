package org.kfuse;

/** DLPack type codes of kfuse's dtypes (the DType enum is generated). */
final class DTypes {
  private DTypes() {}

  static int size(DType d) {
    switch (d) {
      case FLOAT64:
      case INT64:
        return 8;
      case FLOAT32:
      case INT32:
        return 4;
      case FLOAT16:
      case BFLOAT16:
        return 2;
      default:
        return 1;
    }
  }

  /** DLPack type code: 0 int, 1 uint (uint8), 2 float, 4 bfloat, kfuse's bool code, DLPack 1.1's float8 codes. */
  static int dlpackCode(DType d) {
    switch (d) {
      case FLOAT8_E4M3FN:
        return KfuseNativeConstants.KF_DLPACK_FLOAT8_E4M3FN_CODE;
      case FLOAT8_E5M2:
        return KfuseNativeConstants.KF_DLPACK_FLOAT8_E5M2_CODE;
      case BOOL:
        return KfuseNativeConstants.KF_DLPACK_BOOL_CODE;
      case FLOAT64:
      case FLOAT32:
      case FLOAT16:
        return 2;
      case BFLOAT16:
        return 4;
      case INT64:
      case INT32:
      case INT8:
        return 0;
      default:
        return 1;
    }
  }

  static DType fromDlpack(int code, int bits) {
    if (bits == 8 && code == KfuseNativeConstants.KF_DLPACK_BOOL_CODE) return DType.BOOL;
    for (DType d : DType.values()) {
      if (d != DType.BOOL && dlpackCode(d) == code && size(d) * 8 == bits) return d;
    }
    throw new KfuseException(Status.DTYPE_MISMATCH, "no kfuse dtype for DLPack code " + code + ", " + bits + " bits");
  }
}
