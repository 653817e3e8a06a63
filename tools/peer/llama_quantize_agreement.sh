#!/usr/bin/env bash
# Files made by llama.cpp's own quantizer, run by Strata and by llama.cpp side by side: builds llama-quantize from the
# llama.cpp source node-llama-cpp bundles (tools/peer/build-llama-cpp.sh), quantizes (a) the real stories260K F32
# model and (b) a random-weight F16 Llama whose rows fit the 256-element super-blocks (make-model; stories260K's
# 64-wide rows make llama-quantize fall back to 32-element types) to each type, then prints per file the tensor
# types llama-quantize chose, whether Strata loads it, and how many of the greedy tokens agree with llama.cpp
# (node-llama-cpp, tools/peer/greedy.mjs) on two prompts; where they part, llama.cpp's own gap between its two best
# logits at that token (a near-tie, where one activation's rounding decides, or a real disagreement). Then the
# teacher-forced next-token distributions on a generated text (story_text.sh, --ctx 128, F32 KV on both sides):
# llama-perplexity writes llama.cpp's log-probabilities of every position as a KL base file, `runtime perplexity
# --kl-divergence` reads it and prints Strata's mean KL divergence from them and the top-1 agreement where llama.cpp's
# top two are more than 1e-3 apart; next to it, llama.cpp against itself (flash attention on vs off), the spread that
# integer-quantized activations give any change of rounding upstream. The output is the table in docs/ACCURACY.md.
#   bash tools/peer/llama_quantize_agreement.sh [BUILD_DIR (default build)] [TOKENS (default 100)]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
n=${2:-100}
shared=${STRATA_SHARED_DIR:-$root/../shared}
bin=$(bash "$here/build-llama-cpp.sh" llama-quantize llama-perplexity | tail -n 1)
work=${TMPDIR:-/tmp}/strata-llama-quantize
mkdir -p "$work"
bash "$here/story_text.sh" 400 > "$work/story.txt"
source "$here/teacher_forced.sh"
"$root/$build/bin/make-model" --out "$work/random-f16.gguf" --dim 256 --layers 4 --heads 4 --kv-heads 1 --ff 512 \
  --ctx 256 --type f16 2>/dev/null
types=(Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_XS IQ4_NL Q4_K_S Q5_K_S Q3_K_L Q4_0 Q4_1 Q5_0 Q5_1 Q8_0)
printf '| source | type | tensor types (llama-quantize) | Strata loads | leading greedy tokens equal to llama.cpp, and the llama.cpp top-2 logit gap where they part ("" / "Once upon a time") | teacher-forced, Strata vs llama.cpp: mean KLD (top-1 agreement) / top-1 agreement where decided (decided tokens) | llama.cpp vs itself (flash attention on/off): mean KLD (top-1 agreement) |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for src in stories260K random; do
  if [[ $src == stories260K ]]; then in="$shared/models/stories260K-f32.gguf"; else in="$work/random-f16.gguf"; fi
  for t in "${types[@]}"; do
    out="$work/$src-$t.gguf"
    "$bin/llama-quantize" "$in" "$out" "$t" >"$work/quantize.log" 2>&1 || { printf '| %s | %s | llama-quantize failed | | | | |\n' "$src" "$t"; continue; }
    mix=$(python3 "$here/gguf_tensor_types.py" "$out")
    agree=()
    loads=yes
    for prompt in "" "Once upon a time"; do
      peer=$(node "$here/greedy.mjs" --model "$out" --prompt "$prompt" --n "$n" --margins 1 2>/dev/null) || { agree+=("peer failed"); continue; }
      if ! mine=$("$root/$build/bin/runtime" --model "$out" --prompt "$prompt" --temperature 0 --max-tokens "$n" \
                 --output json --log-level error 2>"$work/runtime.err"); then
        loads="no: $(tail -1 "$work/runtime.err")"
        agree+=("-")
        continue
      fi
      agree+=("$(node -e '
        const p = JSON.parse(process.argv[1]), a = p.completion_tokens, b = JSON.parse(process.argv[2]).completion_tokens;
        let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++;
        console.log(i === a.length ? `${i}/${a.length}` : `${i}/${a.length} (gap ${p.top2_logit_gaps[i]})`);' "$peer" "$mine")")
    done
    tf="- | -"
    [[ $loads == yes ]] && tf=$(teacher_forced "$out")
    printf '| %s | %s | %s | %s | %s | %s |\n' "$src" "$t" "$mix" "$loads" "${agree[0]} / ${agree[1]}" "$tf"
  done
done
