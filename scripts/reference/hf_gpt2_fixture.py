#!/usr/bin/env python3
"""Writes the Hugging Face fixture: a tiny GPT-2 folder, a byte-level BPE tokenizer and what they give.

Run by hand, not in CI, from the repository root, with a Python that has PyTorch, transformers and
tokenizers. Made and checked with Debian 12's PyTorch and transformers 4.46.3 / tokenizers 0.20.3
from PyPI in a virtual environment that sees the system's packages:

    apt-get install -y python3-torch
    /usr/bin/python3 -m venv --system-site-packages /tmp/hf-venv
    /tmp/hf-venv/bin/pip install transformers==4.46.3
    /tmp/hf-venv/bin/python scripts/reference/hf_gpt2_fixture.py [--out tests/compute/golden/hf_gpt2]

It writes (format: docs/formats/hf-fixture.md), all under 1 MiB together:
  model/       config.json, model.safetensors (float32) and tokenizer.json, as save_pretrained and
               Tokenizer.save write them: what a user downloads from the Hub
  model-bf16/  the same weights in bfloat16, sharded (model-0000N-of-0000M.safetensors and
               model.safetensors.index.json): the other storage Hugging Face folders use
  text.txt     a text with accents, CJK, emoji (multi-code-point ones too), whitespace runs, tabs,
               contractions, digits and the special token <|endoftext|> inside lines
  reference.json  the library's ids for every line of text.txt and for the whole text, the model
               window (tokens and next-token targets), the float64 loss
  logits.f64   the model's float64 logits on that window, (T, V) little-endian doubles

The tokenizer is trained here, with `tokenizers`' BPE trainer, on Debian's license texts
(/usr/share/common-licenses), so no download is needed. The model is built from a GPT2Config
with weights drawn from a fixed seed, larger than GPT-2's initialisation (std 0.1, random biases
and LayerNorm parameters), so attention is far from uniform and every tensor moves the result. Its
vocabulary (500) is not a multiple of 128, so Troupe pads it (to 512). The logits come from the
float32 weights run in float64 (model.double()), so Troupe's float64 forward meets them at
rounding level.

    --check-export DIR  loads DIR (a folder `troupe export --format hf` wrote from the imported
                        fixture, untrained) with GPT2LMHeadModel and
                        prints the largest relative difference of its float64 logits from the
                        fixture's, with the tensors it compares: what a user's Python would see.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel

SEED = 20251202
CORPUS = "/usr/share/common-licenses"
VOCAB = 500
N_LAYER, N_EMBD, N_HEAD, N_POSITIONS = 2, 32, 4, 64
SPECIAL = "<|endoftext|>"
BF16_SHARD_BYTES = 40_000

TEXT_LINES = [
    "Hello world! This is a test of the GNU General Public License, version 3.",
    "  Leading spaces, trailing spaces   ",
    "Tabs\tand\t\ttwo tabs; runs of     five spaces and a double  space.",
    "Contractions: don't, it's, we'll, they've, I'm, you'd, they're, DON'T.",
    "Digits 12345 and 3.14159, 2026-12-02, 1,000,000 and ½ ⅓ ² ٣.",
    "Accents: café, naïve, Ångström, Straße, œuvre; Ελληνικά και Русский текст.",
    "CJK: 日本語のテキスト、中文文本。한국어 텍스트.",
    "Emoji: 👍 👍🏽 🤖🚀 ❤️ 👨‍👩‍👧 🇫🇷 and ☕.",
    "A document ends here.<|endoftext|>And the next one starts<|endoftext|><|endoftext|>",
    "Symbols: <>&\"'`~^@#$%*()_+=[]{}|\\/ and a lone ' quote's end '",
    "Mixed\u00a0no-break\u2003em-space\u3000ideographic space and zero\u200bwidth.",
    "Rare classes: \u01c5 title case, \u216b roman twelve, e\u0301 combining, \x0b\x0c\r controls, \u2028\x85 separators.",
    "",
    "    ",
    "The end.",
]


def train_tokenizer():
    files = sorted(os.path.join(CORPUS, f) for f in os.listdir(CORPUS) if os.path.isfile(os.path.join(CORPUS, f)))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[SPECIAL], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train(files, trainer)
    if tokenizer.get_vocab_size() != VOCAB:
        sys.exit(f"the trained vocabulary has {tokenizer.get_vocab_size()} tokens, not {VOCAB}")
    return tokenizer


def build_model():
    torch.manual_seed(SEED)
    config = GPT2Config(vocab_size=VOCAB, n_positions=N_POSITIONS, n_embd=N_EMBD, n_layer=N_LAYER, n_head=N_HEAD,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=0, eos_token_id=0, tie_word_embeddings=True)
    model = GPT2LMHeadModel(config)
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = 0.1 * torch.randn(p.shape, generator=gen)
            p.copy_(1.0 + noise if (".ln_" in name and name.endswith(".weight")) else noise)
    return model.eval()


def float64_logits(model, tokens):
    model64 = GPT2LMHeadModel(model.config).double().eval()
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    with torch.no_grad():
        return model64(torch.tensor([tokens])).logits[0]


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def make(out):
    tokenizer = train_tokenizer()
    model = build_model()
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    model.save_pretrained(os.path.join(out, "model"), safe_serialization=True)
    tokenizer.save(os.path.join(out, "model", "tokenizer.json"))
    bf16 = build_model().to(torch.bfloat16)
    bf16.save_pretrained(os.path.join(out, "model-bf16"), safe_serialization=True, max_shard_size=BF16_SHARD_BYTES)
    for folder in ("model", "model-bf16"):
        extra = os.path.join(out, folder, "generation_config.json")
        if os.path.exists(extra):
            os.remove(extra)  # not a part of the model; Troupe ignores it

    text = "\n".join(TEXT_LINES) + "\n"
    write(os.path.join(out, "text.txt"), text)
    line_ids = [tokenizer.encode(line).ids for line in TEXT_LINES]
    for line, ids in zip(TEXT_LINES, line_ids):
        if tokenizer.decode(ids, skip_special_tokens=False) != line:
            sys.exit(f"the library does not decode its own ids back to {line!r}")
    text_ids = tokenizer.encode(text).ids
    window = text_ids[: N_POSITIONS + 1]
    if len(window) != N_POSITIONS + 1:
        sys.exit("the text is shorter than the model window")
    tokens, targets = window[:-1], window[1:]
    logits = float64_logits(model, tokens)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(targets)).item()
    logits.numpy().astype("<f8").tofile(os.path.join(out, "logits.f64"))
    reference = {
        "vocab_size": VOCAB,
        "line_ids": line_ids,
        "text_ids": text_ids,
        "tokens": tokens,
        "targets": targets,
        "logits_shape": list(logits.shape),
        "loss": repr(loss),
    }
    write(os.path.join(out, "reference.json"), json.dumps(reference, separators=(",", ":")) + "\n")
    size = folder_bytes(out)
    print(f"wrote {out}: {size} bytes; vocabulary {VOCAB}, {len(text_ids)} text tokens, loss {loss!r}")
    if size >= 1 << 20:
        sys.exit(f"the fixture is {size} bytes, over the 1 MiB it must stay under")


def check_export(out, exported):
    reference = json.load(open(os.path.join(out, "reference.json")))
    expected = np.fromfile(os.path.join(out, "logits.f64"), dtype="<f8").reshape(reference["logits_shape"])
    with tempfile.TemporaryDirectory() as folder:
        for name in os.listdir(exported):
            shutil.copy(os.path.join(exported, name), folder)
        model = GPT2LMHeadModel.from_pretrained(folder).double().eval()
    with torch.no_grad():
        logits = model(torch.tensor([reference["tokens"]])).logits[0].numpy()
    error = np.abs(logits - expected).max() / np.abs(expected).max()
    print(f"{exported}: float64 logits {logits.shape}, largest difference {error:.3e} of the largest logit")
    if error > 1e-10:
        sys.exit("the exported folder does not give the fixture's logits")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/compute/golden/hf_gpt2")
    parser.add_argument("--check-export", metavar="DIR")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.check_export:
        check_export(args.out, args.check_export)
    else:
        make(args.out)


if __name__ == "__main__":
    main()
