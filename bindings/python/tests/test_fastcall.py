"""Tests of the C extension kfuse._fastcall against the ctypes path.

Every case runs one fusion twice in the same process: through the
extension (``fusion._fast.run``, asserted to take the call itself) and
through a twin of the fusion without it (the ctypes code that
KFUSE_PYTHON_EXTENSION=0 runs); results must be the same bits, errors the
same type, status, message and call. Then the extension's own edges:
number conversion per dtype, argument counts, non-contiguous and stride-0
inputs, the helpers it hands unusual arguments to, in-place outputs,
more than 8 inputs and outputs, reference counts and memory over 10000
calls. A stand-in for torch (installed as sys.modules["torch"]: the
attributes the torch bridge reads, over NumPy memory on the CPU) runs the
torch mode here; tests/test_gpu_torch.py runs the real one on a GPU.

Run: KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python KFUSE_PYTHON_EXTENSION=1 \\
       python3 bindings/python/tests/test_fastcall.py
Exits 77 (skipped) without NumPy or without the extension (unless
KFUSE_PYTHON_EXTENSION=1, which makes a missing one a failure).
"""
import enum
import gc
import math
import os
import subprocess
import sys
import tracemalloc
import types
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
from test_kfuse import Producer, add_one_in_place, bias_relu, rss_kb  # noqa: E402

if not kfuse.extension_loaded():
    print("SKIP: the C extension is not loaded:", kfuse.extension_status())
    sys.exit(77)


# ---------------------------------------------------------------------------
# a stand-in for torch: what _core._TorchBridge reads, over NumPy memory

class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


class Size(tuple):  # torch.Size is a tuple subclass
    pass


class FakeTensor:
    """A CPU 'torch.Tensor' over a NumPy array (kept alive by it)."""

    def __init__(self, array, requires_grad=False):
        self.array = array
        self.requires_grad = requires_grad
        self.dtype = DTYPES[array.dtype.name]
        self.is_cuda = False
        self.is_cpu = True
        self.shape = Size(array.shape)
        self.dlpack_calls = 0

    def data_ptr(self):
        return self.array.ctypes.data

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def dim(self):
        return self.array.ndim

    def get_device(self):
        return -1

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.dlpack_calls += 1
        if self.requires_grad:  # what torch's own export says
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        return Producer(self.array).__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (dl.kDLCPU, 0)


class FakeParameter(FakeTensor):
    pass


DTYPES = {n: FakeDtype(n) for n in ("float64", "float32", "float16", "int64", "int32", "bool", "int8", "uint8")}
torch = types.ModuleType("torch")
torch.Tensor = FakeTensor
torch.nn = types.SimpleNamespace(Parameter=FakeParameter)
torch._C = types.SimpleNamespace()  # no _cuda_getCurrentRawStream: CPU tensors only
torch.bfloat16 = FakeDtype("bfloat16")
for _name, _dtype in DTYPES.items():
    setattr(torch, _name, _dtype)
sys.modules["torch"] = torch


# ---------------------------------------------------------------------------
# the two paths

def ctypes_twin(f):
    """The same fusion (one handle, from the definition cache) without the extension."""
    g = kfuse.Fusion.from_text(f.text)
    g._fast = None
    return g


def outcome(fn):
    """What a call gives: its outputs as NumPy copies (bits), or its error."""
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 (the error is the result)
        return ("error", type(e), str(e), getattr(e, "status", None), getattr(e, "message", None),
                getattr(e, "call", None))
    outs = r if isinstance(r, tuple) else (r,)
    return ("ok", isinstance(r, tuple),
            [(o.shape, o.strides, o.dtype, o.device, o.numpy(raw=True).tobytes()) for o in outs])


def assert_output_keeps(test, f, arg):
    """f(arg)'s in-place output keeps arg alive, and only as long as it lives."""
    y = f(arg)
    ref = weakref.ref(arg)
    del arg
    gc.collect()
    test.assertIsNotNone(ref())
    np.testing.assert_array_equal(y.numpy(), [2, 3])
    del y
    gc.collect()
    test.assertIsNone(ref())


class Paths(unittest.TestCase):
    def same(self, f, *args, make=None):
        """f(*args) through C and through ctypes give the same outcome;
        ``make`` builds fresh arguments for each (in-place updates)."""
        g = ctypes_twin(f)
        c_args = make() if make else args
        py_args = make() if make else args

        def through_c():
            r = f._fast.run(tuple(c_args))
            self.assertIsNotNone(r, "the extension handed the call to the Python path")
            return r
        c, py = outcome(through_c), outcome(lambda: g(*py_args))
        self.assertEqual(c, py)
        return c


def scalar_fusion(dtype):
    op = "logical_or" if dtype == "bool" else "add"
    return kfuse.Fusion.from_text(f"input x: tensor<{dtype}, 1>\ninput s: scalar<{dtype}>\n"
                                  f"y = {op}(x, s)\noutput y\n")


class Color(enum.IntEnum):
    RED = 3


class MyFloat(float):
    def __float__(self):
        return 2.5


class SameResultsTests(Paths):
    def setUp(self):
        self.x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        self.b = np.full(3, 0.5, np.float32)

    def test_values_and_layernorm(self):
        self.same(bias_relu(), self.x, self.b)
        f = kfuse.Fusion.from_text(LAYERNORM)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 768)).astype(np.float32)
        w, b = rng.standard_normal(768).astype(np.float32), rng.standard_normal(768).astype(np.float32)
        self.same(f, x, w, b, 1e-5)
        self.same(f, x, w, b, np.array(1e-5, np.float32))  # a 0-dim array for the scalar

    def test_numbers_for_scalar_inputs(self):
        cases = {
            "float64": [0.0, -0.0, 1e-300, 1e300, math.inf, math.nan, 3, True, 2 ** 80, 10 ** 400,
                        Color.RED, MyFloat(1.0), np.float64(0.25)],
            "float32": [1e-5, 1e40, -1e-46, math.nan, 7, False, 2 ** 80, 10 ** 400, MyFloat(9.0)],
            "float16": [1.0, 65504.0, 1e5, 1e-8, 3],
            "bfloat16": [1.0, 3.14159, 1e39, math.nan, 5],
            "int64": [5, -1, 2 ** 63 + 5, -(2 ** 70) - 3, 3.7, -3.7, True, math.inf, math.nan, 1e30, Color.RED],
            "int32": [5, -1, 2 ** 40 + 7, 2 ** 31, 3.9, math.inf, 1e30],
            "int8": [5, -3, 300, -129, 2.9, True],
            "uint8": [5, 255, 256, -1, 7.5],
            "bool": [0, 1, 2, 0.0, 0.5, math.nan, True, False],
        }
        for dtype, values in cases.items():
            f = scalar_fusion(dtype)
            zeros = np.zeros(2, np.uint16) if dtype == "bfloat16" else np.zeros(2, dtype)
            arg = Producer(zeros, dtype=(dl.kDLBfloat, 16)) if dtype == "bfloat16" else zeros
            for v in values:
                with self.subTest(dtype=dtype, value=v):
                    self.same(f, arg, v)

    def test_layouts(self):
        f = bias_relu()
        big = np.arange(48, dtype=np.float32).reshape(6, 8) - 20
        for x in (big[:, ::2], big[::2, 1::3], big.T[:, :5], big[1:4, 2:5], np.asfortranarray(big)):
            self.same(f, x, np.ones(x.shape[1], np.float32))
        # stride 0: NumPy 1.x exports these read-only views through the
        # array interface (the extension hands them to the Python helper)
        x = np.broadcast_to(np.array([[-1.0], [3.0]], np.float32), (2, 5))
        self.same(f, x, np.broadcast_to(np.float32(0.25), (5,)))
        self.same(f, Producer(x), Producer(np.broadcast_to(np.float32(0.25), (5,))))
        self.same(f, self.x[:, ::-1], self.b)  # negative strides: kfuse's error
        self.same(f, np.zeros((0, 3), np.float32), self.b)

    def test_bool_and_bfloat16(self):
        with kfuse.Definition() as fd:
            c = fd.tensor(rank=1, dtype=kfuse.bool_)
            a = fd.tensor(rank=1, dtype=kfuse.float32)
            fd.output(fd.where(c, a, -a))
            fd.output(a > 0.0)
        self.same(fd.fusion, np.array([True, False, True]), np.array([1, -2, 3], np.float32))
        with kfuse.Definition() as fd:
            x = fd.tensor(rank=1, dtype=kfuse.bfloat16)
            fd.output(x * 2.0)
        self.same(fd.fusion, Producer(np.array([0x3FC0, 0xBE80], np.uint16), dtype=(dl.kDLBfloat, 16)))

    def test_errors(self):
        f = bias_relu()
        for args in [
            (np.zeros((2, 3, 1), np.float32), self.b),   # rank
            (self.x.astype(np.float64), self.b),          # dtype
            (self.x,),                                     # too few
            (),
            (self.x, self.b, self.b),                      # too many
            (self.x, self.b, 1.0),                         # a number past the inputs
            (self.x, np.zeros(4, np.float32)),            # broadcast
            ("not a tensor", self.b),
            (self.x, None),
            (1.5, self.b),                                 # a number for a tensor input
            (Producer(self.x, major=2), self.b),          # DLPack 2.x
        ]:
            with self.subTest(args=[type(a).__name__ for a in args]):
                r = self.same(f, *args)
                self.assertEqual(r[0], "error")
        gc.collect()
        self.assertEqual(dl.live_exports(), 0)  # rejected and released capsules are all freed

    def test_producers(self):
        f = bias_relu()
        old_c, new_c = Producer(self.x, versioned=False), Producer(self.b)
        old_py, new_py = Producer(self.x, versioned=False), Producer(self.b)
        g = ctypes_twin(f)
        np.testing.assert_array_equal(f._fast.run((old_c, new_c)).numpy(), g(old_py, new_py).numpy())
        self.assertEqual(old_c.calls, old_py.calls)  # [(1, 0), None]: asked with max_version, then without
        self.assertEqual(new_c.calls, new_py.calls)
        ro = self.x.copy()
        ro.flags.writeable = False
        self.same(f, ro, self.b)
        self.same(f, Producer(self.x, flags=dl.FLAG_READ_ONLY), self.b)
        y = f(self.x, self.b)
        self.same(f, y, self.b)  # a kfuse output as input
        gc.collect()
        self.assertEqual(dl.live_exports(), 0)

    def test_in_place(self):
        f = add_one_in_place()
        self.same(f, make=lambda: [np.array([1.0, 2.0])])
        ro = lambda: [np.array([1.0, 2.0])]  # noqa: E731

        def read_only():
            a = ro()[0]
            a.flags.writeable = False
            return [a]
        self.same(f, make=read_only)
        self.same(f, make=lambda: [Producer(np.array([5.0]), flags=dl.FLAG_READ_ONLY)])
        self.same(f, make=lambda: [Producer(np.array([5.0]), versioned=False)])

    def test_many_inputs_and_outputs(self):
        # more than the 8 arguments and outputs kept on the C stack
        n = 11
        text = "".join(f"input x{i}: tensor<float32, 1>\n" for i in range(n))
        text += "s0 = add(x0, x1)\n" + "".join(f"s{i} = add(s{i - 1}, x{i + 1})\n" for i in range(1, n - 1))
        text += "".join(f"output s{i}\n" for i in range(n - 1))
        f = kfuse.Fusion.from_text(text)
        xs = [np.full(3, i, np.float32) for i in range(n)]
        r = self.same(f, *xs)
        self.assertEqual(len(r[2]), n - 1)
        self.same(f, *xs[:-1])
        self.same(f, *xs, *xs)


class ExtensionTests(unittest.TestCase):
    def setUp(self):
        self.x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        self.b = np.full(3, 0.5, np.float32)

    def test_calls_take_the_c_path(self):
        f = bias_relu()
        self.assertTrue(kfuse.extension_loaded())
        self.assertIn("_fastcall", kfuse.extension_path())
        self.assertIsNotNone(f._fast.run((self.x, self.b)))
        self.assertIsInstance(f(self.x, self.b)._owner, kfuse._fastcall.Owner)
        # out=, stream= and communicator= stay with the Python path
        out = np.empty((2, 3), np.float32)
        self.assertIs(f(self.x, self.b, out=out), out)
        self.assertNotIsInstance(f(self.x, self.b, stream=0)._owner, kfuse._fastcall.Owner)

    def test_zero_copy_output(self):
        y = bias_relu()(self.x, self.b)
        a = np.from_dlpack(y)
        self.assertEqual(a.ctypes.data, y.data_ptr)
        self.assertTrue(np.shares_memory(a, np.from_dlpack(y)))
        np.testing.assert_array_equal(a, np.maximum(self.x + self.b, 0))
        owner = weakref.ref(y._owner)
        del y
        self.assertIsNotNone(owner())  # NumPy holds the memory
        del a
        gc.collect()
        self.assertIsNone(owner())
        self.assertEqual(dl.live_exports(), 0)

    def test_outputs_go_without_the_garbage_collector(self):
        y = bias_relu()(self.x, self.b)
        self.assertEqual(sys.getrefcount(y._owner), 2)  # the Tensor's slot (and the argument)
        owner = weakref.ref(y._owner)
        gc.disable()
        try:
            del y
            self.assertIsNone(owner())  # no cycle: freed by reference counting
        finally:
            gc.enable()

    def test_in_place_output_keeps_its_input(self):
        f = add_one_in_place()
        self.assertIsInstance(f(Producer(np.array([1.0])))._owner, kfuse._fastcall.Owner)
        assert_output_keeps(self, f, Producer(np.array([1.0, 2.0])))
        self.assertEqual(dl.live_exports(), 0)
        a = np.array([1.0])
        y = f(a)
        self.assertEqual(y.data_ptr, a.ctypes.data)
        np.testing.assert_array_equal(a, [2.0])

    def test_closed_fusion(self):
        f = bias_relu()
        caller = f._fast
        f.close()
        self.assertIsNone(caller.run((self.x, self.b)))  # handed to the Python path, which raises
        with self.assertRaises(ValueError) as e:
            f(self.x, self.b)
        self.assertIn("closed", str(e.exception))

    def test_reference_counts_do_not_move(self):
        f = bias_relu()
        eps = 1e-5 * 3  # a float object of its own
        ln = kfuse.Fusion.from_text(LAYERNORM)
        x, b = self.x.copy(), self.b.copy()
        xt, bt = FakeTensor(x.copy()), FakeTensor(b.copy())
        w16 = np.ones(16, np.float32)
        bad = np.zeros((2, 3, 1), np.float32)
        objs = [f, ln, x, b, xt, bt, eps, w16, bad, xt.array]

        def calls(n):
            for _ in range(n):
                f(x, b)
                f(xt, bt)
                f(xt, b)  # mixed: DLPack mode
                ln(np.zeros((4, 16), np.float32), w16, w16, eps)
                for args in ((bad, b), (x,), (xt, FakeTensor(b.astype(np.float64)))):
                    try:
                        f(*args)
                    except kfuse.KfuseError:
                        pass
                try:
                    f("no", b)
                except TypeError:
                    pass
        calls(1)
        before = [sys.getrefcount(o) for o in objs]
        calls(1000)
        after = [sys.getrefcount(o) for o in objs]
        self.assertEqual(before, after)

    def test_memory_is_flat_over_10000_calls(self):
        f = bias_relu()
        ln = kfuse.Fusion.from_text(LAYERNORM)
        x, b = self.x, self.b
        xt, bt = FakeTensor(x.copy()), FakeTensor(b.copy())
        bad = np.zeros((2, 3, 1), np.float32)
        w = np.ones(8, np.float32)
        z = np.zeros((4, 8), np.float32)
        ro = np.broadcast_to(np.float32(1), (2, 3))
        inplace = add_one_in_place()
        d = np.zeros(4)

        def cycle(n):
            for _ in range(n):
                np.from_dlpack(f(x, b))
                f(xt, bt)
                ln(z, w, w, 1e-5)
                f(ro, b)
                inplace(d)
                inplace(Producer(d))
                try:
                    f(bad, b)
                except kfuse.KfuseError:
                    pass
                try:
                    f(Producer(x, major=2), b)
                except BufferError:
                    pass
        cycle(1000)
        gc.collect()
        tracemalloc.start()
        rss = rss_kb()
        snap = tracemalloc.take_snapshot()
        cycle(10000)
        gc.collect()
        grown_kb = rss_kb() - rss
        growth = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap, "filename"))
        tracemalloc.stop()
        self.assertLess(growth, 64 * 1024, f"Python allocations grew by {growth} bytes over 10000 cycles")
        self.assertLess(grown_kb, 8 * 1024, f"VmRSS grew by {grown_kb} kB over 10000 cycles")
        self.assertEqual(dl.live_exports(), 0)

    def test_off_switch(self):
        code = ("import kfuse, numpy as np; from test_kfuse import bias_relu; f = bias_relu(); "
                "y = f(np.ones((2, 3), np.float32), np.ones(3, np.float32)); "
                "print(kfuse.extension_loaded(), f._fast, type(y._owner).__name__, kfuse.extension_status())")
        env = dict(os.environ, KFUSE_PYTHON_EXTENSION="0")
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), env.get("PYTHONPATH", "")])
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "False None _Owner turned off (KFUSE_PYTHON_EXTENSION=0)")


class FakeTorchTests(Paths):
    """The torch mode (the Python path's _call_torch) on CPU tensors."""

    def setUp(self):
        self.x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        self.b = np.full(3, 0.5, np.float32)

    def test_values_layouts_and_parameters(self):
        f = bias_relu()
        self.same(f, FakeTensor(self.x), FakeTensor(self.b))
        big = np.arange(48, dtype=np.float32).reshape(6, 8) - 20
        for x in (big[:, ::2], big.T[:, :5], np.broadcast_to(self.b, (4, 3))):
            self.same(f, FakeTensor(x), FakeParameter(np.ones(x.shape[1], np.float32)))
        ln = kfuse.Fusion.from_text(LAYERNORM)
        x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
        w = np.ones(16, np.float32)
        self.same(ln, FakeTensor(x), FakeTensor(w), FakeTensor(w * 0), 1e-5)
        self.same(ln, FakeTensor(x), FakeTensor(w), FakeTensor(w * 0), FakeTensor(np.array(1e-5, np.float32)))

    def test_torch_mode_reads_no_dlpack(self):
        f = bias_relu()
        xt, bt = FakeTensor(self.x), FakeTensor(self.b)
        y = f(xt, bt)
        self.assertEqual((xt.dlpack_calls, bt.dlpack_calls), (0, 0))
        self.assertIsNone(y._stream)  # CPU tensors: no stream
        f(xt, self.b)  # a NumPy array among them: the DLPack path for all
        self.assertEqual(xt.dlpack_calls, 1)

    def test_what_the_bridge_refuses(self):
        f = bias_relu()
        self.same(f, FakeTensor(self.x, requires_grad=True), FakeTensor(self.b))  # BufferError from __dlpack__
        self.same(f, FakeTensor(self.x), self.b)
        self.same(f, FakeTensor(self.x.astype(np.float64)), FakeTensor(self.b))  # kfuse's dtype error
        self.same(f, FakeTensor(self.x))  # count: the DLPack path, kfuse's error
        self.same(f, FakeTensor(np.zeros((2, 3, 1), np.float32)), FakeTensor(self.b))

    def test_rank_above_16_goes_to_the_python_path(self):
        f = bias_relu()
        args = (FakeTensor(np.zeros((1,) * 17, np.float32)), FakeTensor(self.b))
        self.assertIsNone(f._fast.run(args))
        self.assertEqual(outcome(lambda: f(*args)), outcome(lambda: ctypes_twin(f)(*args)))

    def test_in_place_keeps_the_tensor(self):
        f = add_one_in_place()
        self.same(f, make=lambda: [FakeTensor(np.array([1.0, 2.0]))])
        assert_output_keeps(self, f, FakeTensor(np.array([1.0, 2.0])))


if __name__ == "__main__":
    print("kfuse from", kfuse.library_path(), "; extension", kfuse.extension_status(), "; numpy", np.__version__)
    unittest.main(verbosity=2)
