#!/usr/bin/env node
// Greedy (temperature 0) generation with llama.cpp as an independent peer of Strata's runtime.
// Prints {"prompt_tokens": [...], "completion_tokens": [...], ...} like `runtime --output json`.
// Tokenization matches Strata's prompts (llama.cpp's add_special and parse_special): BOS when the vocab asks for it,
// special-token texts as their tokens, and SentencePiece's dummy-prefix space.
// The KV cache is F32: with llama.cpp's default F16 cache, greedy runs can depart at near-ties.
import { loadLlamaCpp, parseArgs, nonNegativeInt, fail } from "./load-llama.mjs";

const usage = "usage: node tools/peer/greedy.mjs --model FILE.gguf [--prompt TEXT] [--n TOKENS] [--threads N]\n" +
              "  [--margins 1]       also print top2_logit_gaps: per token, the gap between the two largest logits\n" +
              "  [--batch N]         prompt tokens per llama.cpp batch (default 512)\n" +
              "  [--flash-attention 0|1] (default 0); --threads 0 lets node-llama-cpp choose\n" +
              "  [--context N]       the context size (default: prompt + n; llama.cpp pads it to a multiple of 256)";
const args = parseArgs(process.argv.slice(2), {
  model: undefined, prompt: "", n: "100", threads: "1", margins: "0", batch: "512", "flash-attention": "0",
  context: "0",
}, usage);
const n = nonNegativeInt("n", args.n);
const threads = nonNegativeInt("threads", args.threads);
const batch = nonNegativeInt("batch", args.batch);
const flashAttention = args["flash-attention"] !== "0";

const { llama } = await loadLlamaCpp();
let model;
try {
  model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
} catch (err) {
  fail(`llama.cpp cannot load ${args.model}: ${err.message}`);
}

const promptTokens = [];
if (model.tokens.bos != null && model.tokens.shouldPrependBosToken) promptTokens.push(model.tokens.bos);
// tokenize() never adds BOS; llama.cpp's SPM tokenizer still adds the dummy-prefix space.
promptTokens.push(...model.tokenize(args.prompt, true));

const wantedContext = nonNegativeInt("context", args.context);
if (wantedContext !== 0 && wantedContext < promptTokens.length + n)
  fail(`--context ${wantedContext} is smaller than the prompt (${promptTokens.length}) + n (${n})`, 2);
const contextSize = wantedContext !== 0 ? wantedContext : promptTokens.length + n;
const trained = model.trainContextSize;
if (contextSize > trained) fail(`prompt (${promptTokens.length}) + n (${n}) exceeds the model's context ${trained}`, 2);

const context = await model.createContext({
  contextSize,
  threads: threads === 0 ? undefined : { ideal: threads, min: threads },
  batchSize: Math.max(1, Math.min(batch, contextSize)),
  flashAttention,
  experimentalKvCacheKeyType: "F32",
  experimentalKvCacheValueType: "F32",
});
if (context.kvCacheKeyType !== 0 || context.kvCacheValueType !== 0) // GgmlType.F32 is 0
  fail(`llama.cpp did not honour the F32 KV cache (got K ${context.kvCacheKeyType}, V ${context.kvCacheValueType})`);

const sequence = context.getSequence();
const completion = [];
const margins = [];
let finish = "length";
const wantMargins = args.margins !== "0";
if (n > 0) {
  const gen = sequence.evaluateWithMetadata(promptTokens, { probabilities: wantMargins }, { temperature: 0 });
  for await (const out of gen) {
    if (model.isEogToken(out.token)) { finish = "stop"; break; }
    completion.push(out.token);
    if (wantMargins) {
      // Softmax keeps logit differences: ln(p1 / p2) is the gap between the two largest logits.
      const top = [...out.probabilities.values()].sort((a, b) => b - a);
      margins.push(top.length > 1 ? Number(Math.log(top[0] / top[1]).toExponential(3)) : Infinity);
    }
    if (completion.length >= n) break;
  }
}

const result = {
  prompt_tokens: promptTokens,
  completion_tokens: completion,
  finish_reason: finish,
  text: model.detokenize(completion),
  peer: {
    engine: "llama.cpp via node-llama-cpp", kv_cache: "F32", flash_attention: flashAttention,
    batch_size: context.batchSize,
  },
};
if (wantMargins) result.top2_logit_gaps = margins;
process.stdout.write(JSON.stringify(result) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
