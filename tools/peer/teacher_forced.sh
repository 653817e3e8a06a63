# Teacher-forced agreement of Strata with llama.cpp on one model file, shared by the peer agreement scripts.
# Source it after setting: bin (llama.cpp's tools: llama-perplexity), work (a scratch folder holding story.txt from
# story_text.sh), root (the repository) and build (the build folder under it).
# teacher_forced <model> prints Strata's mean KLD from llama.cpp with its top-1 agreement over all positions and where
# llama.cpp's top two are more than 1e-3 apart (with the count), then llama.cpp against itself (flash attention off
# vs on) the same way: llama-perplexity writes llama.cpp's log-probabilities
# of every position (--ctx 128, F32 KV) as a KL base file, `runtime perplexity --kl-divergence` reads it and prints
# Strata's figures.

# llama-perplexity now and then loses its last log lines (see perplexity_vs_llama_cpp.sh): up to five tries.
llama_kld() {
  local out try
  for try in 1 2 3 4 5; do
    out=$("$bin/llama-perplexity" -c 128 -ctk f32 -ctv f32 -f "$work/story.txt" "$@" 2>&1) || true
    grep -q 'Mean    KLD' <<<"$out" && break
  done
  printf '%s (same top-1 %s %%)\n' "$(sed -n 's/^Mean    KLD: *\([-0-9.]*\).*/\1/p' <<<"$out" | tail -n 1)" \
    "$(sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' <<<"$out" | tail -n 1)"
}
# "<Strata mean KLD from llama.cpp> (same top-1 <all positions> %) / <top-1 agreement where decided> % (<decided tokens>)
#  | <llama.cpp FA off vs on: mean KLD> (same top-1 <all positions> %)"
teacher_forced() { # <model>
  rm -f "$work/base.logits"
  "$bin/llama-perplexity" -m "$1" -c 128 -ctk f32 -ctv f32 -f "$work/story.txt" -fa on \
    --kl-divergence-base "$work/base.logits" >/dev/null 2>&1 || true
  [[ -s $work/base.logits ]] || { echo "llama-perplexity failed | "; return; }
  local ours
  ours=$("$root/$build/bin/runtime" perplexity --ctx 128 -m "$1" --kl-divergence \
         --kl-divergence-base "$work/base.logits" 2>/dev/null) || { echo "runtime perplexity failed | "; return; }
  printf '%s (same top-1 %s %%) / %s %% (%s) | %s\n' "$(sed -n 's/^Mean    KLD: *\([-0-9.]*\).*/\1/p' <<<"$ours")" \
    "$(sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' <<<"$ours")" \
    "$(sed -n 's/^Same top p, base top-2 margin > 0.001: *\([0-9.]*\).* of \([0-9]*\) tokens/\1/p' <<<"$ours")" \
    "$(sed -n 's/^Same top p, base top-2 margin > 0.001: .* of \([0-9]*\) tokens/\1/p' <<<"$ours")" \
    "$(llama_kld -m "$1" -fa off --kl-divergence --kl-divergence-base "$work/base.logits")"
}
