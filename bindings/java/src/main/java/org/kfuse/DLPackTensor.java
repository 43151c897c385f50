package org.kfuse;

/**
 * Anything kfuse can read or write as a DLPack tensor: {@link Tensor},
 * {@link OutputTensor}, or a framework's tensor whose {@code DLTensor*} you
 * have.
 */
public interface DLPackTensor {
  /** Address of a {@code DLTensor} that stays valid while the call runs. */
  long dlTensorAddress();
}
