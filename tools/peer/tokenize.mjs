#!/usr/bin/env node
// llama.cpp's tokenizer as a peer of `runtime tokenize --jsonl`: reads JSON strings, one per line, and prints each
// one's ids as a JSON array on its own line (llama_tokenize with add_special=false).
//   node tools/peer/tokenize.mjs --model VOCAB.gguf --input TEXTS.jsonl [--special 1]
//   node tools/peer/tokenize.mjs --jobs JOBS.json
//   --special 1: special-token texts become their tokens (parse_special); default 0.
//   --jobs: many files in one process (llama.cpp starts once): a JSON array of {model, input, special, output};
//           each job's ids go to its output file, and a job whose model llama.cpp refuses gets {"error": ...} there.
import { readFileSync, writeFileSync } from "node:fs";
import { loadLlamaCpp, parseArgs, fail } from "./load-llama.mjs";

const usage = "usage: node tools/peer/tokenize.mjs (--model VOCAB.gguf --input TEXTS.jsonl [--special 0|1] | --jobs FILE)";
const args = parseArgs(process.argv.slice(2), { model: "", input: "", special: "0", jobs: "" }, usage);
if (!args.jobs && (!args.model || !args.input)) fail(usage, 2);
const { llama } = await loadLlamaCpp();

async function tokenizeFile(modelPath, input, special) {
  const model = await llama.loadModel({ modelPath, vocabOnly: true });
  const out = [];
  for (const line of readFileSync(input, "utf8").split("\n")) {
    if (line === "") continue;
    out.push(JSON.stringify(Array.from(model.tokenize(JSON.parse(line), special))));
  }
  await model.dispose();
  return out.join("\n") + "\n";
}

if (args.jobs) {
  for (const job of JSON.parse(readFileSync(args.jobs, "utf8"))) {
    try {
      writeFileSync(job.output, await tokenizeFile(job.model, job.input, Boolean(job.special)));
    } catch (err) {
      writeFileSync(job.output, JSON.stringify({ error: err.message }) + "\n");
    }
  }
} else {
  try {
    process.stdout.write(await tokenizeFile(args.model, args.input, args.special !== "0"));
  } catch (err) {
    fail(`llama.cpp cannot tokenize with ${args.model}: ${err.message}`);
  }
}
