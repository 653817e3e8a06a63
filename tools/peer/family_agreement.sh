#!/usr/bin/env bash
# The decoder plugin's families side by side with llama.cpp: for each family (and the Llama features beyond the nine
# tensors) a random-weight model from make-model (--arch / --feature, dim 64, 2 layers, GQA 2, the family's own
# vocabulary from ../shared/models/vocab, --weight-scale 3 so that next-token distributions are peaked and their top
# tokens decided) in F32 and Q8_0, then per file: how many of 100 greedy tokens equal
# llama.cpp's (node-llama-cpp, tools/peer/greedy.mjs) on two prompts, and the teacher-forced next-token agreement on a
# generated text (teacher_forced.sh: mean KL divergence from llama.cpp, top-1 agreement where llama.cpp's top two are
# more than 1e-3 apart, and llama.cpp against itself). The output is the family table in docs/ACCURACY.md.
#   bash tools/peer/family_agreement.sh [BUILD_DIR (default build)] [TOKENS (default 100)]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
n=${2:-100}
shared=${STRATA_SHARED_DIR:-$root/../shared}
bin=$(bash "$here/build-llama-cpp.sh" llama-perplexity | tail -n 1)
work=${TMPDIR:-/tmp}/strata-family-agreement
mkdir -p "$work"
bash "$here/story_text.sh" 400 > "$work/story.txt"
source "$here/teacher_forced.sh"
# name | make-model arguments | vocabulary | second prompt
families=(
  "llama|--arch llama|llama-bpe|<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
  "llama + rope_freqs|--arch llama --feature rope-freqs|llama-bpe|<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
  "llama + linear RoPE scaling|--arch llama --feature rope-scaling-linear|llama-bpe|<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
  "llama + YaRN (factor 4)|--arch llama --feature rope-scaling-yarn|llama-bpe|<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
  "llama + Q/K/V and MLP biases|--arch llama --feature qkv-bias --feature mlp-bias|llama-bpe|<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
  "qwen2|--arch qwen2|qwen2|<|im_start|>user\nHi<|im_end|>\n"
  "qwen2 + YaRN (factor 4)|--arch qwen2 --feature rope-scaling-yarn|qwen2|<|im_start|>user\nHi<|im_end|>\n"
  "qwen3 (head size 32 ≠ 64/4)|--arch qwen3 --head-dim 32|qwen2|<|im_start|>user\nHi<|im_end|>\n"
  "phi3 (fused Q/K/V + bias, fused gate-up)|--arch phi3 --feature qkv-bias|phi-3|<|user|>\nHi<|end|>\n<|assistant|>\n"
  "gemma2 (4 layers, window 8 on every other, soft-caps 50/30)|--arch gemma2 --layers 4 --window 8|llama-spm|<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
  "gemma3 (6 layers, window 8 on 5, linear RoPE scaling on the 6th)|--arch gemma3 --layers 6 --head-dim 32 --window 8 --feature rope-scaling-linear|llama-spm|<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
  "mixtral (llama with 4 experts, 2 per token)|--arch llama --experts 4 --experts-used 2|llama-spm|[INST] Hi [/INST]"
  "qwen3moe (8 experts of 64, 2 per token)|--arch qwen3moe --head-dim 32 --experts 8 --experts-used 2 --expert-ff 64|qwen2|<|im_start|>user\nHi<|im_end|>\n"
  "qwen2moe (8 experts of 64, 2 per token, a shared expert)|--arch qwen2moe --experts 8 --experts-used 2 --expert-ff 64|qwen2|<|im_start|>user\nHi<|im_end|>\n"
)
printf '| family | type | greedy tokens equal to llama.cpp ("The capital of France is" / chat prompt) | teacher-forced, Strata vs llama.cpp: mean KLD (top-1 agreement) / top-1 agreement where decided (decided tokens) | llama.cpp vs itself (flash attention on/off): mean KLD (top-1 agreement) |\n'
printf '| --- | --- | --- | --- | --- |\n'
for row in "${families[@]}"; do
  IFS='|' read -r name args vocab chat <<<"$row"
  chat=$(printf '%b' "$chat")
  for t in f32 q8_0; do
    out="$work/$(printf '%s' "$name" | tr -c 'a-z0-9' '_')-$t.gguf"
    # shellcheck disable=SC2086 # args is a list of make-model options
    "$root/$build/bin/make-model" --out "$out" --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 256 \
      --weight-scale 3 --type "$t" $args --vocab-from "$shared/models/vocab/ggml-vocab-$vocab.gguf" 2>/dev/null
    agree=()
    for prompt in "The capital of France is" "$chat"; do
      peer=$(node "$here/greedy.mjs" --model "$out" --prompt "$prompt" --n "$n" 2>/dev/null) || { agree+=("peer failed"); continue; }
      mine=$("$root/$build/bin/runtime" --model "$out" --prompt "$prompt" --temperature 0 --max-tokens "$n" \
             --output json --log-level error --kv-cache-memory 64MiB 2>"$work/runtime.err") ||
        { agree+=("runtime failed: $(tail -1 "$work/runtime.err")"); continue; }
      agree+=("$(node -e '
        const a = JSON.parse(process.argv[1]).completion_tokens, b = JSON.parse(process.argv[2]).completion_tokens;
        let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++;
        console.log(`${i}/${a.length}`);' "$peer" "$mine")")
    done
    printf '| %s | %s | %s | %s |\n' "$name" "${t^^}" "${agree[0]} / ${agree[1]}" "$(teacher_forced "$out")"
  done
done
