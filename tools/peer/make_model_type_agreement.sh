#!/usr/bin/env bash
# make-model's per-tensor types against llama-quantize's (the llama.cpp node-llama-cpp bundles, built by
# build-llama-cpp.sh): for each family (dense llama, phi3 with fused Q/K/V, and the mixtures mixtral with 8 experts,
# qwen2moe with a shared expert, qwen3moe) an F32 model from make-model is quantized by llama-quantize to each
# mixture, and make-model writes the same shape and mixture itself; every tensor's type must agree. Prints a table;
# exits 1 on any difference.
#   bash tools/peer/make_model_type_agreement.sh [BUILD_DIR]     (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
bin=$(bash "$here/build-llama-cpp.sh" llama-quantize)
vocab=${STRATA_SHARED_DIR:-$root/../shared}/models/vocab/ggml-vocab-llama-spm.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
families=("llama:" "phi3:--arch phi3" "mixtral:--experts 8 --experts-used 2"
          "qwen2moe:--arch qwen2moe --experts 8 --experts-used 2 --expert-ff 256"
          "qwen3moe:--arch qwen3moe --experts 4 --experts-used 2 --expert-ff 256")
types=(q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs q4_0 q8_0)
status=0
printf '| family | %s |\n|---|%s\n' "$(IFS='|'; echo "${types[*]}" | sed 's/|/ | /g')" "$(printf -- '---|%.0s' "${types[@]}")"
for f in "${families[@]}"; do
  name=${f%%:*}
  read -r -a args <<< "${f#*:}"
  shape=(--dim 256 --layers 8 --heads 4 --kv-heads 1 --ff 512 --ctx 256 --untied "${args[@]}" --vocab-from "$vocab")
  "$root/$build/bin/make-model" --out "$work/$name-f32.gguf" --type f32 "${shape[@]}" 2>/dev/null
  row="| $name |"
  for t in "${types[@]}"; do
    "$bin/llama-quantize" "$work/$name-f32.gguf" "$work/llq.gguf" "${t^^}" > "$work/llq.log" 2>&1
    "$root/$build/bin/make-model" --out "$work/mm.gguf" --type "$t" "${shape[@]}" 2>/dev/null
    if out=$(python3 "$here/gguf_tensor_types.py" --diff "$work/llq.gguf" "$work/mm.gguf"); then
      row+=" ${out%% *} equal |"
    else
      row+=" DIFFER |"
      echo "$name $t: $out" >&2
      status=1
    fi
  done
  echo "$row"
done
exit $status
