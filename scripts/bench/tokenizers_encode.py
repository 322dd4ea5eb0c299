#!/usr/bin/env python3
"""Encoding throughput of Hugging Face's `tokenizers` library on one thread, for `troupe bench
tokenize --vs-python`, which compares Troupe's tokenizer with it on the same text and tokenizer.json.

The text is cut into the same ~1 MB chunks at newlines as Troupe cuts it (a chunk ends after a
'\\n' between two non-space ASCII bytes) and each chunk is encoded with Tokenizer.encode, timed
from the first chunk to the last. RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false hold the
library to one thread. Prints "tokens <n>" and "tokens_per_s <value>" on its last lines; exits
77 with "skipped: ..." when the library is not installed.

  python3 scripts/bench/tokenizers_encode.py --tokenizer tokenizer.json --text corpus.txt
"""
import argparse
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"


def ascii_non_space(c):
    return c < "\x80" and c not in " \t\n\v\f\r"


def chunks(text, target):
    start = 0
    while start < len(text):
        cut = len(text)
        at = text.find("\n", start + max(target, 1) - 1)
        while at != -1:
            if at >= 1 and at + 1 < len(text) and ascii_non_space(text[at - 1]) and ascii_non_space(text[at + 1]):
                cut = at + 1
                break
            at = text.find("\n", at + 1)
        yield text[start:cut]
        start = cut


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--text", required=True)
    args = p.parse_args()
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print(f"skipped: {sys.executable} has no tokenizers module")
        sys.exit(77)
    tokenizer = Tokenizer.from_file(args.tokenizer)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    parts = list(chunks(text, 1 << 20))
    started = time.perf_counter()
    tokens = sum(len(tokenizer.encode(part).ids) for part in parts)
    seconds = time.perf_counter() - started
    print(f"tokens {tokens}")
    print(f"tokens_per_s {tokens / seconds}")


if __name__ == "__main__":
    main()
