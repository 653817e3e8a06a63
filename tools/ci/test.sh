#!/usr/bin/env bash
# The one test command (README, .ci/run): install packages, build everything with warnings as errors, run every test,
# build the SDK examples out of tree against the installed SDK, and fuzz the GGUF parser.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/ci/setup.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
bash tools/ci/build_sdk_examples.sh build
# Fuzzing needs clang's libFuzzer: a separate sanitizer build of the parser only.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTRATA_BUILD_FUZZERS=ON -DSTRATA_BUILD_TESTS=OFF
cmake --build build-fuzz -j"$jobs" --target fuzz_gguf
bash tools/fuzz/run_fuzz_gguf.sh build-fuzz "${STRATA_FUZZ_SECONDS:-60}"
echo "strata: all checks passed"
