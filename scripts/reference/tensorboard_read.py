#!/usr/bin/env python3
"""Reads a TensorBoard run folder with TensorBoard's own reader and prints what it found.

Usage: tensorboard_read.py RUN_DIR

One line per value, in step order within each tag:
  scalar TAG STEP VALUE
  text TAG STEP TEXT
Exit 77 when the tensorboard package is absent (pip install tensorboard); exit 1 when the
folder holds no events TensorBoard can read.
"""
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as missing:
    print(f"tensorboard is not installed: {missing}", file=sys.stderr)
    sys.exit(77)


def main(run_dir):
    # size_guidance 0: keep every value, not a reservoir sample.
    accumulator = event_accumulator.EventAccumulator(
        run_dir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    if not tags["scalars"] and not tags["tensors"]:
        print(f"{run_dir}: no scalars or texts TensorBoard can read", file=sys.stderr)
        return 1
    for tag in sorted(tags["scalars"]):
        for event in accumulator.Scalars(tag):
            print(f"scalar {tag} {event.step} {event.value:.9g}")
    for tag in sorted(tags["tensors"]):
        for event in accumulator.Tensors(tag):
            text = b"".join(event.tensor_proto.string_val).decode()
            print(f"text {tag} {event.step} {text}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
