package org.kfuse;

/** A failed kfuse call: its status and kfuse's message for that call. */
public class KfuseException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int code;

  /** Called from the JNI layer (and by the binding for its own checks). */
  KfuseException(int code, String message) {
    super(message);
    this.code = code;
  }

  KfuseException(Status status, String message) {
    this(status.swigValue(), message);
  }

  /** The numeric kf_status. */
  public int code() {
    return code;
  }

  /** The status, or {@code null} for a code this binding does not know. */
  public Status status() {
    for (Status s : Status.values()) {
      if (s.swigValue() == code) {
        return s;
      }
    }
    return null;
  }

  @Override
  public String toString() {
    Status s = status();
    return "KfuseException[" + (s != null ? s.name() : Integer.toString(code)) + "]: " + getMessage();
  }
}
