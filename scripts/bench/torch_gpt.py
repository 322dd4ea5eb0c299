"""Troupe's GPT written in PyTorch, for the benchmarks that compare against it.

One model for every comparison (`troupe bench gpu` through torch_gpt2.py, `troupe bench compute
--vs-pytorch` through torch_cpu_train.py): pre-LN blocks, GELU (tanh), tied token embedding as
the lm head, the vocabulary padded as Troupe pads it (the loss reads only the first `vocab`
logits), GPT-2's initialisation (N(0, 0.02), the residual projections scaled by 1/sqrt(2L),
biases 0, LayerNorm 1 and 0), and AdamW with Troupe's hyper-parameters (betas 0.9/0.95, eps
1e-8, weight decay 0.1 on matrices only). Attention is written as users write it: on torch 2.x
scaled_dot_product_attention(is_causal=True); torch 1.13 has no such function, so there it is
the explicit masked softmax.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def causal_attention(q, k, v):
    """q, k, v: (B, NH, T, hs) -> (B, NH, T, hs)."""
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return att.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    """Defaults: Troupe's gpt2 preset (12 layers, C 768, 12 heads, T 1024, vocab 50257 padded to 50304)."""

    def __init__(self, layers=12, c=768, nh=12, block=1024, vocab=50257, padded_vocab=50304):
        super().__init__()
        self.vocab = vocab
        self.wte, self.wpe = nn.Embedding(padded_vocab, c), nn.Embedding(block, c)
        self.h = nn.ModuleList(Block(c, nh) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        for name, p in self.named_parameters():  # LayerNorm keeps its 1 and 0
            if name.endswith("bias") and ".ln_" not in name and not name.startswith("ln_"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                proj = name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight")
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers) if proj else 0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        if logits.shape[-1] != self.vocab:
            logits = logits[..., : self.vocab]
        return F.cross_entropy(logits.float().reshape(-1, self.vocab), targets.reshape(-1))


def adamw(model, lr):
    """AdamW as Troupe's (decay on matrices only); the fastest implementation this torch has for
    the parameters' device: fused, else foreach, else the per-tensor loop. Returns (optimizer, kind)."""
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    for kind in ("fused", "foreach"):
        try:
            # Some builds accept fused=True and fail only at the first step on this device: try
            # one step on a scratch tensor first.
            scratch = torch.zeros(2, 2, device=params[0].device, requires_grad=True)
            scratch.grad = torch.zeros_like(scratch)
            torch.optim.AdamW([scratch], lr=lr, **{kind: True}).step()
            return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, **{kind: True}), kind
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8), "for-loop"
