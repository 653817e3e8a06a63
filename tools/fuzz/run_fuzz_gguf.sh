#!/usr/bin/env bash
# Builds a seed corpus and runs fuzz_gguf for a fixed time. Exits nonzero when the fuzzer finds a crash.
# Usage: tools/fuzz/run_fuzz_gguf.sh <build_dir> <seconds>
#   <build_dir> was configured with CC=clang CXX=clang++ -DSTRATA_BUILD_FUZZERS=ON.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build_dir> <seconds>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
seconds=$2
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
shared_dir=${STRATA_SHARED_DIR:-$source_dir/../shared}

ninja -C "$build_dir" -j2 fuzz_gguf make_fuzz_seeds

corpus="$build_dir/fuzz_gguf_corpus"
seeds="$build_dir/fuzz_gguf_seeds"
artifacts="$build_dir/fuzz_gguf_artifacts"
mkdir -p "$corpus" "$seeds" "$artifacts"
"$build_dir/bin/make_fuzz_seeds" "$seeds"
model="$shared_dir/models/stories260K-q4_0.gguf"
if [[ -f "$model" ]]; then
  cp "$model" "$seeds/" # longer than -max_len: the fuzzer sees its first 64 KiB (header, KVs, tensor infos)
else
  echo "warning: $model not found; fuzzing from the writer-made seeds only" >&2
fi

# New inputs go to $corpus (kept between runs); $seeds is read-only input.
"$build_dir/bin/fuzz_gguf" "$corpus" "$seeds" \
  -max_len=65536 -rss_limit_mb=2048 -timeout=20 -max_total_time="$seconds" \
  -artifact_prefix="$artifacts/" -print_final_stats=1
