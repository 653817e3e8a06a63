#!/usr/bin/env bash
# The libFuzzer targets, said once for CI (tools/ci/test.sh) and the long campaign (campaign.sh). Source it, then
# read `strata_fuzz_targets` line by line: <target> <max_len> <seed maker or -> [seed files...]
#   max_len: the most bytes of one input the fuzzer feeds; seed maker: a tool of the fuzz build that writes seed
#   inputs into the folder it is given; seed files: copied into the seed folder (a missing one is a warning).
strata_fuzz_targets() {
  local shared=${STRATA_SHARED_DIR:-../shared}
  # GGUF files: writer-made seeds plus a real model (longer than max_len: the fuzzer sees its header, KVs and
  # tensor infos).
  echo "fuzz_gguf 65536 make_fuzz_seeds $shared/models/stories260K-q4_0.gguf"
  # Arbitrary bytes as a KV prefix store entry file (48 + 16 + 64 bytes), read through the real store.
  echo "fuzz_kv_entry 4096 make_kv_fuzz_seed"
  # HTTP request bytes through Beast's parser and the openai_http request parsers.
  echo "fuzz_http_request 65536 -"
  # Config files as TOML and as vLLM-style YAML, resolved and validated against the core schema.
  echo "fuzz_config 8192 - configs/cpu_offload.toml configs/gpu_offload.toml configs/cpu_offload_config.yaml"
  # Chat templates: a Jinja template, then NUL and a JSON context (a built-in conversation when there is none);
  # seeds: the real templates.
  echo "fuzz_jinja 16384 - $shared/models/chat_templates/*.jinja"
  # Hugging Face tokenizer.json files (a NUL, then a tokenizer_config.json), built into tokenizers that encode.
  echo "fuzz_tokenizer_json 65536 make_tokenizer_json_seeds"
  # Byte-level BPE: the first byte picks one of llama.cpp's pre-tokenizers, the rest is the text.
  echo "fuzz_bpe_tokenize 4096 -"
  # Grammars: GBNF, a JSON schema or a regular expression (first byte % 3), then NUL and a text for a matcher.
  echo "fuzz_gbnf 8192 make_gbnf_fuzz_seeds"
  # A GGUF model through the decoder plugin's load (every family's keys, shapes and fused splits); seeds: one tiny
  # model per family.
  echo "fuzz_model_load 16384 make_model_fuzz_seeds"
  # llama-perplexity's KL-divergence base file (runtime perplexity --kl-divergence-base) through the real reader.
  echo "fuzz_kl_base 16384 make_kl_base_seed"
  # HF checkpoints: a .safetensors file, a config.json or a shard index (first byte % 3).
  echo "fuzz_safetensors 16384 make_safetensors_fuzz_seeds"
}
