package org.kfuse;

/** A value of a definition (input, constant or op result): its dense id. */
public record Value(long id) {}
