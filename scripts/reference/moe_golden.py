#!/usr/bin/env python3
"""Writes the mixture-of-experts golden fixture that tests/compute/moe/test_moe_golden.cpp checks
Troupe's MoE MLP (compute/moe/moe_layer.hpp) against.

Run by hand, not in CI, with a Python that has PyTorch (Debian: `apt-get install python3-torch`,
then `/usr/bin/python3`), from the repository root:

    /usr/bin/python3 scripts/reference/moe_golden.py [--out tests/compute/golden/moe_block.bin]

It writes one file (format: docs/formats/moe-golden-fixture.md), under 1 MiB, and prints what it
put in it. The file is committed; rerun this only to change the fixture, and commit both.

The block is written from the mixture-of-experts definitions, not from Troupe's code, and
autograd takes every gradient in float64:
  - router: logits = x W_r^T, p = softmax(logits), the top-k of p per token (torch.topk), the k
    gates renormalised to sum to 1;
  - experts: each an MLP x -> gelu_tanh(x W_fc^T + b_fc) W_proj^T + b_proj; each token's output is
    the gate-weighted sum of its k experts' outputs, plus a shared expert's output (weight 1);
  - load-balancing loss (Switch Transformer, GShard): E * sum_i f_i P_i, f_i the share of the N*k
    token-slots routed to expert i, P_i the mean router probability of expert i;
  - router z-loss (ST-MoE): the mean over tokens of logsumexp(logits)^2;
  - the scalar differentiated: sum(out * R) + AUX_COEF * aux + Z_COEF * z, R a fixed random tensor.

Choices that keep the comparison exact and meaningful:
  - every input is rounded to float32 first, so Troupe's float32 and float64 runs start from the
    same numbers;
  - channel 0 of every token is 1 and the last expert's router row reads it as -8, so that expert
    receives no token: the fixture covers an idle expert (its gradients are exactly zero);
  - the seed is one whose k-th and (k+1)-th router logits stand at least 1e-3 apart for every
    token, so rounding cannot change which experts a token goes to.
"""
import argparse
import os
import struct

import torch
import torch.nn.functional as F

MAGIC = b"TRPMOE\0\0"
VERSION = 1
TOKENS, C, H, EXPERTS, TOP_K, SHARED = 32, 16, 64, 4, 2, 1
AUX_COEF, Z_COEF = 0.5, 0.25
SEED = 20251202


def f32(t):
    return t.float().double()


def make_inputs(gen):
    def randn(*shape, std):
        return f32(torch.randn(*shape, generator=gen, dtype=torch.float64) * std)

    x = randn(TOKENS, C, std=1.0)
    x[:, 0] = 1.0
    router = randn(EXPERTS, C, std=0.7)
    router[EXPERTS - 1] = 0.0
    router[EXPERTS - 1, 0] = -8.0
    weights = {
        "router": router,
        "fc_w": randn(EXPERTS, H, C, std=0.3),
        "fc_b": randn(EXPERTS, H, std=0.2),
        "proj_w": randn(EXPERTS, C, H, std=0.2),
        "proj_b": randn(EXPERTS, C, std=0.2),
        "shared_fc_w": randn(H, C, std=0.3),
        "shared_fc_b": randn(H, std=0.2),
        "shared_proj_w": randn(C, H, std=0.2),
        "shared_proj_b": randn(C, std=0.2),
    }
    r = randn(TOKENS, C, std=1.0)
    return x, weights, r


def mlp(x, fc_w, fc_b, proj_w, proj_b):
    return F.gelu(x @ fc_w.T + fc_b, approximate="tanh") @ proj_w.T + proj_b


def moe_block(x, w):
    logits = x @ w["router"].T
    probs = torch.softmax(logits, dim=-1)
    top_p, top_i = probs.topk(TOP_K, dim=-1)
    gates = top_p / top_p.sum(dim=-1, keepdim=True)
    out = mlp(x, w["shared_fc_w"], w["shared_fc_b"], w["shared_proj_w"], w["shared_proj_b"])
    for e in range(EXPERTS):
        token, slot = (top_i == e).nonzero(as_tuple=True)
        if token.numel() == 0:
            continue
        y = mlp(x[token], w["fc_w"][e], w["fc_b"][e], w["proj_w"][e], w["proj_b"][e])
        out = out.index_add(0, token, gates[token, slot].unsqueeze(1) * y)
    share = F.one_hot(top_i, EXPERTS).sum(dim=(0, 1)).double() / (TOKENS * TOP_K)
    aux = EXPERTS * (share * probs.mean(dim=0)).sum()
    z = (torch.logsumexp(logits, dim=-1) ** 2).mean()
    return logits, top_i, out, aux, z


def write_fixture(path, arrays):
    out = MAGIC + struct.pack("<I", VERSION)
    out += struct.pack("<6i", TOKENS, C, H, EXPERTS, TOP_K, SHARED) + struct.pack("<2d", AUX_COEF, Z_COEF)
    out += struct.pack("<I", len(arrays))
    for name, tensor in arrays:
        data = tensor.detach().contiguous()
        code = 3 if data.dtype == torch.int32 else 0
        encoded = name.encode()
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<II", code, data.dim()) + struct.pack(f"<{data.dim()}I", *data.shape)
        out += data.numpy().astype("<i4" if code == 3 else "<f8").tobytes()
    with open(path, "wb") as f:
        f.write(out)
    return len(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/compute/golden/moe_block.bin")
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(SEED)
    x, w, r = make_inputs(gen)
    x.requires_grad_(True)
    for t in w.values():
        t.requires_grad_(True)
    logits, top_i, out, aux, z = moe_block(x, w)
    sorted_logits = logits.detach().sort(dim=-1, descending=True).values
    margin = (sorted_logits[:, TOP_K - 1] - sorted_logits[:, TOP_K]).min().item()
    assert margin > 1e-3, f"seed {SEED}: a token's choice is {margin} from a tie"
    counts = torch.bincount(top_i.flatten(), minlength=EXPERTS)
    assert counts[EXPERTS - 1] == 0, "the last expert was meant to receive no token"
    loss = (out * r).sum() + AUX_COEF * aux + Z_COEF * z
    loss.backward()
    arrays = [("x", x), ("R", r)]
    arrays += [(name, t) for name, t in w.items()]
    arrays += [("logits", logits), ("experts", top_i.to(torch.int32)), ("out", out)]
    arrays += [("aux", aux.reshape(1)), ("z", z.reshape(1)), ("loss", loss.reshape(1))]
    arrays += [("d_x", x.grad)] + [("d_" + name, t.grad) for name, t in w.items()]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    size = write_fixture(args.out, arrays)
    print(f"wrote {args.out}: {size} bytes, {len(arrays)} arrays; tokens per expert {counts.tolist()}, "
          f"smallest choice margin {margin:.3g}, aux {aux.item():.6f}, z {z.item():.6f}, loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
