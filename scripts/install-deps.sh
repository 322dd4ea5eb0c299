#!/usr/bin/env bash
# Installs every Debian package Troupe builds and runs with (see docs/design.md,
# "Dependencies"). Idempotent: when all are present it changes nothing and asks no mirror.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libcaf-dev libucx-dev ucx-utils libopenblas-dev libboost-dev libspdlog-dev
  prometheus-cpp-dev catch2 libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libxxhash-dev libedit-dev libdnnl-dev fortunes
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
echo "install-deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
