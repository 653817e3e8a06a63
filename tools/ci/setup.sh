#!/usr/bin/env bash
# Installs the Debian 12 packages Strata builds with (idempotent; uses sudo when not root).
set -euo pipefail
pkgs=(build-essential cmake ninja-build clang libclang-rt-14-dev pkg-config
      libboost-dev libboost-filesystem-dev libboost-system-dev libtomlplusplus-dev libhwloc-dev liburing-dev
      libfmt-dev libspdlog-dev libxxhash-dev libpcre2-dev libicu-dev nlohmann-json3-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
      libopenmpi-dev openmpi-bin nodejs python3)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Debian's nodejs comes without npm; NodeSource's bundles it (and conflicts with the npm package).
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
