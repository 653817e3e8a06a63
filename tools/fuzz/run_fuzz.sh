#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time from a seed corpus. Exits nonzero when the fuzzer finds a crash.
# Usage: tools/fuzz/run_fuzz.sh <build_dir> <seconds> <target> <max_len> [seed_maker] [seed files...]
#   <build_dir> was configured with CC=clang CXX=clang++ -DSTRATA_BUILD_FUZZERS=ON -DSTRATA_SANITIZE=address,undefined.
#   seed_maker is a tool of that build that writes seed inputs into the folder it is given ("" for none); seed files
#   are copied in too (a missing one is a warning). New inputs go to <build_dir>/<target>_corpus, kept between runs; crashes to <target>_artifacts.
#   FUZZ_RUNS=N in the environment also stops it after N executions (campaign.sh); FUZZ_TIMEOUT=S changes the
#   seconds one input may take before it counts as a finding (20; a campaign niced beside builds needs more, since
#   the limit is wall-clock time and a starved process can stall for longer than any input takes); FUZZ_SKIP_BUILD=1
#   skips building the target (campaign.sh builds them all first).
set -euo pipefail

if [[ $# -lt 4 ]]; then
  echo "usage: $0 <build_dir> <seconds> <target> <max_len> [seed_maker] [seed files...]" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
seconds=$2
target=$3
max_len=$4
maker=${5:-}
shift $(($# < 5 ? $# : 5))

[[ -n ${FUZZ_SKIP_BUILD:-} ]] || ninja -C "$build_dir" -j2 "$target" ${maker:+"$maker"}

corpus="$build_dir/${target}_corpus"
seeds="$build_dir/${target}_seeds"
artifacts="$build_dir/${target}_artifacts"
mkdir -p "$corpus" "$seeds" "$artifacts"
if [[ -n "$maker" ]]; then "$build_dir/bin/$maker" "$seeds"; fi
for f in "$@"; do
  if [[ -f "$f" ]]; then cp "$f" "$seeds/"; else echo "warning: $f not found; fuzzing without it" >&2; fi
done

# $seeds is read-only input; the fuzzer sees at most max_len bytes of each.
"$build_dir/bin/$target" "$corpus" "$seeds" \
  -max_len="$max_len" -rss_limit_mb=2048 -timeout="${FUZZ_TIMEOUT:-20}" -max_total_time="$seconds" \
  -artifact_prefix="$artifacts/" -print_final_stats=1 ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"}
