#!/usr/bin/env bash
# troupe plan's predicted step time against troupe train's measured one, layout by layout, for
# `small` on this machine: two workers (a device is a core), one thread each, a global batch of 16
# sequences of 256 tokens. The MFU is calibrated from the plain data-parallel run (dp 2, zero 0),
# which is run again just before every other layout: on a machine shared with other work the
# cores' speed drifts within minutes, and a calibration next in time to each run keeps that drift
# out of the comparison. Each row's prediction is therefore troupe plan's step time for the layout
# scaled by measured ÷ predicted of the calibration run before it (the same as planning with the
# MFU that run measured). The first two runs (a lone worker, then dp 2) print the MFU each reaches
# against the sgemm peak the lone worker's trainer measures, for reference.
#
#   scripts/bench/plan_vs_train.sh [BUILD_DIR] [STEPS]     # default: build, 8
#
# Prints one row per layout: the calibration's measured s/step, the layout's predicted and measured
# s/step (from "tok/s while training"), measured / predicted. It works in a fresh temporary folder.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
steps="${2:-8}"
troupe="$build/troupe"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

common=(--config "$root/configs/small.toml" --train.steps "$steps" --train.val_every 0 --train.val_batches 1
        --sample.tokens 0 --train.threads 1 --train.log_every 1000)

# Tokens per second while training, and the trainer's sgemm peak per rank (GFLOP/s).
run() {
  "$troupe" train "${common[@]}" "$@" >out.txt 2>&1 || { cat out.txt >&2; exit 1; }
  tok=$(sed -n 's/.* \([0-9.]*\) tok\/s while training.*/\1/p' out.txt | tail -1)
  peak=$(sed -n 's/.*MFU over \([0-9.]*\) GFLOP\/s a rank.*/\1/p' out.txt | head -1)
}

mfu_of() {  # tokens/s of `workers` ranks → MFU against the lone worker's sgemm peak
  awk -v t="$tok" -v f="$flops_per_token" -v p="$device_peak" -v w="$1" 'BEGIN { printf "%.3f", t * f / (w * p * 1e9) }'
}
# The device's peak comes from the lone worker, which measures it with the cores to itself (ranks
# that measure at once share them and see about half).
run --workers 1 --train.batch_size 8
flops_per_token=$(sed -n 's/.*, \([0-9.e+]*\) model FLOPs a token.*/\1/p' out.txt | head -1)
device_peak=$peak
echo "1 worker, batch 8: $tok tok/s, sgemm peak $device_peak GFLOP/s, MFU $(mfu_of 1)"
run --workers 2 --train.batch_size 8
echo "dp 2, batch 8 each: $tok tok/s, MFU $(mfu_of 2) of $device_peak GFLOP/s a rank"

# Only ratios of planned times are used below, which neither the peak nor the MFU changes.
plan=$("$troupe" plan --model.preset small --devices-per-node 2 --device-memory 4GB --peak-flops "${device_peak}e9" \
  --mfu 0.5 --global-batch 16 --seq 256 --top 1000)
planned() {  # troupe plan's s/step for the layout it names $1
  grep -F "  $1" <<<"$plan" | grep -F "s/step" | awk '{ print $2 }' | head -1
}
baseline="zero 0, dp 2, micro-batch 8 x 1, recompute none"

# layout as troupe plan names it | troupe train flags
layouts=(
  "zero 1, dp 2, micro-batch 8 x 1, recompute none|--workers 2 --train.batch_size 8 --train.zero 1"
  "zero 2, dp 2, micro-batch 8 x 1, recompute none|--workers 2 --train.batch_size 8 --train.zero 2"
  "zero 0, dp 2, micro-batch 8 x 1, recompute full|--workers 2 --train.batch_size 8 --train.recompute full"
  "zero 0, dp 2, micro-batch 8 x 1, recompute selective|--workers 2 --train.batch_size 8 --train.recompute selective"
  "zero 0, dp 1, pp 2 1f1b, micro-batch 4 x 4, recompute none|--workers 2 --train.batch_size 4 --pipeline.stages 2 --pipeline.microbatches 4 --pipeline.schedule 1f1b"
  "zero 0, dp 1, pp 2 gpipe, micro-batch 4 x 4, recompute none|--workers 2 --train.batch_size 4 --pipeline.stages 2 --pipeline.microbatches 4 --pipeline.schedule gpipe"
)
printf '%-66s %11s %10s %9s %6s\n' "layout" "calibration" "predicted" "measured" "ratio"
for row in "${layouts[@]}"; do
  name="${row%%|*}"
  read -ra flags <<<"${row#*|}"
  [ -n "$(planned "$name")" ] || { echo "troupe plan printed no layout '$name'" >&2; exit 1; }
  run --workers 2 --train.batch_size 8
  calibration=$(awk -v t="$tok" 'BEGIN { printf "%.3f", 16 * 256 / t }')
  predicted=$(awk -v l="$(planned "$name")" -v b="$(planned "$baseline")" -v c="$calibration" \
    'BEGIN { printf "%.3f", l / b * c }')
  run "${flags[@]}"
  measured=$(awk -v t="$tok" 'BEGIN { printf "%.3f", 16 * 256 / t }')
  ratio=$(awk -v m="$measured" -v p="$predicted" 'BEGIN { printf "%.2f", m / p }')
  printf '%-66s %11s %10s %9s %6s\n' "$name" "$calibration" "$predicted" "$measured" "$ratio"
done
