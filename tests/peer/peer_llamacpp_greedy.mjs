// peer_llamacpp_greedy: Strata's greedy tokens must equal llama.cpp's (tools/peer/greedy.mjs, F32 KV cache).
// F32 and F16 weights: every one of the 100 tokens must agree (they agree over 400 tokens on several prompts).
// Q8_0/Q4_0: both engines quantize activations to Q8_0, and a tiny float difference upstream can flip one
// activation's rounding, so long greedy runs legitimately part at some point (llama.cpp departs from itself there
// when only its batch size, flash attention and thread count change). For those the test prints the agreement and
// asserts only that the first token agrees. The same holds for the random-weight models of every other quantization
// type and mixture (K-quants, IQ4, Q4_1/Q5_x) that make-model writes.
// Exit codes: 0 pass, 1 fail, 77 skip (peer unavailable; the reason is printed).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";

const SKIP = 77;
const opts = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) opts[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const k of ["runtime", "peer", "models"]) {
  if (!opts[k]) {
    console.error(`usage: peer_llamacpp_greedy.mjs --runtime BIN --peer DIR --models DIR (missing --${k})`);
    process.exit(1);
  }
}

if (!existsSync(path.join(opts.peer, "node_modules", "node-llama-cpp"))) {
  console.log(`SKIP: ${path.join(opts.peer, "node_modules")} has no node-llama-cpp; ` +
              `install it with: npm ci --prefix ${opts.peer} --omit=optional`);
  process.exit(SKIP);
}
if (!existsSync(opts.runtime)) { console.error(`FAIL: runtime not built: ${opts.runtime}`); process.exit(1); }

const N = 100;
const prompts = ["", "Once upon a time"];
// --shard K/N: this run makes and compares only every N-th model file from the K-th (0-based), so CTest can run the
// comparison as N tests beside the rest of the suite; every file belongs to exactly one shard.
const [shard, shards] = (opts.shard ?? "0/1").split("/").map(Number);
if (!(Number.isInteger(shard) && Number.isInteger(shards) && shards >= 1 && shard >= 0 && shard < shards)) {
  console.error(`usage: --shard K/N with 0 <= K < N (got ${opts.shard})`);
  process.exit(1);
}
let entry = -1;
const mine = () => (++entry % shards) === shard;
// [model file, every token must agree, prompts]
const models = [["f32", true], ["f16", true], ["q8_0", false], ["q4_0", false]]
  .filter(() => mine())
  .map(([suffix, full]) => [path.join(opts.models, `stories260K-${suffix}.gguf`), full, prompts]);

// Random-weight F32 models with real byte-level BPE vocabularies (tools/make-model --vocab-from), when the test is
// given --make-model and --work: prompt ids and every greedy token must agree, special-token texts included.
if (opts["make-model"] && opts.work) {
  mkdirSync(opts.work, { recursive: true });
  const chat = ["The capital of France is", "<|start_header_id|>user<|end_header_id|>\n\nHi 123 😀" +
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"];
  const qwen = ["The capital of France is", "<|im_start|>user\nHi 123 😀<|im_end|>\n<|im_start|>assistant\n"];
  for (const [vocab, texts] of [["llama-bpe", chat], ["qwen2", qwen]]) {
    if (!mine()) continue;
    const file = path.join(opts.work, `random-${vocab}.gguf`);
    const made = runJson(opts["make-model"], ["--out", file, "--dim", "64", "--layers", "2", "--heads", "4",
                                              "--kv-heads", "2", "--ff", "128", "--ctx", "256", "--type", "f32",
                                              "--vocab-from", path.join(opts.models, "vocab", `ggml-vocab-${vocab}.gguf`)],
                         `make-model ${vocab}`);
    if (made.status !== 0) { console.error(`FAIL: make-model ${vocab}: ${made.stderr}`); process.exit(1); }
    models.push([file, true, texts]);
  }
  // RoPE frequency factors (Llama 3.1+'s rope_freqs.weight) and linear RoPE scaling (factor 4), make-model
  // --feature, on the Llama 3 vocabulary: F32, so every token must agree.
  for (const feature of ["rope-freqs", "rope-scaling-linear"]) {
    if (!mine()) continue;
    const file = path.join(opts.work, `random-${feature}.gguf`);
    const made = runJson(opts["make-model"], ["--out", file, "--dim", "64", "--layers", "2", "--heads", "4",
                                              "--kv-heads", "2", "--ff", "128", "--ctx", "256", "--type", "f32",
                                              "--feature", feature, "--vocab-from",
                                              path.join(opts.models, "vocab", "ggml-vocab-llama-bpe.gguf")],
                         `make-model ${feature}`);
    if (made.status !== 0) { console.error(`FAIL: make-model ${feature}: ${made.stderr}`); process.exit(1); }
    models.push([file, true, ["The capital of France is"]]);
  }
  // The decoder plugin's other families and Llama's optional biases (make-model --arch / --feature), with the
  // vocabulary each family ships: qwen2 (Q/K/V biases, NEOX RoPE; with output.bias too), qwen3 (per-head Q/K RMSNorm, a head size of 32
  // with dim 64 / 4 heads = 16), llama with Q/K/V and MLP biases, llama with a fused attn_qkv and bias, phi3 (fused
  // Q/K/V with a fused bias, fused gate-up, NEOX RoPE) on Phi-3's SPM vocabulary, gemma2 (embedding scale, GeGLU,
  // post-norms, attention and final soft-caps of 2 and 3 so that they bend the scores, a window of 8 on every other
  // layer) and gemma3 (Q/K norms, a window of 8 on five of six layers at RoPE base 10000, the sixth at 1e6 with linear
  // scaling 4, a final cap of 5) on Llama 2's SPM vocabulary, 100 tokens reaching far past the window; mixtral (llama
  // with 4 experts, 2 per token), qwen3moe (8 experts of 64, 2 per token) and qwen2moe (the same, unnormalised, with
  // a shared expert). F32: every token must agree; Q8_0: the first.
  const phi3 = ["The capital of France is", "<|user|>\nHi 123<|end|>\n<|assistant|>\n"];
  const gemma = ["The capital of France is", "<start_of_turn>user\nHi 123<end_of_turn>\n<start_of_turn>model\n"];
  for (const [name, args, vocab, texts] of [
    ["qwen2", ["--arch", "qwen2"], "qwen2", qwen],
    ["qwen2-output-bias", ["--arch", "qwen2", "--feature", "output-bias"], "qwen2", qwen],
    ["qwen3", ["--arch", "qwen3", "--head-dim", "32"], "qwen2", qwen],
    ["llama-biases", ["--feature", "qkv-bias", "--feature", "mlp-bias"], "llama-bpe", chat],
    ["llama-fused-qkv", ["--feature", "fused-qkv", "--feature", "qkv-bias"], "llama-bpe", chat],
    ["phi3", ["--arch", "phi3", "--feature", "qkv-bias"], "phi-3", phi3],
    ["gemma2", ["--arch", "gemma2", "--layers", "4", "--window", "8", "--attn-softcap", "2", "--final-softcap", "3"],
     "llama-spm", gemma],
    ["gemma3", ["--arch", "gemma3", "--layers", "6", "--head-dim", "32", "--window", "8", "--feature",
                "rope-scaling-linear", "--final-softcap", "5"], "llama-spm", gemma],
    ["mixtral", ["--experts", "4", "--experts-used", "2"], "llama-spm", gemma],
    ["qwen3moe", ["--arch", "qwen3moe", "--experts", "8", "--experts-used", "2", "--expert-ff", "64", "--head-dim",
                  "32"], "qwen2", qwen],
    ["qwen2moe", ["--arch", "qwen2moe", "--experts", "8", "--experts-used", "2", "--expert-ff", "64"], "qwen2", qwen]]) {
    for (const type of ["f32", "q8_0"]) {
      if (!mine()) continue;
      const file = path.join(opts.work, `random-${name}-${type}.gguf`);
      const made = runJson(opts["make-model"], ["--out", file, "--dim", "64", "--layers", "2", "--heads", "4",
                                                "--kv-heads", "2", "--ff", "128", "--ctx", "256", "--type", type,
                                                ...args, "--vocab-from",
                                                path.join(opts.models, "vocab", `ggml-vocab-${vocab}.gguf`)],
                           `make-model ${name} ${type}`);
      if (made.status !== 0) { console.error(`FAIL: make-model ${name} ${type}: ${made.stderr}`); process.exit(1); }
      models.push([file, type === "f32", texts]);
    }
  }
  // RoPE beyond rope_ext (rope_scaled): YaRN (rope.scaling.type yarn, factor 4) on llama and qwen2, and Phi-3's
  // LongRoPE (long/short factor tensors and attn_factor; an original context of 512 in a 1024 model): llama.cpp picks
  // the long factors when its context exceeds the original, so both sides run at 1024 (long) and at 256 (short:
  // llama.cpp pads the default context of prompt + 100 to 256, Strata takes --max-model-len 256). F32: every token.
  for (const [name, args, vocab, texts, runs] of [
    ["llama-yarn", ["--feature", "rope-scaling-yarn"], "llama-bpe", chat, [{}]],
    ["qwen2-yarn", ["--arch", "qwen2", "--feature", "rope-scaling-yarn"], "qwen2", qwen, [{}]],
    ["phi3-longrope", ["--arch", "phi3", "--feature", "longrope", "--ctx", "1024"], "phi-3", phi3,
     [{ tag: " (long)", peer: ["--context", "1024"] }, { tag: " (short)", runtime: ["--max-model-len", "256"] }]]]) {
    if (!mine()) continue;
    const file = path.join(opts.work, `random-${name}.gguf`);
    const made = runJson(opts["make-model"], ["--out", file, "--dim", "64", "--layers", "2", "--heads", "4",
                                              "--kv-heads", "2", "--ff", "128", "--ctx", "256", "--type", "f32",
                                              ...args, "--vocab-from",
                                              path.join(opts.models, "vocab", `ggml-vocab-${vocab}.gguf`)],
                         `make-model ${name}`);
    if (made.status !== 0) { console.error(`FAIL: make-model ${name}: ${made.stderr}`); process.exit(1); }
    for (const run of runs) models.push([file, true, texts, run]);
  }
  // Every quantization type and llama-quantize mixture make-model writes (bytes equal to ggml's quantizers, see
  // quant_vs_ggml), on a shape whose rows fit the 256-element super-blocks, 4 layers so the mixtures' per-layer
  // choices differ, and GQA 4 (the IQ4 mixtures' attn_v rule). Quantized weights: the first token must agree.
  for (const type of ["q4_k_m", "q5_k_m", "q6_k", "q3_k_m", "q2_k", "iq4_xs", "iq4_nl", "q4_k_s", "q3_k_l", "q5_k_s",
                      "q4_1", "q5_0", "q5_1"]) {
    if (!mine()) continue;
    const file = path.join(opts.work, `random-${type}.gguf`);
    const made = runJson(opts["make-model"], ["--out", file, "--dim", "256", "--layers", "4", "--heads", "4",
                                              "--kv-heads", "1", "--ff", "512", "--ctx", "256", "--type", type,
                                              "--vocab-from", path.join(opts.models, "vocab", "ggml-vocab-llama-spm.gguf")],
                         `make-model ${type}`);
    if (made.status !== 0) { console.error(`FAIL: make-model ${type}: ${made.stderr}`); process.exit(1); }
    models.push([file, false, ["Once upon a time"]]);
  }
}

function runJson(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 24, timeout: 120000 });
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let failures = 0;
const rows = [];
// A model entry may carry extra arguments for either side (the context size, which picks LongRoPE's factors).
for (const [model, mustAgreeFully, modelPrompts, extra = {}] of models) {
  if (!existsSync(model)) { console.error(`FAIL: missing model ${model}`); failures++; continue; }
  for (const prompt of modelPrompts) {
    const label = `${path.basename(model, ".gguf")}${extra.tag ?? ""} ${JSON.stringify(prompt).slice(0, 40)}`;
    const peer = runJson(process.execPath, [path.join(opts.peer, "greedy.mjs"), "--model", model, "--prompt", prompt,
                                            "--n", String(N), ...(extra.peer ?? [])], `llama.cpp ${label}`);
    if (peer.status === SKIP) {
      console.log(`SKIP: ${peer.stderr.trim()}`);
      process.exit(SKIP);
    }
    if (peer.status !== 0) {
      console.error(`FAIL ${label}: greedy.mjs exited ${peer.status}: ${peer.stderr}`);
      failures++;
      continue;
    }
    // 64 MiB of KV cache, not the CPU default of 1 GiB that start-up touches: where the KV lives changes no token.
    const strata = runJson(opts.runtime, ["--model", model, "--prompt", prompt, "--temperature", "0",
                                          "--max-tokens", String(N), "--output", "json", "--log-level", "warn",
                                          "--kv-cache-memory", "64MiB", ...(extra.runtime ?? [])],
                           `runtime ${label}`);
    if (strata.status !== 0) {
      console.error(`FAIL ${label}: runtime exited ${strata.status}: ${strata.stderr}`);
      failures++;
      continue;
    }
    const a = JSON.parse(peer.stdout), b = JSON.parse(strata.stdout);
    if (JSON.stringify(a.prompt_tokens) !== JSON.stringify(b.prompt_tokens)) {
      console.error(`FAIL ${label}: prompt ids differ: llama.cpp ${JSON.stringify(a.prompt_tokens)} ` +
                    `strata ${JSON.stringify(b.prompt_tokens)}`);
      failures++;
      continue;
    }
    const x = a.completion_tokens, y = b.completion_tokens;
    let agree = 0;
    while (agree < x.length && agree < y.length && x[agree] === y[agree]) agree++;
    const full = agree === x.length && x.length === y.length && x.length === N;
    let verdict = "ok";
    if (mustAgreeFully && !full) verdict = "FAIL (every token must agree)";
    else if (agree < 1) verdict = "FAIL (first token differs)";
    else if (!full) verdict = "ok (parted after a common prefix; allowed for quantized weights)";
    if (verdict.startsWith("FAIL")) {
      failures++;
      if (agree < Math.min(x.length, y.length))
        console.error(`  ${label}: token ${agree}: llama.cpp ${x[agree]} vs strata ${y[agree]}`);
    }
    rows.push(`${label.padEnd(60)} prompt ids equal (${a.prompt_tokens.length}), ` +
              `leading tokens agreeing: ${agree}/${N}  ${verdict}`);
  }
}
console.log(`Strata vs llama.cpp (node-llama-cpp, F32 KV cache), greedy, ${N} tokens` +
            (shards > 1 ? `, model files ${shard} mod ${shards} (${models.length} runs):` : ":"));
for (const r of rows) console.log(`  ${r}`);
if (failures) { console.error(`${failures} failure(s)`); process.exit(1); }
console.log("PASS");
