"""A GNN message-passing layer stack in plain torch: messages from edge
sources (index_select), scaled by edge weights, summed into destinations
with index_add (scatter-add over edges), then a node update; a training
step in float32 on node classification. Random graph and weights."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Workload, seeded

SIZES = {
    "default": dict(nodes=100_000, edges=1_000_000, dim=128, layers=2, classes=16),
    "smoke": dict(nodes=64, edges=256, dim=16, layers=2, classes=4),
}


class MessagePassing(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.msg, self.self_ = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, h, src, dst, w):
        m = self.msg(h).index_select(0, src) * w.unsqueeze(-1)
        agg = torch.zeros_like(h).index_add(0, dst, m)
        deg = torch.zeros(h.shape[0], device=h.device, dtype=h.dtype).index_add(0, dst, w).clamp(min=1.0)
        return F.relu(self.norm(self.self_(h) + agg / deg.unsqueeze(-1)))


class GNN(nn.Module):
    def __init__(self, dim, layers, classes):
        super().__init__()
        self.layers = nn.ModuleList(MessagePassing(dim) for _ in range(layers))
        self.out = nn.Linear(dim, classes)

    def forward(self, h, src, dst, w, labels):
        for layer in self.layers:
            h = h + layer(h, src, dst, w)
        return F.cross_entropy(self.out(h), labels)


def build(size="smoke", device="cpu", seed=0, **over):
    cfg = dict(SIZES[size], **over)
    g = seeded(seed)
    model = GNN(cfg["dim"], cfg["layers"], cfg["classes"]).to(device)
    n, e = cfg["nodes"], cfg["edges"]
    h = torch.randn(n, cfg["dim"], generator=g).to(device)
    src = torch.randint(0, n, (e,), generator=g).to(device)
    dst = torch.randint(0, n, (e,), generator=g).to(device)
    w = torch.rand(e, generator=g).to(device)
    labels = torch.randint(0, cfg["classes"], (n,), generator=g).to(device)
    return Workload("gnn_train", model, lambda i: (h, src, dst, w, labels), "train", lr=1e-3, device=device)
