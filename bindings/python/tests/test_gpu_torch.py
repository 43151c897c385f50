"""GPU tests of the kfuse Python package with torch (label gpu).

Every case runs twice: through the C extension kfuse._fastcall
(TorchGpuTests; skipped when it is not loaded, a failure with
KFUSE_PYTHON_EXTENSION=1) and through the ctypes path alone
(TorchGpuTestsCtypes: the fusions made there have no C path, as with
KFUSE_PYTHON_EXTENSION=0).

Exits 77 (skipped) without torch, without a CUDA device, or when kfuse
answers KF_ERR_NO_DEVICE. The cases marked "not yet run on a GPU" were
written after the last device run.
Run (CMake builds the extension into build/python/kfuse/, found next to libkfuse):
  KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python KFUSE_PYTHON_EXTENSION=1 \
    python3 bindings/python/tests/test_gpu_torch.py
"""
import sys
import unittest

try:
    import torch
except ImportError:
    print("SKIP: torch is not installed for", sys.executable)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no CUDA device (torch.cuda.is_available() is False)")
    sys.exit(77)

import kfuse
from kfuse import _core

from fusions import LAYERNORM  # noqa: E402 (beside this file)


def layernorm_ref(x, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(), b.double(), eps)


class TorchGpuTests(unittest.TestCase):
    extension = True  # the fusions this class makes call through kfuse._fastcall

    @classmethod
    def setUpClass(cls):
        cls.make_caller = _core._caller
        if not cls.extension:
            _core._caller = lambda *args: None  # fusions made from here on: ctypes only
        elif not kfuse.extension_loaded():
            raise unittest.SkipTest(f"the C extension is not loaded: {kfuse.extension_status()}")
        cls.f = kfuse.Fusion.from_text(LAYERNORM)
        x = torch.ones(2, 4, device="cuda")
        try:
            cls.f(x, torch.ones(4, device="cuda"), torch.zeros(4, device="cuda"), 1e-5)
        except kfuse.KfuseError as e:
            if e.status in (kfuse.Status.NO_DEVICE, kfuse.Status.UNSUPPORTED):
                print("SKIP:", e)
                sys.exit(77)
            raise

    @classmethod
    def tearDownClass(cls):
        _core._caller = cls.make_caller

    def args(self, rows=16, cols=768, dtype=torch.float32):
        g = torch.Generator(device="cuda").manual_seed(0)
        return (torch.randn(rows, cols, device="cuda", generator=g, dtype=dtype),
                torch.randn(cols, device="cuda", generator=g, dtype=dtype),
                torch.randn(cols, device="cuda", generator=g, dtype=dtype))

    def test_zero_copy_both_ways(self):
        x, w, b = self.args()
        y = self.f(x, w, b, 1e-5)
        t = torch.from_dlpack(y)
        self.assertEqual(t.data_ptr(), y.data_ptr)
        torch.testing.assert_close(t.double(), layernorm_ref(x, w, b), rtol=1e-4, atol=1e-4)
        # a kfuse output back into kfuse, and torch views as inputs
        y2 = self.f(t, w, b, 1e-5)
        self.assertEqual(torch.from_dlpack(y2).shape, (16, 768))

    def test_non_contiguous_and_broadcast(self):
        x, w, b = self.args(32, 1536)
        xs = x[::2, ::2]
        y = torch.from_dlpack(self.f(xs, w[:768], b.expand(2, 1536)[0, ::2], 1e-5))
        torch.testing.assert_close(y.double(), layernorm_ref(xs, w[:768], b[::2]), rtol=1e-4, atol=1e-4)

    def test_bool_and_bfloat16(self):
        with kfuse.Definition() as fd:
            c = fd.tensor(rank=1, dtype=kfuse.bool_)
            a = fd.tensor(rank=1, dtype=kfuse.bfloat16)
            fd.output(fd.where(c, a, -a))
            fd.output(a > 0.0)
        cond = torch.tensor([True, False, True], device="cuda")
        a = torch.tensor([1.5, -2.0, 3.0], device="cuda", dtype=torch.bfloat16)
        y, pos = fd.fusion(cond, a)
        torch.testing.assert_close(torch.from_dlpack(y), torch.where(cond, a, -a))
        self.assertEqual(torch.from_dlpack(pos).dtype, torch.bool)

    def test_in_place(self):
        with kfuse.Definition() as fd:
            x = fd.tensor(rank=1, dtype=kfuse.float32)
            fd.output(x * 2.0, alias=0)
        t = torch.arange(4.0, device="cuda")
        y = fd.fusion(t)
        self.assertEqual(y.data_ptr, t.data_ptr())
        torch.testing.assert_close(t, torch.arange(4.0, device="cuda") * 2)

    def test_stream_hand_off_without_host_sync(self):
        # A long kernel queued on a side stream; kfuse runs on that stream
        # and the host returns before the kernel finishes.
        x, w, b = self.args()
        s = torch.cuda.Stream()
        big = torch.randn(8192, 8192, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            for _ in range(20):
                big = big @ big / 8192
            y = self.f(x, w, b, 1e-5, stream=s)
        self.assertFalse(s.query(), "the host waited for the stream")
        s.synchronize()
        with torch.cuda.stream(s):
            t = torch.from_dlpack(y)
        torch.testing.assert_close(t.double(), layernorm_ref(x, w, b), rtol=1e-4, atol=1e-4)

    def test_cuda_graph_capture_of_a_cached_call(self):
        x, w, b = self.args()
        out = torch.empty_like(x)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            self.f(x, w, b, 1e-5, out=out, stream=s)  # warm: compiled and cached
        s.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            self.f(x, w, b, 1e-5, out=out, stream=s)
        x.mul_(2)
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out.double(), layernorm_ref(x, w, b), rtol=1e-4, atol=1e-4)

    def test_torch_path_uses_the_current_stream(self):
        # No stream given, torch inputs: kfuse enqueues on torch's current
        # stream (here a side stream busy with a long kernel), so the call
        # neither waits nor runs ahead of torch's pending work.
        x, w, b = self.args()
        s = torch.cuda.Stream()
        big = torch.randn(4096, 4096, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            for _ in range(20):
                big = big @ big / 64
            x2 = x * 1.0  # pending behind the matmuls on s
            y = self.f(x2, w, b, 1e-5)
            self.assertFalse(s.query(), "the host waited for the stream")
        s.synchronize()
        torch.testing.assert_close(torch.from_dlpack(y).double(), layernorm_ref(x, w, b), rtol=1e-4, atol=1e-4)

    def test_the_path_in_use(self):
        # Not yet run on a GPU.
        x, w, b = self.args()
        if self.extension:
            self.assertIsNotNone(self.f._fast.run((x, w, b, 1e-5)), "the C path handed the call back")
            self.assertEqual(type(self.f(x, w, b, 1e-5)._owner).__name__, "Owner")
        else:
            self.assertIsNone(self.f._fast)
            self.assertEqual(type(self.f(x, w, b, 1e-5)._owner).__name__, "_Owner")

    def test_torch_path_follows_stream_switches(self):
        # torch's current stream is asked at every call, never cached.
        # Not yet run on a GPU.
        x, w, b = self.args()
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        torch.cuda.synchronize()
        with torch.cuda.stream(s1):
            y1 = self.f(x, w, b, 1e-5)
        with torch.cuda.stream(s2):
            y2 = self.f(x, w, b, 1e-5)
            y3 = self.f(x, w, b, 1e-5, stream=s1)  # an explicit stream wins
        y0 = self.f(x, w, b, 1e-5)
        self.assertEqual((y1._stream, y2._stream, y3._stream), (s1.cuda_stream, s2.cuda_stream, s1.cuda_stream))
        self.assertEqual(y0._stream or 0, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        for y in (y0, y1, y2, y3):
            torch.testing.assert_close(torch.from_dlpack(y).double(), layernorm_ref(x, w, b), rtol=1e-4, atol=1e-4)

    def test_torch_path_views_parameters_and_grad(self):
        x, w, b = self.args(32, 1536)
        xs = x[::2, ::2]  # strided view
        p = torch.nn.Parameter(w[::2].clone(), requires_grad=False)
        y = self.f(xs, p, b[::2], 1e-5)
        torch.testing.assert_close(torch.from_dlpack(y).double(), layernorm_ref(xs, p, b[::2]),
                                   rtol=1e-4, atol=1e-4)
        with self.assertRaises(BufferError):  # as torch's own DLPack export
            self.f(xs, torch.nn.Parameter(w[::2].clone()), b[::2], 1e-5)

    def test_cuda_graph_replays_draw_new_masks(self):
        # Seed and offset in device tensors, the offset advanced in place by
        # the fusion: each replay of one captured graph draws a new dropout
        # mask, bit-identical to the CPU backend given offsets 77, 78, 79.
        # Written after session 8's last device run: not yet run on a GPU.
        body = ("const lo: float32 = 0\nconst hi: float32 = 1\na = size(x) {dim=0}\nb = size(x) {dim=1}\n"
                "u = uniform([a, b], lo, hi, seed, off) {dtype=float32}\nconst p: float32 = 0.5\n"
                "keep = ge(u, p)\nconst z: float32 = 0\ny = where(keep, x, z)\n")
        stateful = kfuse.Fusion.from_text(
            "input x: tensor<float32, 2>\ninput seed: tensor<int64, 0>\ninput off: tensor<int64, 0>\n" + body +
            "const one: int64 = 1\nnext = add(off, one)\noutput y\noutput next {alias=2}\n")
        plain = kfuse.Fusion.from_text(
            "input x: tensor<float32, 2>\ninput seed: scalar<int64>\ninput off: scalar<int64>\n" + body + "output y\n")
        x = (torch.arange(16 * 24, dtype=torch.float32, device="cuda") + 1).reshape(16, 24)
        seed = torch.tensor(1234, dtype=torch.int64, device="cuda")
        off = torch.tensor(77, dtype=torch.int64, device="cuda")
        y = torch.empty_like(x)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            stateful(x, seed, off, out=(y, off), stream=s)  # warm: compiled and cached
        s.synchronize()
        off.fill_(77)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            stateful(x, seed, off, out=(y, off), stream=s)
        masks = []
        for _ in range(3):
            g.replay()
            torch.cuda.synchronize()
            masks.append(y.clone())
        self.assertEqual(off.item(), 80)
        for r in range(3):
            want = torch.from_dlpack(plain(x.cpu(), 1234, 77 + r))
            torch.testing.assert_close(masks[r].cpu(), want, rtol=0, atol=0)
        self.assertFalse(torch.equal(masks[0], masks[1]))
        self.assertFalse(torch.equal(masks[1], masks[2]))


class TorchGpuTestsCtypes(TorchGpuTests):
    extension = False


if __name__ == "__main__":
    print("kfuse from", kfuse.library_path(), "; extension", kfuse.extension_status(), "; torch", torch.__version__)
    unittest.main(verbosity=2)
