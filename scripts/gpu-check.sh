#!/usr/bin/env bash
# On a machine with a GPU: build the CUDA targets, run the [gpu] tests, then `troupe bench gpu`
# (gpt2, B=16, T=1024, one GPU; PyTorch eager and torch.compile beside it when torch imports).
# Usage: scripts/gpu-check.sh [build-dir]   (default build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
jobs=$(nproc)

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || {
  echo "gpu-check: nvidia-smi finds no GPU; the [gpu] tests would all be skipped" >&2
  exit 1
}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTROUPE_CUDA=ON
ninja -C "$build" -j "$jobs" troupe test_gpu test_cuda test_compute
# --no-tests=error: a [gpu] label that matches nothing is a broken build, not a pass. A skipped
# test (no device after all) shows as "Skipped" and fails the check below.
ctest --test-dir "$build" -L gpu --no-tests=error --output-on-failure | tee "$build/gpu-tests.log"
ctest --test-dir "$build" -R '^cuda:' --no-tests=error --output-on-failure
# Only [multi-gpu] cases may be skipped, and only with fewer than two GPUs.
gpus=$(nvidia-smi -L | wc -l)
allowed=""
if [ "$gpus" -lt 2 ]; then allowed=$("$build/tests/test_gpu" --list-test-names-only "[multi-gpu]" | sed '/^$/d'); fi
unexpected=$(grep "(Skipped)" "$build/gpu-tests.log" | sed 's/^.* - gpu://; s/ (Skipped)$//' |
  grep -vxF -f <(printf '%s\n' "$allowed") || true)
if [ -n "$unexpected" ]; then
  echo "gpu-check: [gpu] tests skipped on a machine that should run them:" >&2
  echo "$unexpected" >&2
  exit 1
fi
"$build/troupe" bench gpu --model gpt2 --batch 16 --seq 1024
