#!/usr/bin/env bash
# Writes the seed entry and runs fuzz_kv_entry for a fixed time. Exits nonzero when the fuzzer finds a crash.
# Usage: tools/fuzz/run_fuzz_kv_entry.sh <build_dir> <seconds>
#   <build_dir> was configured with CC=clang CXX=clang++ -DSTRATA_BUILD_FUZZERS=ON.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build_dir> <seconds>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
seconds=$2

ninja -C "$build_dir" -j2 fuzz_kv_entry make_kv_fuzz_seed

corpus="$build_dir/fuzz_kv_entry_corpus"
seeds="$build_dir/fuzz_kv_entry_seeds"
artifacts="$build_dir/fuzz_kv_entry_artifacts"
mkdir -p "$corpus" "$seeds" "$artifacts"
"$build_dir/bin/make_kv_fuzz_seed" "$seeds"

# New inputs go to $corpus (kept between runs); $seeds is read-only input. An entry here is 48 + 16 + 64 bytes.
"$build_dir/bin/fuzz_kv_entry" "$corpus" "$seeds" \
  -max_len=4096 -rss_limit_mb=2048 -timeout=20 -max_total_time="$seconds" \
  -artifact_prefix="$artifacts/" -print_final_stats=1
