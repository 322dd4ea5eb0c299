#!/usr/bin/env bash
# Installs dependencies, configures and builds the troupe program into build/ (Release, no
# -march=native): what the README's first command needs. scripts/test.sh builds the tests too.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
build_type="${TROUPE_BUILD_TYPE:-Release}"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type"
fi
cmake --build build --parallel "$(nproc)" --target troupe
