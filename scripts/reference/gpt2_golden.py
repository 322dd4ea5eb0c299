#!/usr/bin/env python3
"""Writes the GPT-2 golden fixture that tests/compute/test_golden_gpt2.cpp checks Troupe against.

Run by hand, not in CI, with a Python that has PyTorch (Debian: `apt-get install python3-torch`,
then `/usr/bin/python3`), from the repository root:

    /usr/bin/python3 scripts/reference/gpt2_golden.py [--out tests/compute/golden/gpt2_tiny.bin]

It writes one file (format: docs/formats/golden-fixture.md), under 1 MiB, and prints what it put
in it. The file is committed; rerun this only to change the fixture, and commit both.

Finite differences show that Troupe's backward agrees with its own forward; this shows that the
forward is GPT-2. The model here is written from the GPT-2 definition, not from Troupe's code:
pre-LayerNorm blocks (eps 1e-5, biased variance), causal multi-head attention scaled by
1/sqrt(head size), an MLP of width 4C with GELU in its tanh form (GPT-2's), learned positions,
the lm head tied to the token embedding, and the mean cross-entropy over the first V of Vp
vocabulary columns. Everything runs in float64 and autograd takes the gradients.

What the fixture holds: the configuration, a batch, the weights in Troupe's flat parameter order
(docs/formats/parameter-layout.md; matrices (out, in) as nn.Linear stores them), the logits
(B, T, Vp), the loss, every parameter's gradient, and five training steps with the optimizer
Troupe's trainer runs (compute/train/trainer.cpp): global-norm clipping, then decoupled AdamW
with weight decay on matrices and embeddings only, the learning rate from linear warmup and a
cosine decay. Those settings are written into the fixture header so the test uses the same.

Choices that keep the file small and the comparison exact:
  - The weights are rounded to bfloat16 before anything is computed, so they are exactly
    representable in float32 and float64 (Troupe runs from identical weights in both) and take
    two bytes each; gradients and results are float64.
  - Troupe's GPTConfig takes Vp as a field; it is set above V here so the padded vocabulary
    (rows of wte no token uses, logit columns the softmax leaves out) is covered.
  - B*T is a power of two: Troupe hands the cross-entropy backward its 1/(B*T) as a float, which
    is then exact.
  - Troupe hands AdamW its hyper-parameters (learning rate, betas, eps, weight decay) and the
    clip factor as float32 even for a float64 model; the reference rounds those numbers the same
    way, so that a float64 comparison measures arithmetic alone.
  - The weights are larger than GPT-2's initialisation (std 0.1 against 0.02, and random biases
    and LayerNorm parameters against 0 and 1), so attention is far from uniform, GELU works away
    from its linear part and every bias and LayerNorm parameter changes the result.
"""
import argparse
import math
import os
import struct
import sys

import numpy as np
import torch

MAGIC = b"TRPGOLD\0"
VERSION = 1
DTYPE_CODES = {"f64": 0, "f32": 1, "bf16": 2, "i32": 3}

SEED = 20240601
N_LAYER, N_EMBD, N_HEAD, BLOCK_SIZE = 2, 64, 4, 16
VOCAB, PADDED_VOCAB = 20, 24
BATCH, SEQ = 2, 16

LR_PEAK, LR_MIN, WARMUP_STEPS, TOTAL_STEPS = 1e-3, 1e-4, 2, 5
BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP = 0.9, 0.95, 1e-8, 0.1, 1.0
STEPS = 5


def f32(x):
    """The float32 value nearest to x, as a Python float (what Troupe's float parameters carry)."""
    return float(np.float32(x))


def parameter_specs():
    """(name, shape, decay, kind) in Troupe's flat order; kind picks the random distribution."""
    C, L = N_EMBD, N_LAYER
    specs = [("wte.weight", (PADDED_VOCAB, C), True, "matrix"), ("wpe.weight", (BLOCK_SIZE, C), True, "matrix")]
    for l in range(L):
        p = f"h.{l}."
        specs += [
            (p + "ln_1.weight", (C,), False, "ln_weight"),
            (p + "ln_1.bias", (C,), False, "bias"),
            (p + "attn.c_attn.weight", (3 * C, C), True, "matrix"),
            (p + "attn.c_attn.bias", (3 * C,), False, "bias"),
            (p + "attn.c_proj.weight", (C, C), True, "matrix"),
            (p + "attn.c_proj.bias", (C,), False, "bias"),
            (p + "ln_2.weight", (C,), False, "ln_weight"),
            (p + "ln_2.bias", (C,), False, "bias"),
            (p + "mlp.c_fc.weight", (4 * C, C), True, "matrix"),
            (p + "mlp.c_fc.bias", (4 * C,), False, "bias"),
            (p + "mlp.c_proj.weight", (C, 4 * C), True, "matrix"),
            (p + "mlp.c_proj.bias", (C,), False, "bias"),
        ]
    specs += [("ln_f.weight", (C,), False, "ln_weight"), ("ln_f.bias", (C,), False, "bias")]
    return specs


def random_parameters(gen):
    params = {}
    for name, shape, _, kind in parameter_specs():
        std, mean = {"matrix": (0.1, 0.0), "bias": (0.1, 0.0), "ln_weight": (0.1, 1.0)}[kind]
        w = mean + std * torch.randn(shape, generator=gen, dtype=torch.float64)
        params[name] = w.to(torch.bfloat16).to(torch.float64).requires_grad_(True)
    return params


def layernorm(x, weight, bias):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias


def linear(x, weight, bias):
    return x @ weight.t() + bias


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def causal_self_attention(x, weight, bias):
    B, T, C = x.shape
    hs = C // N_HEAD
    q, k, v = linear(x, weight, bias).split(C, dim=2)
    q, k, v = (z.view(B, T, N_HEAD, hs).transpose(1, 2) for z in (q, k, v))  # (B, NH, T, hs)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    att = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


def forward(params, tokens, targets):
    B, T = tokens.shape
    x = params["wte.weight"][tokens] + params["wpe.weight"][:T]
    for l in range(N_LAYER):
        p = lambda n: params[f"h.{l}.{n}"]  # noqa: E731
        a = causal_self_attention(layernorm(x, p("ln_1.weight"), p("ln_1.bias")), p("attn.c_attn.weight"),
                                  p("attn.c_attn.bias"))
        x = x + linear(a, p("attn.c_proj.weight"), p("attn.c_proj.bias"))
        h = gelu_tanh(linear(layernorm(x, p("ln_2.weight"), p("ln_2.bias")), p("mlp.c_fc.weight"), p("mlp.c_fc.bias")))
        x = x + linear(h, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
    x = layernorm(x, params["ln_f.weight"], params["ln_f.bias"])
    logits = x @ params["wte.weight"].t()  # (B, T, Vp): the padded rows give logits too
    logp = torch.log_softmax(logits[..., :VOCAB], dim=-1)
    loss = -logp.gather(-1, targets.unsqueeze(-1)).mean()
    return logits, loss


def learning_rate(step):
    """Linear warmup to the peak over WARMUP_STEPS, then a cosine to the minimum at the last step."""
    if step < WARMUP_STEPS:
        return LR_PEAK * (step + 1) / WARMUP_STEPS
    decay_steps = max(1, TOTAL_STEPS - 1 - WARMUP_STEPS)
    progress = min(max((step - WARMUP_STEPS) / decay_steps, 0.0), 1.0)
    return LR_MIN + 0.5 * (1.0 + math.cos(math.pi * progress)) * (LR_PEAK - LR_MIN)


def train(params, tokens, targets):
    """STEPS optimizer steps on the one batch; returns per step (lr, gradient norm, loss after)."""
    specs = parameter_specs()
    decayed = [params[n] for n, _, decay, _ in specs if decay]
    plain = [params[n] for n, _, decay, _ in specs if not decay]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": f32(WEIGHT_DECAY)},
                             {"params": plain, "weight_decay": 0.0}],
                            lr=f32(LR_PEAK), betas=(f32(BETA1), f32(BETA2)), eps=f32(EPS), foreach=False)
    history = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=False)
        _, loss = forward(params, tokens, targets)
        loss.backward()
        grads = [params[n].grad for n, _, _, _ in specs]
        norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
        if GRAD_CLIP > 0 and norm > GRAD_CLIP:
            factor = f32(GRAD_CLIP / (norm + 1e-6))
            for g in grads:
                g.mul_(factor)
        lr = learning_rate(step)
        for group in opt.param_groups:
            group["lr"] = f32(lr)
        opt.step()
        with torch.no_grad():
            _, after = forward(params, tokens, targets)
        history.append((lr, norm, float(after)))
    return history


def write_fixture(path, arrays):
    def header():
        out = MAGIC + struct.pack("<I", VERSION)
        out += struct.pack("<8i", N_LAYER, N_EMBD, N_HEAD, BLOCK_SIZE, VOCAB, PADDED_VOCAB, BATCH, SEQ)
        out += struct.pack("<2d", LR_PEAK, LR_MIN) + struct.pack("<2i", WARMUP_STEPS, TOTAL_STEPS)
        out += struct.pack("<5d", BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP)
        return out + struct.pack("<I", len(arrays))

    out = bytearray(header())
    for name, dtype, array in arrays:
        data = np.ascontiguousarray(array)
        encoded = name.encode("utf-8")
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<II", DTYPE_CODES[dtype], data.ndim) + struct.pack(f"<{data.ndim}I", *data.shape)
        out += data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(out)
    return len(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/compute/golden/gpt2_tiny.bin")
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)

    params = random_parameters(gen)
    stream = torch.randint(0, VOCAB, (BATCH * SEQ + 1,), generator=gen)
    tokens = stream[:-1].view(BATCH, SEQ).clone()
    targets = stream[1:].view(BATCH, SEQ).clone()

    logits, loss = forward(params, tokens, targets)
    loss.backward()
    initial = {n: params[n].detach().clone() for n, _, _, _ in parameter_specs()}
    grads = {n: params[n].grad.detach().clone() for n, _, _, _ in parameter_specs()}
    history = train(params, tokens, targets)

    def bf16_bits(t):
        return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)

    arrays = [("tokens", "i32", tokens.numpy().astype(np.int32)), ("targets", "i32", targets.numpy().astype(np.int32))]
    arrays += [("param/" + n, "bf16", bf16_bits(initial[n])) for n, _, _, _ in parameter_specs()]
    arrays += [("logits", "f64", logits.detach().numpy()), ("loss", "f64", np.array([float(loss)]))]
    arrays += [("grad/" + n, "f64", grads[n].numpy()) for n, _, _, _ in parameter_specs()]
    arrays += [("adamw/lr", "f64", np.array([h[0] for h in history])),
               ("adamw/grad_norm", "f64", np.array([h[1] for h in history])),
               ("adamw/loss", "f64", np.array([h[2] for h in history]))]
    size = write_fixture(args.out, arrays)

    print(f"wrote {args.out}: {size} bytes, {len(arrays)} arrays")
    print(f"loss {float(loss):.17g}")
    for step, (lr, norm, after) in enumerate(history):
        print(f"step {step}: lr {lr:.6g}  grad norm {norm:.6g}  loss after {after:.17g}")
    if size >= 1 << 20:
        sys.exit(f"the fixture is {size} bytes, over the 1 MiB it must stay under")


if __name__ == "__main__":
    main()
