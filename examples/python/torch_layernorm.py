"""LayerNorm as two kfuse fusions inside a torch training loop.

* The fusions are defined once (forward: y, mean, rstd; backward: dx, dw,
  db) and called on torch tensors through DLPack: no copies, on torch's
  current CUDA stream, no host synchronization.
* ``torch.library.custom_op`` registers ``kfuse::layer_norm`` with a fake
  (meta) implementation and an autograd formula that calls the backward
  fusion, so it composes with autograd and with ``torch.compile`` graphs
  (the op stays opaque to the compiler).

Run (a GPU machine with torch 2.4 or newer; from the repository root):

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python python3 examples/python/torch_layernorm.py

Status: NOT RUN with torch yet (written where neither torch nor a GPU is
available). The two fusions themselves are checked on the CPU backend
against NumPy by CTest python_kfuse (bindings/python/tests/test_kfuse.py
imports forward_fusion and backward_fusion from this file).
"""
import kfuse


def forward_fusion():
    """y = (x - mean) * rstd * w + b over the last dim of a 2-d x; also
    returns mean and rstd ([rows, 1]) for the backward pass."""
    with kfuse.Definition() as fd:
        x = fd.tensor(rank=2, dtype=kfuse.float32)
        w = fd.tensor(rank=1, dtype=kfuse.float32)
        b = fd.tensor(rank=1, dtype=kfuse.float32)
        eps = fd.scalar(dtype=kfuse.float32)
        var, mean = fd.var_mean(x, axes=[1], correction=0, keepdim=True)
        rstd = fd.rsqrt(var + eps)
        fd.output((x - mean) * rstd * w + b)
        fd.output(mean)
        fd.output(rstd)
    return fd.fusion


def backward_fusion():
    """dx, dw, db of layer norm from dy, x, w and the saved mean and rstd:
    xhat = (x - mean) * rstd, g = dy * w,
    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (row means),
    dw = sum_rows(dy * xhat), db = sum_rows(dy)."""
    with kfuse.Definition() as fd:
        dy = fd.tensor(rank=2, dtype=kfuse.float32)
        x = fd.tensor(rank=2, dtype=kfuse.float32)
        w = fd.tensor(rank=1, dtype=kfuse.float32)
        mean = fd.tensor(rank=2, dtype=kfuse.float32)
        rstd = fd.tensor(rank=2, dtype=kfuse.float32)
        xhat = (x - mean) * rstd
        g = dy * w
        mg = fd.mean(g, axes=[1], keepdim=True)
        mgx = fd.mean(g * xhat, axes=[1], keepdim=True)
        fd.output(rstd * (g - mg - xhat * mgx))
        fd.output(fd.sum(dy * xhat, axes=[0]))
        fd.output(fd.sum(dy, axes=[0]))
    return fd.fusion


def register_custom_op(torch):
    """kfuse::layer_norm(x, w, b, eps) -> y as a torch custom op with autograd."""
    from torch import Tensor

    fwd, bwd = forward_fusion(), backward_fusion()

    def stream():
        return torch.cuda.current_stream().cuda_stream if torch.cuda.is_available() else None

    @torch.library.custom_op("kfuse::layer_norm_fwd", mutates_args=())
    def layer_norm_fwd(x: Tensor, w: Tensor, b: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
        # DLPack refuses tensors that require grad (parameters do): the
        # op's own autograd formula handles gradients, so export detached views.
        x, w, b = x.detach(), w.detach(), b.detach()
        y, mean, rstd = fwd(x, w, b, eps, stream=stream() if x.is_cuda else None)
        return torch.from_dlpack(y), torch.from_dlpack(mean), torch.from_dlpack(rstd)

    @layer_norm_fwd.register_fake
    def _(x, w, b, eps):
        return torch.empty_like(x), x.new_empty(x.shape[0], 1), x.new_empty(x.shape[0], 1)

    @torch.library.custom_op("kfuse::layer_norm_bwd", mutates_args=())
    def layer_norm_bwd(dy: Tensor, x: Tensor, w: Tensor, mean: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        dy, x, w, mean, rstd = (t.detach() for t in (dy, x, w, mean, rstd))
        dx, dw, db = bwd(dy, x, w, mean, rstd, stream=stream() if x.is_cuda else None)
        return torch.from_dlpack(dx), torch.from_dlpack(dw), torch.from_dlpack(db)

    @layer_norm_bwd.register_fake
    def _(dy, x, w, mean, rstd):
        return torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)

    def setup_context(ctx, inputs, output):
        x, w, _b, _eps = inputs
        _y, mean, rstd = output
        ctx.save_for_backward(x, w, mean, rstd)

    def backward(ctx, dy, _dmean, _drstd):
        x, w, mean, rstd = ctx.saved_tensors
        dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd)
        return dx, dw, db, None

    layer_norm_fwd.register_autograd(backward, setup_context=setup_context)

    def layer_norm(x, w, b, eps=1e-5):
        shape = x.shape
        y, _mean, _rstd = layer_norm_fwd(x.reshape(-1, shape[-1]), w, b, eps)
        return y.reshape(shape)

    return layer_norm


def main():
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    layer_norm = register_custom_op(torch)
    torch.manual_seed(0)

    # 1. gradients against torch's own layer norm
    x = torch.randn(16, 768, device=device, requires_grad=True)
    w = torch.randn(768, device=device, requires_grad=True)
    b = torch.randn(768, device=device, requires_grad=True)
    y = layer_norm(x, w, b)
    y.square().sum().backward()
    got = (y.detach(), x.grad.clone(), w.grad.clone(), b.grad.clone())
    for t in (x, w, b):
        t.grad = None
    ref = torch.nn.functional.layer_norm(x, (768,), w, b, 1e-5)
    ref.square().sum().backward()
    for name, a, r in zip(("y", "dx", "dw", "db"), got, (ref.detach(), x.grad, w.grad, b.grad)):
        torch.testing.assert_close(a, r, rtol=2e-4, atol=2e-3, msg=lambda m: f"{name}: {m}")
    print("gradients match torch.nn.functional.layer_norm")

    # 2. a training loop: the fusions were defined once; every step reuses
    #    the cached plans (and compiled kernels)
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(768, 768)
            self.w = torch.nn.Parameter(torch.ones(768))
            self.b = torch.nn.Parameter(torch.zeros(768))
            self.fc2 = torch.nn.Linear(768, 768)

        def forward(self, x):
            return self.fc2(torch.relu(layer_norm(self.fc1(x), self.w, self.b)))

    model = Block().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    data, target = torch.randn(64, 768, device=device), torch.randn(64, 768, device=device)
    for step in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"step {step:2d}  loss {loss.item():.4f}")

    # 3. the same model under torch.compile: the custom op is a graph node
    compiled = torch.compile(model)
    loss = torch.nn.functional.mse_loss(compiled(data), target)
    loss.backward()
    print(f"torch.compile step  loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
