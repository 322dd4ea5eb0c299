#!/usr/bin/env bash
# On a GPU machine, from the repository root: unpacks an archive of scripts/gpu-pack-prebuilt.sh
# and runs, each step under its own timeout and all within one overall deadline, the CUDA tests
# and the GPU figures:
#   the device, driver, CUDA and library paths; test_cuda; test_gpu file by file (Catch2, each
#   case's time and result); short `troupe train` runs on the cuda backend in fp32 and bf16;
#   `troupe bench gpu --model gpt2 --batch 16 --seq 1024` (with PyTorch eager and torch.compile
#   beside it, from scripts/bench/torch_gpt2.py) and its fp32 run; then the test_gpu cases that
#   start jobs.
# Everything goes to stdout and to $OUT/log (or ./gpu-run.log). cuBLAS and NCCL are taken from the
# machine (the CUDA toolkit or PyTorch's nvidia packages).
#
# Usage: scripts/gpu-run-prebuilt.sh [archive] [seconds] [steps]
#        (defaults troupe-gpu.tar.xz, 400, every step; steps is an extended regular expression
#        over the step names below, e.g. 'test_gpu training|train cuda')
set -uo pipefail
archive=${1:-troupe-gpu.tar.xz}
deadline=$((SECONDS + ${2:-400}))
selected=${3:-.}
log=${OUT:+$OUT/log}
log=${log:-gpu-run.log}
exec > >(tee -a "$log") 2>&1
export PYTHONUNBUFFERED=1

work=/tmp/troupe-gpu-run
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xJf "$archive" || { echo "gpu-run: cannot unpack $archive"; exit 1; }
root=$work/troupe-gpu
bin=$root/bin

# CUDA libraries: the first copy of each found (toolkit first, then PyTorch's wheels).
cuda_dirs=""
for soname in libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
  found=""
  for dir in /usr/local/cuda/lib64 /usr/local/cuda /opt/torch /opt /usr/lib/x86_64-linux-gnu; do
    found=$(find -L "$dir" -maxdepth 9 -name "$soname" 2>/dev/null | head -1)
    [ -n "$found" ] && break
  done
  echo "gpu-run: $soname: ${found:-NOT FOUND}"
  [ -n "$found" ] && cuda_dirs="$cuda_dirs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$root/lib${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR=$root/lib/ucx
# The compiled-in paths: test_gpu runs <build dir>/troupe; the default corpus is Debian's fortunes.
binary_dir=$(cat "$root/binary_dir")
mkdir -p "$binary_dir" && ln -sf "$bin/troupe" "$binary_dir/troupe"
if [ ! -e /usr/share/games/fortunes ]; then mkdir -p /usr/share/games && cp -a "$root/fortunes" /usr/share/games/fortunes; fi
export PATH="$bin:$PATH"

failed=()
# step NAME SECONDS COMMAND...: runs COMMAND under min(SECONDS, time left), reports rc and time.
step() {
  local name=$1 limit=$2
  shift 2
  if ! grep -Eq "$selected" <<<"$name"; then
    echo "=== $name: not selected"
    return
  fi
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 15 ]; then
    echo "=== $name: NOT RUN (deadline)"
    failed+=("$name (not run)")
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name (limit ${limit}s): $*"
  local start=$SECONDS
  timeout -k 5 "$limit" stdbuf -oL -eL "$@"
  local rc=$?
  echo "=== $name: rc $rc in $((SECONDS - start)) s"
  # 77: test_gpu skipped its cases; only [multi-gpu] cases may be, on a machine with one GPU.
  if [ "$rc" -ne 0 ] && ! { [ "$rc" -eq 77 ] && [[ $name == *multi-gpu* ]]; }; then failed+=("$name (rc $rc)"); fi
}

echo "=== machine"
date -u
uname -r
nvidia-smi
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm,clocks.max.mem --format=csv
nvcc --version 2>/dev/null | tail -2
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
echo "=== ldd troupe"
ldd "$bin/troupe" | grep -E "not found|nccl|caf|ucp|openblas|stdc"
ldd "$bin/troupe" | grep -q "not found" && echo "gpu-run: a library is missing (above)"

step test_cuda 60 test_cuda
step "test_gpu ops" 120 test_gpu -# "[#test_ops]" -d yes
step "test_gpu training" 120 test_gpu -# "[#test_training]" -d yes
step "test_gpu nccl" 60 test_gpu -# "[#test_nccl]" -d yes
step "test_gpu multi-gpu" 30 test_gpu "[multi-gpu]"
step "train cuda" 60 troupe train --model.preset small --train.steps 30 --train.val_batches 2 --sample.tokens 64 \
  --train.backend cuda
step "train cuda recompute full" 60 troupe train --model.preset small --train.steps 30 --train.val_batches 2 \
  --sample.tokens 64 --train.backend cuda --train.recompute full
step "train cuda bf16" 60 troupe train --model.preset small --train.steps 30 --train.val_batches 2 \
  --sample.tokens 64 --train.backend cuda --train.precision bf16
# The same run again: whether bf16 repeats its final parameter norm (gpu.md).
step "train cuda bf16 again" 60 troupe train --model.preset small --train.steps 30 --train.val_batches 2 \
  --sample.tokens 64 --train.backend cuda --train.precision bf16
step "bench gpu" 240 troupe bench gpu --model gpt2 --batch 16 --seq 1024
step "bench gpu fp32" 60 troupe bench gpu --model gpt2 --batch 16 --seq 1024 --precision fp32 --torch-script ''
step "test_gpu data-parallel jobs" 150 test_gpu -# "[#test_device_data_parallel]~[multi-gpu]" -d yes
step "test_gpu checkpoints" 150 test_gpu -# "[#test_gpu_checkpoints]" -d yes

echo "=== summary"
if [ ${#failed[@]} -eq 0 ]; then
  echo "gpu-run: every step passed"
else
  printf 'gpu-run: failed: %s\n' "${failed[@]}"
fi
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,power.draw --format=csv,noheader
status=$((${#failed[@]} == 0 ? 0 : 1))
sleep 1  # let tee write the last lines
exit $status
