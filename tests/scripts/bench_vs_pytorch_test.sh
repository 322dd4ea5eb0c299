#!/usr/bin/env bash
# `troupe bench compute --vs-pytorch` against a real PyTorch: the probe, scripts/bench/
# torch_cpu_train.py at tiny's dimensions on 1 and 2 threads with troupe's OpenBLAS kernels,
# alternating rounds and the ratio.
# It needs a Python that imports torch (python3 on PATH, else Debian's /usr/bin/python3 with
# python3-torch); without one it prints SKIPPED with its name and exits 77, which ctest reports
# as Skipped (tests/CMakeLists.txt): never a silent pass.
#
#   bash tests/scripts/bench_vs_pytorch_test.sh build/troupe
set -euo pipefail
troupe="$(realpath "$1")"
name="bench: compute --vs-pytorch alternates rounds with a real PyTorch"
python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import torch' 2>/dev/null; then
    python="$(command -v "$candidate")"
    break
  fi
done
if [ -z "$python" ]; then
  echo "SKIPPED (no python3 here imports torch: apt-get install python3-torch): $name"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
out="$("$troupe" bench compute --models tiny --threads 1,2 --steps 2 --warmup 1 --rounds 2 --python "$python")"
printf '%s\n' "$out"
failures=0
expect() {
  if ! grep -Eq -- "$1" <<<"$out"; then
    echo "FAILED: no line matches: $1"
    failures=$((failures + 1))
  fi
}
expect "^pytorch: torch [0-9][^ ]* attention (sdpa|explicit) adamw (fused|foreach|for-loop), from $python"
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  expect "^pytorch: runs with OPENBLAS_CORETYPE=[A-Za-z0-9]+, the OpenBLAS kernels troupe runs$"
fi
for threads in 1 2; do
  for round in 1 2; do
    expect "^  tiny, $threads thread\(s\), round $round/2: troupe [0-9]+ tokens/s, pytorch [0-9]+ tokens/s, troupe/pytorch [0-9.]+$"
  done
  expect "^tiny +$threads +0\.84M +8 +128 .* [0-9]+ +[0-9]+\.[0-9]{3}$"
done
[ "$failures" -eq 0 ] && echo "PASSED: $name"
exit "$failures"
