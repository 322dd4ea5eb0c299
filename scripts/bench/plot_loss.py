#!/usr/bin/env python3
"""Training-loss curves of troupe runs as one SVG, from the runs' logs or TensorBoard event files
(standard library only).

    scripts/bench/plot_loss.py --out docs/img/compress-loss.svg none=none.log bf16=bf16.log powersgd=powersgd.log
    scripts/bench/plot_loss.py --out loss.svg run=tensorboard/rank-0

Each LABEL=LOG reads the progress lines `step N/M | loss X` (training loss, drawn as a line) and
`step N/M | val loss X` (validation loss, drawn as dots) that `troupe train` prints — the console,
or a log file in text or JSON lines (monitor.log_format) — and draws one curve per run in its own
colour, with a legend giving each run's final validation loss. A LOG that is a folder, or a file
whose name holds `tfevents`, is read as TensorBoard event files (monitor.tensorboard_dir's
rank-0 folder: docs/formats/tensorboard-events.md): the scalars `train/loss` and `val/loss`.
"""

import argparse
import math
import os
import re
import struct
import sys

STEP = re.compile(r"step\s+(\d+)/\d+ \| loss ([0-9.]+)")
VAL = re.compile(r"step\s+(\d+)/\d+ \| val loss ([0-9.]+)")
FINAL_VAL = re.compile(r"final val loss ([0-9.]+)")
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 30, 50


def read_run(path):
    train, val, final = [], [], None
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            if m := VAL.search(line):
                val.append((int(m.group(1)), float(m.group(2))))
            elif m := STEP.search(line):
                train.append((int(m.group(1)), float(m.group(2))))
            if m := FINAL_VAL.search(line):
                final = float(m.group(1))
    if not train:
        sys.exit(f"plot_loss: {path} holds no 'step N/M | loss X' lines")
    return train, val, final


def varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(message):
    """A protobuf message's (field number, value) pairs: ints, fixed bits as bytes, or bytes."""
    at = 0
    while at < len(message):
        key, at = varint(message, at)
        kind = key & 7
        if kind == 0:
            value, at = varint(message, at)
        elif kind == 1:
            value, at = message[at:at + 8], at + 8
        elif kind == 5:
            value, at = message[at:at + 4], at + 4
        elif kind == 2:
            length, at = varint(message, at)
            value, at = message[at:at + length], at + length
        else:
            sys.exit(f"plot_loss: wire type {kind} in an event")
        yield key >> 3, value


def event_scalars(path):
    """(tag, step, value) of every scalar in a TFRecord event file (CRCs are not checked here)."""
    with open(path, "rb") as events:
        data = events.read()
    at = 0
    while at + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        record = data[at + 12:at + 12 + length]
        at += 12 + length + 4
        step, summary = 0, None
        for number, value in fields(record):
            if number == 2:
                step = value
            elif number == 5:
                summary = value
        for number, value in fields(summary or b""):
            if number != 1:
                continue
            tag, scalar = None, None
            for n, v in fields(value):
                if n == 1:
                    tag = v.decode()
                elif n == 2:
                    (scalar,) = struct.unpack("<f", v)
            if tag is not None and scalar is not None:
                yield tag, step, scalar


def read_events(path):
    files = [os.path.join(path, f) for f in sorted(os.listdir(path)) if "tfevents" in f] if os.path.isdir(path) else [path]
    train, val = {}, {}
    for f in files:
        for tag, step, value in event_scalars(f):
            if tag == "train/loss":
                train[step] = value
            elif tag == "val/loss":
                val[step] = value
    if not train:
        sys.exit(f"plot_loss: {path} holds no train/loss scalars")
    final = val[max(val)] if val else None
    return sorted(train.items()), sorted(val.items()), final


def nice_ticks(low, high, count=5):
    """Round values (1, 2, 2.5 or 5 times a power of ten apart) spanning [low, high]."""
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(f * magnitude for f in (1, 2, 2.5, 5, 10) if raw <= f * magnitude)
    first = math.ceil(low / step)
    return [round(k * step, 6) for k in range(first, math.floor(high / step) + 1)]


def svg(runs, title):
    steps = [s for _, (train, val, _) in runs for s, _ in train + val]
    losses = [l for _, (train, val, _) in runs for _, l in train + val]
    x_low, x_high = 0, max(steps)
    # The first steps' losses are far above the rest; the view starts near where they settle.
    y_low, y_high = min(losses), min(max(losses), sorted(losses)[int(len(losses) * 0.98)] + 0.2)

    def x(step):
        return LEFT + (step - x_low) / (x_high - x_low) * (WIDTH - LEFT - RIGHT)

    def y(loss):
        clamped = min(max(loss, y_low), y_high)
        return TOP + (y_high - clamped) / (y_high - y_low) * (HEIGHT - TOP - BOTTOM)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="14">{title}</text>']
    for tick in nice_ticks(y_low, y_high):
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    for tick in nice_ticks(x_low, x_high):
        out.append(f'<text x="{x(tick):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{tick:g}</text>')
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" y2="{HEIGHT - BOTTOM}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="black"/>')
    out.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{HEIGHT / 2}" text-anchor="middle" transform="rotate(-90 16 {HEIGHT / 2})">'
               'loss (line: training, dots: validation)</text>')
    for i, (label, (train, val, final)) in enumerate(runs):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{x(s):.1f},{y(l):.1f}" for s, l in train)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.2" stroke-opacity="0.8" points="{points}"/>')
        for s, l in val:
            out.append(f'<circle cx="{x(s):.1f}" cy="{y(l):.1f}" r="3.5" fill="{colour}"/>')
        legend_y = TOP + 16 + 18 * i
        text = label + (f" (final val loss {final:.4f})" if final is not None else "")
        out.append(f'<line x1="{WIDTH - 300}" x2="{WIDTH - 276}" y1="{legend_y - 4}" y2="{legend_y - 4}" '
                   f'stroke="{colour}" stroke-width="3"/>')
        out.append(f'<text x="{WIDTH - 270}" y="{legend_y}">{text}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="SVG file to write")
    parser.add_argument("--title", default="training loss", help="the plot's title")
    parser.add_argument("runs", nargs="+", metavar="LABEL=LOG")
    args = parser.parse_args()
    runs = []
    for run in args.runs:
        label, sep, path = run.partition("=")
        if not sep:
            sys.exit(f"plot_loss: '{run}' is not LABEL=LOG")
        events = os.path.isdir(path) or "tfevents" in os.path.basename(path)
        runs.append((label, read_events(path) if events else read_run(path)))
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(svg(runs, args.title))


if __name__ == "__main__":
    main()
