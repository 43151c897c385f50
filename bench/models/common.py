"""What every workload of bench/models is: a model, its inputs, one step.

A workload is built fresh for each backend with the same seed, so eager,
inductor and kfuse start from the same weights and see the same batches.
Training steps run forward and loss inside the compiled module, then
backward, then AdamW (eager, outside the compiled region)."""
import contextlib

import torch


class Workload:
    """``step()`` runs one step and returns the loss (training) or the
    output (inference) as a tensor, without synchronizing. ``compile(fn)``
    replaces the module by ``fn(module)`` (torch.compile with a backend)."""

    def __init__(self, name, module, batches, kind, lr=1e-4, autocast_dtype=None, device="cpu"):
        self.name, self.module, self.kind = name, module, kind
        self.batches = batches          # a function step_index -> tuple of inputs
        self.device = torch.device(device)
        self.autocast_dtype = autocast_dtype
        self.compiled = module
        self.index = 0
        self.optimizer = None
        if kind == "train":
            fused = self.device.type == "cuda"
            try:
                self.optimizer = torch.optim.AdamW(module.parameters(), lr=lr, fused=fused)
            except (TypeError, RuntimeError):
                self.optimizer = torch.optim.AdamW(module.parameters(), lr=lr)

    def compile(self, fn):
        self.compiled = fn(self.module)
        return self

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def step(self):
        inputs = self.batches(self.index)
        self.index += 1
        if self.kind == "train":
            self.optimizer.zero_grad(set_to_none=True)
            with self._autocast():
                loss = self.compiled(*inputs)
            loss.backward()
            self.optimizer.step()
            return loss.detach()
        with torch.no_grad(), self._autocast():
            return self.compiled(*inputs)


def seeded(seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    return g


def _math_attention(q, k, v, attn_mask=None, is_causal=False):
    """softmax(q k^T / sqrt(d) + mask) v: for torch 1.13, which lacks
    F.scaled_dot_product_attention (the benchmark itself needs torch >= 2)."""
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if is_causal:
        t, u = q.shape[-2], k.shape[-2]
        attn_mask = torch.ones(t, u, dtype=torch.bool, device=q.device).tril(u - t)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    return torch.softmax(s.float(), -1).to(q.dtype) @ v


attention = getattr(torch.nn.functional, "scaled_dot_product_attention", _math_attention)


class PreNormBlock(torch.nn.Module):
    """A pre-norm transformer block (GPT-2's and ViT's): LayerNorm,
    multi-head attention, residual; LayerNorm, GELU MLP (4x), residual."""

    def __init__(self, d, heads, causal=False, eps=1e-5, gelu="none"):
        super().__init__()
        nn = torch.nn
        self.heads, self.causal, self.gelu = heads, causal, gelu
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = attention(q, k, v, is_causal=self.causal)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)), approximate=self.gelu))
