#!/usr/bin/env python3
"""GPT-2 (124M) training throughput in PyTorch, for `troupe bench gpu` to compare against.

The model of torch_gpt.py (Troupe's gpt2 preset), the same step (forward, backward, clip at 1.0,
fused AdamW), bf16 autocast with fp32 master weights, flash attention via
scaled_dot_product_attention. Prints
"tokens_per_s <value>" on its last line (the median step).
"""
import argparse
import statistics
import time

import torch

from torch_gpt import GPT, adamw


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
    opt, _ = adamw(model, 1e-4)
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
