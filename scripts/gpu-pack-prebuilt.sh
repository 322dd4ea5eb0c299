#!/usr/bin/env bash
# Packs CUDA binaries built here, for a GPU machine that has a driver, CUDA libraries and Python
# but none of the project's other dependencies and no package manager: scripts/gpu-run-prebuilt.sh
# unpacks and runs them there.
#
# Into one xz archive go troupe, test_gpu and test_cuda (stripped), every shared library they
# load except the C/C++ runtime (libc, libm, libstdc++, libgcc_s: the target's own are newer) and
# the CUDA libraries (cuBLAS is dlopen'd and NCCL linked by soname: both are found on the target),
# UCX's cma transport plugin, the default training corpus (Debian's fortunes), and the build's
# directory (test_gpu runs `<build dir>/troupe`, a path compiled in). cudart is static.
#
# Usage: scripts/gpu-pack-prebuilt.sh [build-dir] [archive]
#        (defaults build-gpu, troupe-gpu.tar.xz; build with -DTROUPE_CUDA=ON first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build-gpu}")
archive=$(realpath -m "${2:-troupe-gpu.tar.xz}")
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
root=$staging/troupe-gpu
mkdir -p "$root/bin" "$root/lib/ucx"

for binary in troupe tests/test_gpu tests/test_cuda; do
  strip -o "$root/bin/$(basename "$binary")" "$build/$binary"
done
ldd "$root"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r soname path; do
    case $soname in
      libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libstdc++.so.* | libgcc_s.so.* | \
        ld-linux* | libcuda.so.* | libnccl.so.* | libcublas*) ;;
      *) cp -L "$path" "$root/lib/$soname" ;;
    esac
  done
# UCX loads its transports from lib/ucx beside libucs, with libucs's suffix (.so.0).
cp -L /usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0 "$root/lib/ucx/"
cp -a /usr/share/games/fortunes "$root/fortunes"
echo "$build" >"$root/binary_dir"

tar -C "$staging" -cJf "$archive" troupe-gpu
echo "gpu-pack: $archive ($(du -h "$archive" | cut -f1)); libraries:" $(ls "$root/lib")
