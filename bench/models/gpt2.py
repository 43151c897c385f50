"""GPT-2 (small: 12 layers, 12 heads, 768 wide, 50257 tokens, 1024 positions)
in plain torch, training step with bf16 autocast. Random weights."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import PreNormBlock, Workload, seeded

SIZES = {
    "default": dict(n_layer=12, n_head=12, n_embd=768, vocab=50257, seq=1024, batch=8),
    "smoke": dict(n_layer=2, n_head=2, n_embd=64, vocab=256, seq=32, batch=2),
}


class GPT2(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, vocab, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(seq, n_embd)
        self.blocks = nn.ModuleList(PreNormBlock(n_embd, n_head, causal=True, gelu="tanh") for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / (math.sqrt(2 * n_layer) if name.endswith("fc2.weight") else 1))

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.reshape(-1))


def build(size="smoke", device="cpu", seed=0, **over):
    cfg = dict(SIZES[size], **over)
    g = seeded(seed)
    model = GPT2(cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["vocab"], cfg["seq"]).to(device)
    data = torch.randint(0, cfg["vocab"], (16, cfg["batch"], cfg["seq"] + 1), generator=g).to(device)
    batches = lambda i: (data[i % 16, :, :-1], data[i % 16, :, 1:])
    return Workload("gpt2_train", model, batches, "train", lr=3e-4, autocast_dtype=torch.bfloat16, device=device)
