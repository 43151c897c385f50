package org.kfuse;

/** An input or output of a fusion. {@code rank} is 0 for scalars. */
public record ValueInfo(long id, int rank, DType dtype, boolean isScalar) {}
