package org.kfuse;

/** Where a tensor's memory lives: a DLPack device type and device id. */
public record Device(Type type, int id) {
  /** DLPack device types kfuse accepts. */
  public enum Type {
    CPU(1),
    CUDA(2),
    CUDA_HOST(3),
    CUDA_MANAGED(13);

    final int dlpackCode;

    Type(int dlpackCode) {
      this.dlpackCode = dlpackCode;
    }

    static Type fromDlpack(int code) {
      for (Type t : values()) {
        if (t.dlpackCode == code) {
          return t;
        }
      }
      throw new IllegalArgumentException("unknown DLPack device type " + code);
    }
  }

  public static final Device CPU = new Device(Type.CPU, 0);

  public static Device cuda(int id) {
    return new Device(Type.CUDA, id);
  }

  /** Whether the host can read the memory directly. */
  public boolean isHost() {
    return type == Type.CPU || type == Type.CUDA_HOST;
  }
}
