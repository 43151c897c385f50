"""ViT blocks (pre-norm LayerNorm, multi-head attention through
F.scaled_dot_product_attention, GELU MLP) on patch tokens, with a
classifier head: a training step in bf16 autocast. Random weights."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import PreNormBlock, Workload, seeded

SIZES = {
    "default": dict(depth=4, dim=768, heads=12, tokens=197, batch=64, classes=1000),
    "smoke": dict(depth=1, dim=64, heads=4, tokens=17, batch=2, classes=10),
}


class ViT(nn.Module):
    def __init__(self, depth, dim, heads, tokens, classes):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.ModuleList(PreNormBlock(dim, heads, eps=1e-6) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x, labels):
        x = x + self.pos
        for blk in self.blocks:
            x = blk(x)
        return F.cross_entropy(self.head(self.norm(x)[:, 0]).float(), labels)


def build(size="smoke", device="cpu", seed=0, **over):
    cfg = dict(SIZES[size], **over)
    g = seeded(seed)
    model = ViT(cfg["depth"], cfg["dim"], cfg["heads"], cfg["tokens"], cfg["classes"]).to(device)
    x = torch.randn(4, cfg["batch"], cfg["tokens"], cfg["dim"], generator=g).to(device)
    y = torch.randint(0, cfg["classes"], (4, cfg["batch"]), generator=g).to(device)
    return Workload("vit_train", model, lambda i: (x[i % 4], y[i % 4]), "train", autocast_dtype=torch.bfloat16,
                    device=device)
