"""A Llama-style decoder stack in plain torch (RMSNorm, RoPE, SwiGLU,
grouped-query attention through F.scaled_dot_product_attention): a
training step (bf16 autocast) and a decode step with a KV cache
(one new token per sequence, batch 1, 8 or 64). Random weights."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Workload, attention, seeded

SIZES = {
    "default": dict(n_layer=8, dim=2048, heads=16, kv_heads=4, ffn=5632, vocab=32000, seq=4096, batch=1,
                    ctx=4096, prefill=1024),
    "smoke": dict(n_layer=2, dim=64, heads=4, kv_heads=2, ffn=160, vocab=256, seq=32, batch=2, ctx=64, prefill=8),
}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(seq, head_dim, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    f = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, dim, bias=False)

    def qkv(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def expand_kv(self, k):
        b, h, t, d = k.shape
        r = self.heads // self.kv_heads
        return k[:, :, None].expand(b, h, r, t, d).reshape(b, h * r, t, d)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q, k, v = self.qkv(x, cos, sin)
        y = attention(q, self.expand_kv(k), self.expand_kv(v), is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))

    def decode(self, x, cos, sin, cache_k, cache_v, pos, mask):
        b, t, _ = x.shape
        q, k, v = self.qkv(x, cos, sin)
        cache_k.index_copy_(2, pos, k.to(cache_k.dtype))
        cache_v.index_copy_(2, pos, v.to(cache_v.dtype))
        y = attention(q, self.expand_kv(cache_k).to(q.dtype), self.expand_kv(cache_v).to(q.dtype),
                                           attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn):
        super().__init__()
        self.attn_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, heads, kv_heads)
        self.w1, self.w3 = nn.Linear(dim, ffn, bias=False), nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)

    def mlp(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.ffn_norm(x))

    def decode(self, x, cos, sin, ck, cv, pos, mask):
        x = x + self.attn.decode(self.attn_norm(x), cos, sin, ck, cv, pos, mask)
        return x + self.mlp(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, n_layer, dim, heads, kv_heads, ffn, vocab, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, kv_heads, ffn) for _ in range(n_layer))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        cos, sin = rope_tables(seq, dim // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.embed(idx)
        cos, sin = self.cos[:t], self.sin[:t]
        for blk in self.blocks:
            x = blk(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.reshape(-1))


class LlamaDecode(nn.Module):
    """One decode step: the new token of each sequence at position ``pos``
    (a 1-element int64 tensor, so every step has the same shapes), its K
    and V written into the cache, attention over the cache up to pos."""

    def __init__(self, model, batch, ctx, kv_heads, head_dim, dtype):
        super().__init__()
        self.model = model
        n = len(model.blocks)
        shape = (n, batch, kv_heads, ctx, head_dim)
        dev = model.cos.device
        self.register_buffer("cache_k", torch.randn(shape, device=dev).to(dtype) * 0.5, persistent=False)
        self.register_buffer("cache_v", torch.randn(shape, device=dev).to(dtype) * 0.5, persistent=False)
        self.register_buffer("positions", torch.arange(ctx, device=dev), persistent=False)

    def forward(self, tokens, pos):
        m = self.model
        x = m.embed(tokens)
        cos, sin = m.cos.index_select(0, pos), m.sin.index_select(0, pos)
        mask = (self.positions <= pos).view(1, 1, 1, -1)
        for i, blk in enumerate(m.blocks):
            x = blk.decode(x, cos, sin, self.cache_k[i], self.cache_v[i], pos, mask)
        return m.head(m.norm(x))[:, -1]


def build(size="smoke", device="cpu", seed=0, **over):
    cfg = dict(SIZES[size], **over)
    g = seeded(seed)
    model = Llama(cfg["n_layer"], cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["vocab"],
                  max(cfg["seq"], cfg["ctx"])).to(device)
    data = torch.randint(0, cfg["vocab"], (8, cfg["batch"], cfg["seq"] + 1), generator=g).to(device)
    batches = lambda i: (data[i % 8, :, :-1], data[i % 8, :, 1:])
    return Workload("llama_train", model, batches, "train", lr=3e-4, autocast_dtype=torch.bfloat16, device=device)


def build_decode(size="smoke", device="cpu", seed=0, batch=1, **over):
    cfg = dict(SIZES[size], **over)
    g = seeded(seed)
    dtype = torch.bfloat16
    model = Llama(cfg["n_layer"], cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["vocab"],
                  cfg["ctx"]).to(device)
    model = model.to(dtype)
    dec = LlamaDecode(model, batch, cfg["ctx"], cfg["kv_heads"], cfg["dim"] // cfg["heads"], dtype)
    tokens = torch.randint(0, cfg["vocab"], (64, batch, 1), generator=g).to(device)
    start = cfg["prefill"]
    batches = lambda i: (tokens[i % 64], torch.tensor([(start + i) % cfg["ctx"]], device=device))
    return Workload(f"llama_decode_b{batch}", dec, batches, "infer", device=device)
