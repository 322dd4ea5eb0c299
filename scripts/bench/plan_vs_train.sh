#!/usr/bin/env bash
# troupe plan's predicted step time against troupe train's measured one, layout by layout, for
# `small` on this machine: two workers (a device is a core), one thread each, a global batch of 16
# sequences of 256 tokens. The MFU is calibrated once, from the plain data-parallel run (dp 2,
# zero 0) against the sgemm peak a lone worker's trainer measures, so that it includes what two
# workers on two shared cores cost each other; every other layout is then predicted from that
# figure and compared. A lone worker's MFU (printed first, for reference) is what one process
# gets with the machine to itself.
#
#   scripts/bench/plan_vs_train.sh [BUILD_DIR] [STEPS]     # default: build, 8
#
# Prints one row per layout: predicted s/step, measured s/step (from "tok/s while training"),
# measured / predicted. Run from any folder; it works in a fresh temporary one.
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
mfu=$(mfu_of 2)
echo "calibration: dp 2, batch 8 each: $tok tok/s, MFU $mfu of $device_peak GFLOP/s a rank"

plan=$("$troupe" plan --model.preset small --devices-per-node 2 --device-memory 4GB --peak-flops "${device_peak}e9" \
  --mfu "$mfu" --global-batch 16 --seq 256 --top 1000)

# layout as troupe plan names it | troupe train flags
layouts=(
  "zero 1, dp 2, micro-batch 8 x 1, recompute none|--workers 2 --train.batch_size 8 --train.zero 1"
  "zero 2, dp 2, micro-batch 8 x 1, recompute none|--workers 2 --train.batch_size 8 --train.zero 2"
  "zero 0, dp 2, micro-batch 8 x 1, recompute full|--workers 2 --train.batch_size 8 --train.recompute full"
  "zero 0, dp 2, micro-batch 8 x 1, recompute selective|--workers 2 --train.batch_size 8 --train.recompute selective"
  "zero 0, dp 1, pp 2 1f1b, micro-batch 4 x 4, recompute none|--workers 2 --train.batch_size 4 --pipeline.stages 2 --pipeline.microbatches 4 --pipeline.schedule 1f1b"
  "zero 0, dp 1, pp 2 gpipe, micro-batch 4 x 4, recompute none|--workers 2 --train.batch_size 4 --pipeline.stages 2 --pipeline.microbatches 4 --pipeline.schedule gpipe"
)
printf '%-70s %10s %10s %8s\n' "layout" "predicted" "measured" "ratio"
for row in "${layouts[@]}"; do
  name="${row%%|*}"
  read -ra flags <<<"${row#*|}"
  predicted=$(grep -F "  $name" <<<"$plan" | grep -F "s/step" | awk '{ print $2 }' | head -1)
  [ -n "$predicted" ] || { echo "troupe plan printed no layout '$name'" >&2; exit 1; }
  run "${flags[@]}"
  measured=$(awk -v t="$tok" 'BEGIN { printf "%.3f", 16 * 256 / t }')
  ratio=$(awk -v m="$measured" -v p="$predicted" 'BEGIN { printf "%.2f", m / p }')
  printf '%-70s %10s %10s %8s\n' "$name" "$predicted" "$measured" "$ratio"
done
