#!/usr/bin/env bash
# `runtime perplexity` against llama.cpp's own llama-perplexity (built from node-llama-cpp's llama.cpp by
# build-llama-cpp.sh) on the shared stories260K files: the same generated story text, the same --ctx, F32 KV cache on
# both sides (Strata's KV is F32; llama.cpp's default is F16). Prints each file's final PPL from both tools and their
# relative difference, then the mean KL divergence of each quantized file against F32 from both tools, and checks that
# a base file written by either tool is read by the other. Exits 1 when a PPL differs by more than 0.5 %.
#   bash tools/peer/perplexity_vs_llama_cpp.sh            (STRATA_BUILD_DIR=build, CTX=128, SENTENCES=400)
# Not a test: CI does not build llama.cpp. The results are in docs/ACCURACY.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${STRATA_BUILD_DIR:-build}
[[ $build = /* ]] || build="$root/$build"
runtime="$build/bin/runtime"
[[ -x $runtime ]] || { echo "perplexity_vs_llama_cpp: $runtime is missing; build it (cmake --build $build --target runtime) or set STRATA_BUILD_DIR" >&2; exit 2; }
models=${STRATA_SHARED_DIR:-$root/../shared}/models
ctx=${CTX:-128}
sentences=${SENTENCES:-400}
bin=$(nice -n 10 bash "$here/build-llama-cpp.sh" llama-perplexity | tail -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bash "$here/story_text.sh" "$sentences" > "$work/story.txt"

final_ppl() { sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' | tail -n 1; }
mean_kld() { sed -n 's/^Mean    KLD: *\([-0-9.]*\).*/\1/p' | tail -n 1; }
same_top() { sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' | tail -n 1; }
llama_once() { "$bin/llama-perplexity" -c "$ctx" -ctk f32 -ctv f32 "$@" 2>&1; }
# llama-perplexity logs through a background thread that its exit does not wait for (common_log_main() is leaked on
# purpose, log.cpp says "this design may cause logs to be lost"), so now and then its last lines are missing, exit
# status 0 (here one run in ten when idle, more under load): run it again, up to five times, until they are there.
llama() {
  local out try
  for try in 1 2 3 4 5; do
    out=$(llama_once "$@")
    if grep -q 'Final estimate\|Same top p:' <<<"$out"; then break; fi
    echo "perplexity_vs_llama_cpp: llama-perplexity's output ended early (try $try of 5)" >&2
  done
  printf '%s\n' "$out"
}
ours() { "$runtime" perplexity --ctx "$ctx" "$@" 2>/dev/null; }

echo "text: $sentences generated sentences ($(wc -c < "$work/story.txt") bytes), --ctx $ctx; llama.cpp $(git -C "$bin/../../src" rev-parse --short HEAD 2>/dev/null || echo '?')"
printf '%-18s %12s %18s %10s\n' file "Strata PPL" "llama.cpp PPL" "rel. diff"
worst=0
for q in f32 f16 q8_0 q4_0; do
  m="$models/stories260K-$q.gguf"
  a=$(ours -m "$m" -f "$work/story.txt" | final_ppl)
  b=$(llama -m "$m" -f "$work/story.txt" | final_ppl)
  rel=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.3f%%", 100 * (a - b) / b }')
  printf '%-18s %12s %18s %10s\n' "stories260K-$q" "$a" "$b" "$rel"
  worst=$(awk -v w="$worst" -v a="$a" -v b="$b" 'BEGIN { d = 100 * (a - b) / b; if (d < 0) d = -d; printf "%.3f", (d > w ? d : w) }')
done

# KL divergence against F32: Strata with both models loaded, llama.cpp from its base file; then each tool reads the
# other's base file.
llama_once -m "$models/stories260K-f32.gguf" -f "$work/story.txt" --kl-divergence-base "$work/llama-f32.logits" > /dev/null
ours -m "$models/stories260K-f32.gguf" -f "$work/story.txt" --kl-divergence-base "$work/strata-f32.logits" --save-kl-base > /dev/null
echo
printf '%-18s %16s %16s %22s %22s\n' "vs F32" "Strata KLD" "llama.cpp KLD" "Strata on llama base" "llama on Strata base"
for q in f16 q8_0 q4_0; do
  m="$models/stories260K-$q.gguf"
  s=$(ours -m "$m" -f "$work/story.txt" --kl-divergence-model "$models/stories260K-f32.gguf")
  l=$(llama -m "$m" --kl-divergence --kl-divergence-base "$work/llama-f32.logits")
  x=$(ours -m "$m" --kl-divergence --kl-divergence-base "$work/llama-f32.logits")
  y=$(llama -m "$m" --kl-divergence --kl-divergence-base "$work/strata-f32.logits")
  printf '%-18s %16s %16s %22s %22s\n' "stories260K-$q" "$(mean_kld <<<"$s")" "$(mean_kld <<<"$l")" \
    "$(mean_kld <<<"$x")" "$(mean_kld <<<"$y")"
  printf '%-18s %16s %16s %22s %22s\n' "  same top p %" "$(same_top <<<"$s")" "$(same_top <<<"$l")" \
    "$(same_top <<<"$x")" "$(same_top <<<"$y")"
done
echo
if awk -v w="$worst" 'BEGIN { exit !(w > 0.5) }'; then
  echo "FAIL: a perplexity differs from llama-perplexity's by $worst % (target: within 0.5 %)"
  exit 1
fi
echo "OK: every perplexity within $worst % of llama-perplexity's (target: 0.5 %)"
