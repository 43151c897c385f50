"""Tests of the kfuse Python package on the CPU backend with NumPy.

Run: KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python python3 bindings/python/tests/test_kfuse.py
Exits 77 (skipped) when NumPy is missing. CTest: python_kfuse.
"""
import ctypes
import gc
import os
import sys
import threading
import unittest
import weakref

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed for", sys.executable, "(Debian: apt-get install python3-numpy)")
    sys.exit(77)

import kfuse
from kfuse import _dlpack as dl

from fusions import LAYERNORM  # noqa: E402 (beside this file)


def bias_relu():
    with kfuse.Definition() as fd:
        x = fd.tensor(rank=2, dtype=kfuse.float32)
        b = fd.tensor(rank=1, dtype=kfuse.float32)
        fd.output(fd.relu(x + b))
    return fd.fusion


def add_one_in_place():
    """x += 1 in place (output 0 aliases input 0)."""
    with kfuse.Definition() as fd:
        x = fd.tensor(rank=1, dtype=kfuse.float64)
        fd.output(x + 1.0, alias=0)
    return fd.fusion


class Producer:
    """A DLPack producer over a NumPy array's memory with a chosen DLPack
    dtype, flags and version (NumPy 1.x exports neither versioned capsules
    nor bfloat16): versioned=False behaves like a pre-1.0 producer."""

    def __init__(self, array, dtype=None, flags=0, versioned=True, major=1):
        self.array, self.flags, self.versioned, self.major = array, flags, versioned, major
        code, bits = dtype or (None, None)
        item = array.itemsize
        self.desc = dl._Described(array.ctypes.data, (dl.kDLCPU, 0),
                                  code if code is not None else _np_code(array.dtype),
                                  bits or item * 8, array.shape, [s // item for s in array.strides])
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(max_version)
        if max_version is not None and not self.versioned:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        capsule = dl.export_capsule(self, self.desc.tensor, max_version is not None, self.flags)
        if self.major != 1:
            m = dl.DLManagedTensorVersioned.from_address(dl._get_pointer(capsule, dl.NAME_VERSIONED))
            m.version.major = self.major
        return capsule

    def __dlpack_device__(self):
        return (dl.kDLCPU, 0)


def _np_code(dt):
    return {"f": dl.kDLFloat, "i": dl.kDLInt, "u": dl.kDLUInt, "b": dl.kDLBool}[dt.kind]


def bf16_bits(values):
    """float32 -> bfloat16 bits (round to nearest even), as uint16."""
    u = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class CallTests(unittest.TestCase):
    def setUp(self):
        self.x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        self.b = np.full(3, 0.5, np.float32)

    def test_values_and_zero_copy_output(self):
        f = bias_relu()
        y = f(self.x, self.b)
        self.assertIsInstance(y, kfuse.Tensor)
        self.assertEqual(y.shape, (2, 3))
        self.assertEqual(y.dtype, kfuse.float32)
        self.assertEqual(y.__dlpack_device__(), (1, 0))
        a = np.from_dlpack(y)
        np.testing.assert_array_equal(a, np.maximum(self.x + self.b, 0))
        # the NumPy array is kfuse's memory: same address, and writes show
        self.assertEqual(a.ctypes.data, y.data_ptr)
        self.assertTrue(np.shares_memory(a, np.from_dlpack(y)))
        if a.flags.writeable:  # NumPy 1.x imports DLPack arrays read-only
            a[0, 0] = 42
            self.assertEqual(np.from_dlpack(y)[0, 0], 42)

    def test_inputs_are_not_copied(self):
        # an in-place output writes through the input's own memory
        f = add_one_in_place()
        data = np.array([1.0, 2.0, 3.0])
        y = f(data)
        np.testing.assert_array_equal(data, [2, 3, 4])
        self.assertEqual(y.data_ptr, data.ctypes.data)
        self.assertTrue(np.shares_memory(np.from_dlpack(y), data))

    def test_legacy_and_versioned_producers(self):
        f = bias_relu()
        want = np.maximum(self.x + self.b, 0)
        old = Producer(self.x, versioned=False)   # rejects max_version: 0.6 capsule
        new = Producer(self.b, versioned=True)    # versioned capsule
        np.testing.assert_array_equal(f(old, new).numpy(), want)
        self.assertEqual(old.calls, [(1, 0), None])
        self.assertEqual(new.calls, [(1, 0)])
        gc.collect()
        self.assertEqual(dl.live_exports(), 0)  # both capsules were given back

    def test_versioned_and_legacy_export(self):
        y = bias_relu()(self.x, self.b)
        c1 = y.__dlpack__(max_version=(1, 0))
        self.assertIn('"dltensor_versioned"', repr(c1))
        m = dl.DLManagedTensorVersioned.from_address(dl._get_pointer(c1, dl.NAME_VERSIONED))
        self.assertEqual((m.version.major, m.version.minor), (1, 0))
        self.assertEqual(m.flags, 0)
        self.assertEqual(m.dl_tensor.data, y.data_ptr)
        c2 = y.__dlpack__()
        self.assertIn('"dltensor"', repr(c2))
        before = dl.live_exports()
        del c1, c2  # unconsumed: their destructors call the deleters
        gc.collect()
        self.assertEqual(dl.live_exports(), before - 2)
        # a kfuse output as input: the versioned path end to end
        z = bias_relu()(y, self.b)
        np.testing.assert_array_equal(z.numpy(), np.maximum(np.maximum(self.x + self.b, 0) + self.b, 0))

    def test_non_contiguous_and_broadcast_inputs(self):
        f = bias_relu()
        big = np.arange(48, dtype=np.float32).reshape(6, 8) - 20
        for x in (big[:, ::2], big[::2, 1::3], big.T[:, :5], big[1:4, 2:5]):
            got = f(x, np.ones(x.shape[1], np.float32)).numpy()
            np.testing.assert_array_equal(got, np.maximum(x + 1, 0))
        # a stride-0 (broadcast) view: read-only, so NumPy 1.x exports it
        # through __array_interface__, flagged read-only
        x = np.broadcast_to(np.array([[-1.0], [3.0]], np.float32), (2, 5))
        got = f(x, np.broadcast_to(np.float32(0.25), (5,))).numpy()
        np.testing.assert_array_equal(got, np.maximum(x + 0.25, 0))

    def test_scalars_and_layernorm(self):
        f = kfuse.Fusion.from_text(LAYERNORM)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 768)).astype(np.float32)
        w = rng.standard_normal(768).astype(np.float32)
        b = rng.standard_normal(768).astype(np.float32)
        y = f(x, w, b, 1e-5).numpy()
        x64 = x.astype(np.float64)
        ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * w + b
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
        # a 0-dim NumPy array works for a scalar too
        np.testing.assert_allclose(f(x, w, b, np.array(1e-5, np.float32)).numpy(), y)

    def test_8_bit_integer_scalars(self):
        # numbers for int8/uint8 scalar inputs keep their value (they were
        # stored as 1 for any nonzero number), wrapping like ctypes' types
        for dtype, value, want in (("int8", -7, -7), ("int8", 300, 44), ("uint8", 200, 200), ("uint8", -1, 255)):
            with self.subTest(dtype=dtype, value=value):
                f = kfuse.Fusion.from_text(f"input x: tensor<{dtype}, 1>\ninput s: scalar<{dtype}>\n"
                                           "y = add(x, s)\noutput y\n")
                np.testing.assert_array_equal(f(np.zeros(2, dtype), value).numpy(), [want, want])

    def test_bool_inputs_and_outputs(self):
        with kfuse.Definition() as fd:
            c = fd.tensor(rank=1, dtype=kfuse.bool_)
            a = fd.tensor(rank=1, dtype=kfuse.float32)
            fd.output(fd.where(c, a, -a))
            fd.output(a > 0.0)
        cond = np.array([True, False, True, False])
        a = np.array([1, -2, 3, 4], np.float32)
        y, pos = fd.fusion(cond, a)
        np.testing.assert_array_equal(y.numpy(), np.where(cond, a, -a))
        self.assertEqual(pos.dtype, kfuse.bool_)
        p = pos.numpy()
        self.assertEqual(p.dtype, np.bool_)
        np.testing.assert_array_equal(p, a > 0)
        self.assertEqual(p.ctypes.data, pos.data_ptr)  # no copy either

    def test_bfloat16_through_a_dlpack_producer(self):
        # NumPy has no bfloat16 and kfuse takes no uint16 for it: the bits go
        # through a producer that labels uint16 storage kDLBfloat.
        with kfuse.Definition() as fd:
            x = fd.tensor(rank=1, dtype=kfuse.bfloat16)
            fd.output(x * 2.0)
            fd.output(fd.cast(x, kfuse.float32))
        vals = np.array([1.5, -0.25, 3.0, 100.0], np.float32)
        bits = bf16_bits(vals)
        y, y32 = fd.fusion(Producer(bits, dtype=(dl.kDLBfloat, 16)))
        self.assertEqual(y.dtype, kfuse.bfloat16)
        np.testing.assert_array_equal(y.numpy(raw=True), bf16_bits(vals * 2))
        np.testing.assert_array_equal(y32.numpy(), vals)
        with self.assertRaises(TypeError):
            y.numpy()

    def test_float8_through_a_dlpack_producer(self):
        # float8 storage as uint8 bits labelled with DLPack 1.1's code:
        # e4m3fn 0x38 = 1.0, 0x40 = 2.0, 0xb0 = -0.5; x * 3 -> 3, 6, -1.5.
        with kfuse.Definition() as fd:
            x = fd.tensor(rank=1, dtype=kfuse.float8_e4m3fn)
            fd.output(x * 3.0)
            fd.output(fd.cast(x, kfuse.float32))
        bits = np.array([0x38, 0x40, 0xb0], np.uint8)
        y, y32 = fd.fusion(Producer(bits, dtype=(dl.kDLFloat8_e4m3fn, 8)))
        self.assertEqual(y.dtype, kfuse.float8_e4m3fn)
        np.testing.assert_array_equal(y.numpy(raw=True), np.array([0x44, 0x4c, 0xbc], np.uint8))
        np.testing.assert_array_equal(y32.numpy(), np.array([1.0, 2.0, -0.5], np.float32))

    def test_in_place_and_read_only(self):
        f = add_one_in_place()
        data = np.array([1.0, 2.0])
        data.flags.writeable = False
        with self.assertRaises(kfuse.KfuseError) as e:
            f(data)
        self.assertEqual(e.exception.status, kfuse.Status.INVALID_ARGUMENT)
        self.assertIn("is declared to alias input 0 (value 0), which is read-only", e.exception.message)
        np.testing.assert_array_equal(data, [1, 2])
        # the same through a versioned producer's read-only flag
        w = np.array([5.0])
        with self.assertRaises(kfuse.KfuseError):
            f(Producer(w, flags=dl.FLAG_READ_ONLY))
        self.assertEqual(w[0], 5)
        f(Producer(w, flags=0))
        self.assertEqual(w[0], 6)
        # read-only inputs that no output aliases are only read
        x = self.x.copy()
        x.flags.writeable = False
        np.testing.assert_array_equal(bias_relu()(x, self.b).numpy(), np.maximum(self.x + self.b, 0))

    def test_in_place_output_keeps_input_alive(self):
        f = add_one_in_place()
        p = Producer(np.array([1.0, 2.0]))
        y = f(p)
        ref = weakref.ref(p)
        del p
        gc.collect()
        self.assertIsNotNone(ref())  # y is a view of the producer's memory
        np.testing.assert_array_equal(y.numpy(), [2, 3])
        del y
        gc.collect()
        self.assertIsNone(ref())

    def test_out(self):
        f = bias_relu()
        out = np.empty((2, 3), np.float32)
        self.assertIs(f(self.x, self.b, out=out), out)
        np.testing.assert_array_equal(out, np.maximum(self.x + self.b, 0))
        t = np.zeros((3, 2), np.float32).T  # strided output
        f(self.x, self.b, out=[t])
        np.testing.assert_array_equal(t, np.maximum(self.x + self.b, 0))
        ro = np.zeros((2, 3), np.float32)
        ro.flags.writeable = False
        with self.assertRaises(kfuse.KfuseError) as e:
            f(self.x, self.b, out=ro)
        self.assertIn("output 0 (value 3) is read-only", str(e.exception))
        with self.assertRaises(kfuse.KfuseError) as e:
            f(self.x, self.b, out=np.empty((2, 4), np.float32))
        self.assertEqual(e.exception.status, kfuse.Status.SHAPE_MISMATCH)

    def test_errors_carry_status_and_message(self):
        f = bias_relu()
        cases = [
            ((np.zeros((2, 3, 1), np.float32), self.b), kfuse.Status.SHAPE_MISMATCH,
             "input 0 (value 0): expected rank 2, got rank 3"),
            ((self.x.astype(np.float64), self.b), kfuse.Status.DTYPE_MISMATCH,
             "input 0 (value 0): expected float32, got float64"),
            ((self.x,), kfuse.Status.INVALID_ARGUMENT, "expected 2 inputs, got 1"),
            ((self.x, np.zeros(4, np.float32)), kfuse.Status.SHAPE_MISMATCH, "broadcast"),
            ((self.x[:, ::-1], self.b), kfuse.Status.UNSUPPORTED, "negative strides"),
        ]
        for args, status, needle in cases:
            with self.subTest(needle=needle):
                with self.assertRaises(kfuse.KfuseError) as e:
                    f(*args)
                self.assertEqual(e.exception.status, status)
                self.assertIn(needle, e.exception.message)
                self.assertIn("KF_ERR_" + status.name, str(e.exception))
        with self.assertRaises(kfuse.KfuseError) as e:
            kfuse.Fusion.from_text("input x: tensor<float32, 2>\ny = relu(z)\noutput y\n")
        self.assertEqual(e.exception.status, kfuse.Status.PARSE)
        self.assertIn("line 2, column", e.exception.message)
        with self.assertRaises(TypeError):
            f("not a tensor", self.b)
        with self.assertRaises(BufferError):
            f(Producer(self.x, major=2), self.b)
        gc.collect()
        self.assertEqual(dl.live_exports(), 0)  # the rejected capsule was freed

    def test_errors_from_threads_keep_their_message(self):
        f = bias_relu()
        bad = [np.zeros((2, 3, 1), np.float32), self.x.astype(np.float64)]
        needles = ["expected rank 2, got rank 3", "expected float32, got float64"]
        wrong = []

        def run(k):
            for _ in range(300):
                try:
                    f(bad[k], self.b)
                except kfuse.KfuseError as e:
                    if needles[k] not in e.message:
                        wrong.append(e.message)
                y = f(self.x, self.b)
                if y.shape != (2, 3):
                    wrong.append("shape")
        threads = [threading.Thread(target=run, args=(i % 2,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(wrong, [])


class DefinitionTests(unittest.TestCase):
    def test_builder_mirrors_the_text_form(self):
        with kfuse.Definition() as fd:
            x = fd.tensor(rank=2, dtype=kfuse.float32)
            w = fd.tensor(rank=1, dtype=kfuse.float32)
            b = fd.tensor(rank=1, dtype=kfuse.float32)
            eps = fd.scalar(dtype=kfuse.float32)
            var, mean = fd.var_mean(x, axes=[1], correction=0, keepdim=True)
            fd.output((x - mean) * fd.rsqrt(var + eps) * w + b)
        f = fd.fusion
        # printing and parsing go through the definition cache: same handle
        g = kfuse.Fusion.from_text(f.text)
        self.assertEqual(f._h.value, g._h.value)
        self.assertEqual([i["rank"] for i in f.inputs], [2, 1, 1, 0])
        self.assertTrue(f.inputs[3]["is_scalar"])
        self.assertEqual(f.outputs[0]["dtype"], kfuse.float32)

    def test_shape_ops_and_reductions(self):
        with kfuse.Definition() as fd:
            x = fd.tensor(rank=2, dtype=kfuse.float64)
            fd.output(fd.sum(x, axes=1))
            fd.output(fd.permute(x, [1, 0]))
            fd.output(fd.reshape(x, [-1]))
            fd.output(fd.slice(x, 1, 1, None, 2))
            fd.output(fd.cat([x, x], dim=0))
            fd.output(fd.max(fd.unsqueeze(x, 0), axes=[0, 2], keepdim=True))
        x = np.arange(12.0).reshape(3, 4)
        s, p, r, sl, c, m = fd.fusion(x)
        np.testing.assert_array_equal(s.numpy(), x.sum(1))
        np.testing.assert_array_equal(p.numpy(), x.T)
        np.testing.assert_array_equal(r.numpy(), x.reshape(-1))
        np.testing.assert_array_equal(sl.numpy(), x[:, 1::2])
        np.testing.assert_array_equal(c.numpy(), np.concatenate([x, x]))
        np.testing.assert_array_equal(m.numpy(), x.max(1).reshape(1, 3, 1))

    def test_definition_errors(self):
        with self.assertRaises(kfuse.KfuseError) as e:
            with kfuse.Definition() as fd:
                x = fd.tensor(rank=2, dtype=kfuse.float32)
                fd.permute(x, [0, 0])
        self.assertEqual(e.exception.status, kfuse.Status.INVALID_ARGUMENT)
        self.assertIn("kf_builder_op(permute)", str(e.exception.call))
        with self.assertRaises(AttributeError):
            kfuse.Definition().no_such_op
        with self.assertRaises(TypeError):
            kfuse.Definition().tensor(rank=1, dtype="complex64")
        self.assertIn("gelu_tanh", kfuse.ops())

    def test_explain_and_segments(self):
        f = kfuse.Fusion.from_text(LAYERNORM)
        text = f.explain((16, 768), (768,), (768,), 1e-5)
        self.assertIn("== segments: 1 ==", text)
        self.assertIn("scheduler normalization", text)
        self.assertIn("schedule:   row", text)
        segs = f.segments((16, 768), (768,), (768,), 1e-5, cuda=True)
        self.assertEqual(len(segs), 1)
        self.assertIn("__global__", segs[0].cuda)  # generated without a GPU
        x = np.zeros((4, 8), np.float32)
        self.assertIn("sizes [>1, >1]", f.explain(x, np.zeros(8, np.float32), np.zeros(8, np.float32), 1e-5))

    def test_rows_follow_an_output_laid_out_across_them(self):
        # row_domain.cpp rows_in_output_order: the kept dims take the memory
        # order of an output whose innermost dim is a kept dim.
        f = kfuse.Fusion.from_text("input x: tensor<float32, 3>\nm = max(x) {axes=[2], keepdim=true}\n"
                                   "d = sub(x, m)\noutput d\n")
        x = np.zeros((4, 6, 33), np.float32)
        own = f.segments(x)[0].schedule
        self.assertTrue(own.startswith("row ") and "order=" not in own, own)  # the logical walk
        # An output across the rows (memory order [1, 2, 0]) is copied in
        # (layout.cpp crosses_rows): the rows keep the logical walk.
        batch_inner = np.zeros((6, 33, 4), np.float32).transpose(2, 0, 1)
        self.assertNotIn("order=", f.segments(x, out=[batch_inner])[0].schedule)
        self.assertIn("copied into the caller's layout", f.explain(x, out=[batch_inner]))
        rows_inner = np.zeros((4, 33, 6), np.float32).transpose(0, 2, 1)    # [0, 2, 1]: rows already in order
        self.assertNotIn("order=", f.segments(x, out=[rows_inner])[0].schedule)

    def test_outputs_across_rows_are_copied_in(self):
        # A row reduction's output the caller lays out across the rows is
        # produced in its own layout and copied in (layout.cpp crosses_rows);
        # a pointwise output in the same layout is written where it is.
        f = kfuse.Fusion.from_text("input x: tensor<float32, 2>\nm = max(x) {axes=[1], keepdim=true}\n"
                                   "d = sub(x, m)\ne = exp(d)\ns = sum(e) {axes=[1], keepdim=true}\n"
                                   "y = div(e, s)\noutput y\noutput d\n")
        x = np.random.default_rng(0).standard_normal((37, 53)).astype(np.float32)
        y, d = np.zeros((53, 37), np.float32).T, np.zeros((53, 37), np.float32).T
        text = f.explain(x, out=[y, d])
        self.assertIn("output 0: value 5, layout [0, 1], copied into the caller's layout [1, 0]", text)
        self.assertIn("output 1: value 2, layout [0, 1], copied into the caller's layout [1, 0]", text)
        f(x, out=[y, d])
        ref = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(y, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(d, x - x.max(1, keepdims=True))
        g = kfuse.Fusion.from_text("input a: tensor<float32, 2>\nb = exp(a)\noutput b\n")
        self.assertNotIn("copied into", g.explain(x, out=[np.zeros((53, 37), np.float32).T]))

    def test_column_reduction_outputs_across_columns_are_copied_in(self):
        # A column reduction writes along its input's innermost dim: an output
        # (or a value computed from one at its dims) the caller lays out
        # along another is produced in kfuse's layout and copied in
        # (layout.cpp crosses_rows); a row reduction's results are not.
        f = kfuse.Fusion.from_text("input x: tensor<float32, 3>\na = abs(x)\n"
                                   "s = sum(a) {axes=[0], keepdim=false}\nm = max(a) {axes=[0], keepdim=false}\n"
                                   "h = mul(m, m)\noutput s\noutput h\n")
        x = np.random.default_rng(3).standard_normal((3, 29, 41)).astype(np.float32)
        s, h = np.zeros((29, 41), np.float32), np.zeros((41, 29), np.float32).T
        text = f.explain(x, out=[s, h])
        self.assertEqual(text.count("copied into"), 1, text)
        self.assertIn("copied into the caller's layout [1, 0]", text)
        f(x, out=[s, h])
        np.testing.assert_allclose(s, np.abs(x).sum(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(h, np.abs(x).max(0) ** 2, rtol=1e-6)
        g = kfuse.Fusion.from_text("input x: tensor<float32, 3>\nm = max(x) {axes=[2], keepdim=false}\noutput m\n")
        self.assertNotIn("copied into", g.explain(x, out=[np.zeros((29, 3), np.float32).T]))

    def test_outputs_across_rows_edge_cases(self):
        sm = ("input x: tensor<float32, 2>\nm = max(x) {axes=[1], keepdim=true}\nd = sub(x, m)\n"
              "e = exp(d)\ns = sum(e) {axes=[1], keepdim=true}\ny = div(e, s)\n")
        x = np.random.default_rng(1).standard_normal((37, 53)).astype(np.float32)
        ref = np.exp(x - x.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        # The copied output also feeds a later reduction, itself an output.
        f = kfuse.Fusion.from_text(sm + "z = sum(y) {axes=[0], keepdim=false}\noutput y\noutput z\n")
        y, z = np.zeros((53, 37), np.float32).T, np.zeros(53, np.float32)
        self.assertEqual(f.explain(x, out=[y, z]).count("copied into"), 1)
        f(x, out=[y, z])
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(z, ref.sum(0), rtol=1e-5, atol=1e-6)
        # One value given twice: the first output decides, the second is a copy.
        f = kfuse.Fusion.from_text(sm + "output y\noutput y\n")
        for first_crosses in (True, False):
            cross, plain = np.zeros((53, 37), np.float32).T, np.zeros((37, 53), np.float32)
            outs = [cross, plain] if first_crosses else [plain, cross]
            self.assertEqual(f.explain(x, out=outs).count("copied into"), 1 if first_crosses else 0)
            f(x, out=outs)
            for o in outs:
                np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-7)
        # Rank 3 into [1, 2, 0] (the batch dim innermost).
        x3 = np.random.default_rng(2).standard_normal((4, 6, 33)).astype(np.float32)
        f = kfuse.Fusion.from_text("input x: tensor<float32, 3>\nm = max(x) {axes=[2], keepdim=true}\n"
                                   "d = sub(x, m)\noutput d\n")
        d = np.zeros((6, 33, 4), np.float32).transpose(2, 0, 1)
        self.assertEqual(f.explain(x3, out=[d]).count("copied into"), 1)
        f(x3, out=[d])
        np.testing.assert_array_equal(d, x3 - x3.max(2, keepdims=True))

    def test_segments_into_caller_outputs(self):
        # out=: the plan for outputs the caller allocates (kf_concretize_into).
        f = kfuse.Fusion.from_text("input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\n"
                                   "c = add(a, b)\noutput c\n")
        x = np.zeros((8, 6), np.float32).T  # column-major
        own = f.segments(x, x)[0].schedule
        into = f.segments(x, x, out=[np.zeros((6, 8), np.float32)])[0].schedule
        self.assertTrue(own.startswith("pointwise"), own)  # kfuse's output follows x
        self.assertTrue(into.startswith("tiled"), into)    # a row-major output: tiles
        self.assertIn("output 0: value 2, layout [0, 1]", f.explain(x, x, out=[np.zeros((6, 8), np.float32)]))
        with self.assertRaises(kfuse.KfuseError):  # a wrong shape is the C library's error
            f.segments(x, x, out=[np.zeros((8, 6), np.float32)])

    def test_prepare_and_is_ready(self):
        # kf_fusion_prepare / kf_fusion_is_ready: per shape class and output layout.
        f = kfuse.Fusion.from_text("input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\n"
                                   "c = add(a, b)\nd = sum(c) {axes=[1], keepdim=true}\noutput d\n")
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        self.assertFalse(f.is_ready(x, x))
        self.assertIsNone(f.prepare(x, x))
        self.assertTrue(f.is_ready(x, x))
        self.assertFalse(f.is_ready(x[:1], x[:1]))  # another class: a dim of size 1
        out = np.zeros((3, 1), np.float32)
        self.assertTrue(f.is_ready(x, x, out=[out]))  # kfuse's own layout
        f(x, x, out=[out])
        np.testing.assert_array_equal(out, (2 * x).sum(1, keepdims=True))
        with self.assertRaises(kfuse.KfuseError):
            f.is_ready(x, x, out=[np.zeros((4, 1), np.float32)])


class ExampleFusionTests(unittest.TestCase):
    """The two fusions of examples/python/torch_layernorm.py (which needs
    torch and a GPU to run whole) against NumPy on the CPU backend."""

    def test_layernorm_forward_and_backward(self):
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, "..", "..", "..", "examples", "python", "torch_layernorm.py")
        if not os.path.exists(path):
            self.skipTest("examples/python not next to this test (installed copy)")
        import importlib.util
        spec = importlib.util.spec_from_file_location("torch_layernorm", path)
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)  # imports no torch at module level
        rng = np.random.default_rng(1)
        x = rng.standard_normal((16, 96)).astype(np.float32)
        w = rng.standard_normal(96).astype(np.float32)
        b = rng.standard_normal(96).astype(np.float32)
        dy = rng.standard_normal((16, 96)).astype(np.float32)
        y, mean, rstd = example.forward_fusion()(x, w, b, 1e-5)
        x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
        mu = x64.mean(1, keepdims=True)
        rs = 1 / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
        xhat = (x64 - mu) * rs
        np.testing.assert_allclose(y.numpy(), xhat * w + b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(mean.numpy(), mu, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rstd.numpy(), rs, rtol=1e-4)
        dx, dw, db = example.backward_fusion()(dy, x, w, mean, rstd)
        # reference gradients of sum(y * dy), derived independently by
        # central differences on a few entries plus the closed form
        g = dy64 * w64
        ref_dx = rs * (g - g.mean(1, keepdims=True) - xhat * (g * xhat).mean(1, keepdims=True))
        np.testing.assert_allclose(dx.numpy(), ref_dx, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(dw.numpy(), (dy64 * xhat).sum(0), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(db.numpy(), dy64.sum(0), rtol=1e-5, atol=1e-5)

        def loss(xv):
            m = xv.mean(1, keepdims=True)
            return ((xv - m) / np.sqrt(xv.var(1, keepdims=True) + 1e-5) * w64 * dy64).sum()
        h = 1e-6
        for (i, j) in ((0, 0), (3, 17), (15, 95)):
            xp, xm = x64.copy(), x64.copy()
            xp[i, j] += h
            xm[i, j] -= h
            self.assertAlmostEqual(dx.numpy()[i, j], (loss(xp) - loss(xm)) / (2 * h), places=3)


class ArgReductionTests(unittest.TestCase):
    def test_argmax_argmin_match_numpy(self):
        rng = np.random.default_rng(3)
        x = rng.integers(-3, 3, size=(7, 9)).astype(np.float32)  # many ties: the first index wins
        with kfuse.Definition() as fd:
            t = fd.tensor(rank=2, dtype=kfuse.float32)
            fd.output(fd.argmax(t, 1))
            fd.output(fd.argmin(t, 0, keepdim=True))
        i, j = fd.fusion(x)
        np.testing.assert_array_equal(i.numpy(), np.argmax(x, axis=1))
        np.testing.assert_array_equal(j.numpy(), np.argmin(x, axis=0)[None, :])


class ScatterTests(unittest.TestCase):
    def test_scatter_family_matches_numpy(self):
        rng = np.random.default_rng(5)
        x = rng.standard_normal((4, 6)).astype(np.float32)
        idx = rng.integers(0, 6, size=(4, 5)).astype(np.int64)
        src = rng.standard_normal((4, 5)).astype(np.float32)
        rows = np.array([2, 0, 2, 3, 2], dtype=np.int64)
        g = rng.standard_normal((5, 6)).astype(np.float32)
        with kfuse.Definition() as fd:
            tx = fd.tensor(rank=2, dtype=kfuse.float32)
            ti = fd.tensor(rank=2, dtype=kfuse.int64)
            ts = fd.tensor(rank=2, dtype=kfuse.float32)
            tr = fd.tensor(rank=1, dtype=kfuse.int64)
            tg = fd.tensor(rank=2, dtype=kfuse.float32)
            fd.output(fd.scatter_add(tx, 1, ti, ts))
            fd.output(fd.scatter(tx, 1, ti, ts, reduce="amax", include_self=False))
            fd.output(fd.index_add(tx, 0, tr, tg, deterministic=True))
            fd.output(fd.index_put(tx, tr, 7.0, accumulate=False))
        add, amax, iadd, put = fd.fusion(x, idx, src, rows, g)
        want = x.astype(np.float64).copy()
        np.add.at(want, (np.arange(4)[:, None], idx), src)
        np.testing.assert_allclose(add.numpy(), want, rtol=1e-6, atol=1e-6)
        want = x.copy()
        seen = np.zeros_like(x, dtype=bool)
        for r in range(4):
            for c in range(5):
                j = idx[r, c]
                want[r, j] = src[r, c] if not seen[r, j] else max(want[r, j], src[r, c])
                seen[r, j] = True
        np.testing.assert_array_equal(amax.numpy(), want)
        want = x.astype(np.float64).copy()
        np.add.at(want, rows, g)
        np.testing.assert_allclose(iadd.numpy(), want, rtol=1e-6, atol=1e-6)
        want = x.copy()
        want[[0, 2, 3]] = 7.0
        np.testing.assert_array_equal(put.numpy(), want)
        with self.assertRaises(ValueError):
            with kfuse.Definition() as fd:
                t = fd.tensor(rank=1, dtype=kfuse.float32)
                fd.scatter(t, 0, t, t, reduce="median")

    def test_scans_match_numpy(self):
        x = np.random.default_rng(9).standard_normal((3, 7)).astype(np.float64)
        with kfuse.Definition() as fd:
            t = fd.tensor(rank=2, dtype=kfuse.float64)
            fd.output(fd.cumsum(t, 1))
            fd.output(fd.cumprod(t, 0, exclusive=True))
            fd.output(fd.cummax(t, -1))
        s, p, m = fd.fusion(x)
        np.testing.assert_allclose(s.numpy(), np.cumsum(x, axis=1))
        want = np.concatenate([np.ones((1, 7)), np.cumprod(x, axis=0)[:-1]])
        np.testing.assert_allclose(p.numpy(), want)
        np.testing.assert_array_equal(m.numpy(), np.maximum.accumulate(x, axis=1))


class MeshTests(unittest.TestCase):
    def test_sharded_layernorm_on_local_ranks(self):
        """A layernorm over a hidden dim sharded over 2 ranks (threads with
        local communicators) equals the unsharded one, block by block."""
        import threading
        from fusions import LAYERNORM
        rng = np.random.default_rng(7)
        x = rng.standard_normal((6, 32)).astype(np.float32)
        w = rng.standard_normal(32).astype(np.float32)
        b = rng.standard_normal(32).astype(np.float32)
        want = kfuse.Fusion.from_text(LAYERNORM)(x, w, b, 1e-5).numpy()
        f = kfuse.Fusion.from_text("mesh 2\n" + LAYERNORM + "shard x {dim=1}\nshard w {dim=0}\nshard b {dim=0}\n")
        self.assertEqual(f.mesh, 2)
        self.assertEqual(f.output_sharding(0), 1)
        comms = kfuse.Communicator.local(2)
        self.assertEqual([c.rank for c in comms], [0, 1])
        self.assertEqual(comms[1].size, 2)
        got = [None, None]

        def rank(r):
            cols = slice(16 * r, 16 * (r + 1))
            got[r] = f(np.ascontiguousarray(x[:, cols]), w[cols], b[cols], 1e-5, communicator=comms[r]).numpy()

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        np.testing.assert_allclose(np.concatenate(got, axis=1), want, rtol=1e-5, atol=1e-5)
        with self.assertRaises(kfuse.KfuseError) as e:
            f(x[:, :16], w[:16], b[:16], 1e-5)  # no communicator
        self.assertEqual(e.exception.status, kfuse.Status.INVALID_ARGUMENT)
        self.assertIn("communicator", e.exception.message)
        for c in comms:
            c.close()

    def test_builder_mesh_matches_the_text(self):
        with kfuse.Definition() as fd:
            x = fd.tensor(rank=2, dtype=kfuse.float32)
            fd.mesh(2)
            fd.shard(x, -1)
            y = fd.neg(x)
            fd.output(y)
            fd.replicate(y)
        self.assertIn("mesh 2", fd.fusion.text)
        self.assertEqual(fd.fusion.output_sharding(0), -1)
        with self.assertRaises(kfuse.KfuseError) as e:
            with kfuse.Definition() as bad:
                bad.shard(bad.tensor(rank=1), 0)
        self.assertIn("no mesh", e.exception.message)


class LifetimeTests(unittest.TestCase):
    def test_context_managers_and_close(self):
        with bias_relu() as f:
            with f(np.ones((2, 3), np.float32), np.ones(3, np.float32)) as y:
                self.assertEqual(y.shape, (2, 3))
            self.assertIn("closed", repr(y))
            with self.assertRaises(ValueError):
                y.shape
        f.close()  # idempotent
        with self.assertRaises(ValueError):
            f(np.ones((2, 3), np.float32), np.ones(3, np.float32))

    def test_gc_releases_outputs_after_their_consumers(self):
        y = bias_relu()(np.ones((2, 3), np.float32), np.ones(3, np.float32))
        owner = weakref.ref(y._owner)
        a = np.from_dlpack(y)
        del y
        gc.collect()
        self.assertIsNotNone(owner())  # NumPy still holds the memory
        self.assertEqual(a.sum(), 12)
        del a
        gc.collect()
        self.assertIsNone(owner())  # kfuse's deleter ran
        self.assertEqual(dl.live_exports(), 0)

    def test_no_growth_over_many_calls(self):
        f = bias_relu()
        x, b = np.ones((64, 64), np.float32), np.ones(64, np.float32)
        bad = np.ones((64, 64, 1), np.float32)

        def cycle(n):
            for _ in range(n):
                np.from_dlpack(f(x, b)).sum()
                with kfuse.Definition() as fd:
                    t = fd.tensor(rank=2, dtype=kfuse.float32)
                    fd.output(fd.exp(t))
                fd.fusion(x).close()
                try:
                    f(bad, b)
                except kfuse.KfuseError:
                    pass
        cycle(500)
        gc.collect()
        before = rss_kb()
        cycle(5000)
        gc.collect()
        grown = rss_kb() - before
        self.assertLess(grown, 16 * 1024, f"VmRSS grew by {grown} kB over 5000 cycles")
        self.assertEqual(dl.live_exports(), 0)


if __name__ == "__main__":
    print("kfuse from", kfuse.library_path(), "; extension", kfuse.extension_status(), "; numpy", np.__version__,
          "; python", sys.version.split()[0])
    unittest.main(verbosity=2)
