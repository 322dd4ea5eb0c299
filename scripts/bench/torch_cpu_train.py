#!/usr/bin/env python3
"""Training throughput of Troupe's GPT in PyTorch on the CPU, for `troupe bench compute
--vs-pytorch`, which runs it once per round between its own rounds.

The model of torch_gpt.py at the dimensions given (Troupe passes its preset's), fp32 or, with
`--precision bf16`, its forward under torch.autocast("cpu", dtype=torch.bfloat16) (products in
bf16; weights, gradients and AdamW in fp32, as Troupe's train.precision bf16), the same step as
Troupe's (forward, backward, clip the global norm at 1.0, AdamW, gradients cleared), on
`--threads` threads: torch's pool and its BLAS's (OpenMP, OpenBLAS and MKL sized before torch
loads). Tokens are random in [0, vocab). Prints "tokens_per_s <value>" on its last
line (from the median step).

  python3 scripts/bench/torch_cpu_train.py --probe      # "torch <version> attention <a> adamw <k>"
  python3 scripts/bench/torch_cpu_train.py --layers 6 --embd 384 --heads 6 --seq 256 --vocab 256 \\
      --padded-vocab 256 --batch 8 --threads 1 --steps 10 --warmup 1 [--precision bf16]
"""
import argparse
import os
import statistics
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--probe", action="store_true", help="print the torch version and the variants used, then exit")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--embd", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--padded-vocab", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    a = p.parse_args()
    # torch.set_num_threads sizes torch's own pool only. A torch built on a generic BLAS (Debian's
    # python3-torch calls OpenBLAS) runs its GEMMs on OpenBLAS' pool, which takes every core
    # unless told otherwise before it loads: the same count for every pool, set before the import.
    for pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[pool] = str(a.threads)
    import contextlib

    import torch
    import torch_gpt

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = torch_gpt.GPT(a.layers, a.embd, a.heads, a.seq, a.vocab, a.padded_vocab)
    opt, adamw_kind = torch_gpt.adamw(model, 1e-4)
    attention = "sdpa" if torch_gpt.HAS_SDPA else "explicit"
    if a.probe:
        print(f"torch {torch.__version__} attention {attention} adamw {adamw_kind}")
        return
    def autocast():
        if a.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    x = torch.randint(0, a.vocab, (a.batch, a.seq))
    y = torch.randint(0, a.vocab, (a.batch, a.seq))
    times = []
    for i in range(a.warmup + a.steps):
        start = time.perf_counter()
        with autocast():
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    print(f"tokens_per_s {a.batch * a.seq / statistics.median(times):.1f}")


if __name__ == "__main__":
    main()
