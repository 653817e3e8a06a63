#!/usr/bin/env bash
# Proves the SDK works for third parties: installs it from a configured Strata build, builds sdk/examples out of tree
# against the installed package (find_package(StrataSDK)), then loads every example with the real plugin host.
#
#   tools/ci/build_sdk_examples.sh [strata-build-dir]     (default: ./build)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
jobs=${STRATA_JOBS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-sdk-examples.XXXXXX")
trap 'rm -rf "$work"' EXIT

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

# Under ctest the build is already done (STRATA_SDK_CHECK_NO_BUILD=1): don't start a build from inside a test run.
if [ -z "${STRATA_SDK_CHECK_NO_BUILD:-}" ]; then
  echo "== building the loader check in $build"
  cmake --build "$build" --target strata_plugin_check -j "$jobs"
fi
if [ ! -x "$build/bin/strata_plugin_check" ]; then
  echo "error: $build/bin/strata_plugin_check is missing; build the target strata_plugin_check first" >&2
  exit 1
fi

echo "== installing the SDK to $work/sdk"
cmake --install "$build" --prefix "$work/sdk" --component strata_sdk

echo "== configuring sdk/examples out of tree"
# -Werror: the examples are what plugin authors copy, so they must build cleanly.
cmake -S "$root/sdk/examples" -B "$work/build" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$work/sdk" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror"
# The examples must come from the installed package, not the source tree.
grep -q "StrataSDK_DIR:PATH=$work/sdk/" "$work/build/CMakeCache.txt" || {
  echo "error: StrataSDK was not found under the install prefix $work/sdk" >&2
  exit 1
}

echo "== building the examples"
cmake --build "$work/build" -j "$jobs"

shopt -s nullglob
plugins=("$work/build/plugins"/libstrata_*.so)
expected=5 # one per kind: model_arch, quant, device, tier, frontend
if [ "${#plugins[@]}" -ne "$expected" ]; then
  echo "error: expected $expected example plugins in $work/build/plugins, found ${#plugins[@]}: ${plugins[*]}" >&2
  exit 1
fi

echo "== loading the examples with the plugin host"
"$build/bin/strata_plugin_check" "${plugins[@]}"
echo "== SDK examples OK"
