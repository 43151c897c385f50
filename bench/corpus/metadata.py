"""Corpus inputs as metadata only: what concretization and segmentation
read (shapes, strides, dtypes, alignment) without any memory, for the
plans kfuse makes for the GPU on a machine without one."""
import generate


class CudaMetadata:
    """Stands for a CUDA tensor of an entry's input, in its layout, for
    concretization and segmentation, which read no data: a DLPack capsule
    with a made-up device address (never dereferenced; each tensor its own
    64 GiB region, so that outputs do not seem to overlap inputs)."""
    CODES = {"float64": (2, 64), "float32": (2, 32), "float16": (2, 16), "bfloat16": (4, 16),
             "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8), "int64": (0, 64), "int32": (0, 32),
             "int8": (0, 8), "uint8": (1, 8), "bool": (6, 8)}

    regions = 0

    def __init__(self, spec):
        from kfuse import _dlpack as dl
        self.dl = dl
        code, bits = self.CODES[spec["dtype"]]
        strides, offset = generate.input_strides(spec)
        CudaMetadata.regions += 1
        base = 0x7f0000000000 + (CudaMetadata.regions % 64 << 36)
        self.described = dl._Described(base + offset * bits // 8, (dl.kDLCUDA, 0), code, bits,
                                       spec["shape"], strides)

    def __dlpack_device__(self):
        return (self.dl.kDLCUDA, 0)

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        return self.dl.export_capsule(self.described, self.described.tensor, False)
