#!/usr/bin/env python3
"""GPT-2 (124M) training throughput in PyTorch, for `troupe bench gpu` to compare against.

The same model as Troupe's gpt2 preset (pre-LN, GELU tanh, tied embeddings, vocab padded to
50304), the same step (forward, backward, clip at 1.0, fused AdamW), bf16 autocast with fp32
master weights, flash attention via scaled_dot_product_attention. Prints
"tokens_per_s <value>" on its last line (the median step).
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers=12, c=768, nh=12, block=1024, vocab=50304):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.h = nn.ModuleList(Block(c, nh) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.manual_seed(1)
    model = GPT().cuda()
    step_model = torch.compile(model) if a.mode == "compile" else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    x = torch.randint(0, 50257, (a.batch, a.seq), device="cuda")
    y = torch.randint(0, 50257, (a.batch, a.seq), device="cuda")
    times = []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    print(f"tokens_per_s {a.batch * a.seq / statistics.median(times):.1f}")


if __name__ == "__main__":
    main()
