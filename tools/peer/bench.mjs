#!/usr/bin/env node
// Prefill and decode tokens/s of llama.cpp (node-llama-cpp's CPU build) measured the way tools/bench measures Strata:
// the same synthetic prompt (BOS, then ids (100 + (i * 7919) % 20000) % n_vocab), greedy decode that ignores EOS,
// decode tok/s = (decode_tokens - 1) / time of the forward passes after the first generated token
// (that first token comes from the prefill logits), best of --repeat runs.
import { loadLlamaCpp, parseArgs, nonNegativeInt, fail } from "./load-llama.mjs";

const usage = "usage: node tools/peer/bench.mjs --model FILE.gguf [--threads 2] [--prompt-tokens 128] " +
              "[--decode-tokens 64] [--repeat 3]";
const args = parseArgs(process.argv.slice(2), {
  model: undefined, threads: "2", "prompt-tokens": "128", "decode-tokens": "64", repeat: "3",
}, usage);
const threads = nonNegativeInt("threads", args.threads);
const promptTokens = nonNegativeInt("prompt-tokens", args["prompt-tokens"]);
const decodeTokens = nonNegativeInt("decode-tokens", args["decode-tokens"]);
const repeat = nonNegativeInt("repeat", args.repeat);
if (threads < 1 || promptTokens < 1 || decodeTokens < 2 || repeat < 1)
  fail("need --threads >= 1, --prompt-tokens >= 1, --decode-tokens >= 2, --repeat >= 1", 2);

const { llama } = await loadLlamaCpp();
let model;
try {
  model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
} catch (err) {
  fail(`llama.cpp cannot load ${args.model}: ${err.message}`);
}
const nVocab = model.fileInsights.vocabularySize ?? model.fileInfo.metadata?.llama?.vocab_size;
const prompt = Array.from({ length: promptTokens }, (_, i) => (100 + ((i * 7919) % 20000)) % nVocab);
prompt[0] = model.tokens.bos;

// Default llama.cpp context settings (F16 KV cache, flash attention "auto"): what a llama.cpp user gets.
const context = await model.createContext({
  contextSize: promptTokens + decodeTokens,
  batchSize: Math.min(512, promptTokens + decodeTokens),
  threads: { ideal: threads, min: threads },
});
const sequence = context.getSequence();
let bestPrefill = 0, bestDecode = 0;
for (let rep = 0; rep < repeat; rep++) {
  await sequence.clearHistory();
  // EOS does not stop the run (tools/bench sets ignore_eos): every run times the same number of tokens.
  const t0 = process.hrtime.bigint();
  let t1 = 0n, n = 0;
  for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
    void token;
    n++;
    if (n === 1) t1 = process.hrtime.bigint();
    if (n >= decodeTokens) break;
  }
  const t2 = process.hrtime.bigint();
  bestPrefill = Math.max(bestPrefill, promptTokens / (Number(t1 - t0) / 1e9));
  bestDecode = Math.max(bestDecode, (n - 1) / (Number(t2 - t1) / 1e9));
}
const result = {
  engine: "llama.cpp via node-llama-cpp",
  model: args.model,
  threads: context.currentThreads,
  prompt_tokens: promptTokens,
  decode_tokens: decodeTokens,
  repeat,
  prefill_tokens_per_second: Number(bestPrefill.toFixed(2)),
  decode_tokens_per_second: Number(bestDecode.toFixed(2)),
  flash_attention: context.flashAttention,
};
process.stdout.write(JSON.stringify(result) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
