// peer_llamacpp_tokenize: Strata's tokenizer must give llama.cpp's ids (tools/peer/tokenize.mjs, node-llama-cpp's
// llama.cpp) on a generated corpus of varied strings, for
//   - every vocab GGUF in the shared folder (SentencePiece and byte-level BPE), with and without parse_special;
//   - every tokenizer.ggml.pre name Strata knows ("pre swap"): the GPT-2 vocab rewritten to carry that name, so
//     each pre-tokenizer's regexes and splitters meet llama.cpp's without a real vocab of that family.
// Exit codes: 0 pass, 1 fail, 77 skip (peer unavailable; the reason is printed).
//   node peer_llamacpp_tokenize.mjs --runtime BIN --peer DIR --vocabs DIR --work DIR [--count N] [--seed S]
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { makeCorpus } from "../common/text_corpus.mjs";

const SKIP = 77;
const opts = { count: "600", seed: "1" };
for (let i = 2; i + 1 < process.argv.length; i += 2) opts[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const k of ["runtime", "peer", "vocabs", "work"]) {
  if (!opts[k]) {
    console.error(`usage: peer_llamacpp_tokenize.mjs --runtime BIN --peer DIR --vocabs DIR --work DIR (missing --${k})`);
    process.exit(1);
  }
}
if (!existsSync(path.join(opts.peer, "node_modules", "node-llama-cpp"))) {
  console.log(`SKIP: ${path.join(opts.peer, "node_modules")} has no node-llama-cpp; ` +
              `install it with: npm ci --prefix ${opts.peer} --omit=optional`);
  process.exit(SKIP);
}
mkdirSync(opts.work, { recursive: true });

// ---- corpus ---------------------------------------------------------------------------------------------------
const corpus = makeCorpus(Number(opts.count), Number(opts.seed));
const corpusFile = path.join(opts.work, "corpus.jsonl");
writeFileSync(corpusFile, corpus.map((s) => JSON.stringify(s)).join("\n") + "\n");

// ---- GGUF: a copy with another tokenizer.ggml.pre -----------------------------------------------------------------
// Vocab-only files have no tensors, so the metadata is all there is: rewrite it with the new value.
function withPre(src, pre) {
  const b = readFileSync(src);
  if (b.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${src}: not a GGUF file`);
  if (b.readBigUInt64LE(8) !== 0n) throw new Error(`${src}: has tensors; only vocab-only files can be rewritten`);
  const nKv = Number(b.readBigUInt64LE(16));
  const scalar = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  let off = 24;
  const str = () => { const n = Number(b.readBigUInt64LE(off)); off += 8 + n; };
  const value = (type) => {
    if (type === 8) return str();
    if (type === 9) {
      const et = b.readUInt32LE(off), n = Number(b.readBigUInt64LE(off + 4));
      off += 12;
      if (et === 8) { for (let i = 0; i < n; i++) str(); } else off += n * scalar[et];
      return;
    }
    off += scalar[type];
  };
  const kvs = [];
  for (let i = 0; i < nKv; i++) {
    const start = off;
    const keyLen = Number(b.readBigUInt64LE(off));
    const key = b.toString("utf8", off + 8, off + 8 + keyLen);
    off += 8 + keyLen;
    const type = b.readUInt32LE(off);
    off += 4;
    value(type);
    kvs.push({ key, bytes: b.subarray(start, off) });
  }
  const entry = (key, text) => {
    const k = Buffer.from(key), v = Buffer.from(text);
    const e = Buffer.alloc(8 + k.length + 4 + 8 + v.length);
    e.writeBigUInt64LE(BigInt(k.length), 0); k.copy(e, 8);
    e.writeUInt32LE(8, 8 + k.length);
    e.writeBigUInt64LE(BigInt(v.length), 12 + k.length); v.copy(e, 20 + k.length);
    return e;
  };
  const kept = kvs.filter((kv) => kv.key !== "tokenizer.ggml.pre").map((kv) => kv.bytes);
  kept.push(entry("tokenizer.ggml.pre", pre));
  const head = Buffer.alloc(24);
  b.copy(head, 0, 0, 16);
  head.writeBigUInt64LE(BigInt(kept.length), 16);
  const body = Buffer.concat([head, ...kept]);
  return Buffer.concat([body, Buffer.alloc((32 - (body.length % 32)) % 32)]);
}

// ---- the comparison ---------------------------------------------------------------------------------------------
function run(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 28, timeout: 300000 });
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  return r;
}
function lines(out) { return out.split("\n").filter((l) => l !== ""); }

// Every (vocab, parse_special) pair is a job: Strata runs once per job, llama.cpp once for all of them.
const jobs = [];
const vocabs = ["llama-spm", "phi-3", "gpt-2", "mpt", "starcoder", "command-r", "falcon", "deepseek-coder",
                "deepseek-llm", "qwen2", "llama-bpe"];
for (const v of vocabs) {
  const model = path.join(opts.vocabs, `ggml-vocab-${v}.gguf`);
  for (const special of [false, true]) jobs.push({ label: `${v}${special ? " +special" : ""}`, model, special });
}
const names = lines(run(opts.runtime, ["tokenize", "--pre-tokenizers"], "runtime tokenize --pre-tokenizers").stdout);
// llama.cpp aborts on this one (GGML_ASSERT in find_bpe_rank): "whitespace" matches raw bytes, spaces included,
// against a vocab in GPT-2's byte alphabet. It belongs to the "whitespace" tokenizer model, which both refuse.
const peerAborts = new Set(["whitespace"]);
const rows = [];
const base = path.join(opts.vocabs, "ggml-vocab-gpt-2.gguf");
for (const pre of names) {
  const label = `gpt-2 as pre "${pre}"`;
  if (peerAborts.has(pre)) { rows.push([label, "not compared: llama.cpp aborts on it"]); continue; }
  const model = path.join(opts.work, `gpt-2-as-${pre}.gguf`);
  writeFileSync(model, withPre(base, pre));
  jobs.push({ label, model, special: false });
}
jobs.forEach((j, i) => { j.output = path.join(opts.work, `peer-${i}.jsonl`); j.input = corpusFile; });
const jobsFile = path.join(opts.work, "jobs.json");
writeFileSync(jobsFile, JSON.stringify(jobs));
const peer = run(process.execPath, [path.join(opts.peer, "tokenize.mjs"), "--jobs", jobsFile], "llama.cpp");
if (peer.status === SKIP) { console.log(`SKIP: ${peer.stderr.trim()}`); process.exit(SKIP); }
if (peer.status !== 0) { console.error(`FAIL: tools/peer/tokenize.mjs exited ${peer.status}: ${peer.stderr}`); process.exit(1); }

let failures = 0, compared = 0;
for (const job of jobs) {
  const args = ["tokenize", "-m", job.model, "--jsonl", "-f", corpusFile, "--no-bos"];
  if (!job.special) args.push("--no-parse-special");
  const strata = run(opts.runtime, args, `runtime ${job.label}`);
  const peerOut = readFileSync(job.output, "utf8");
  if (peerOut.startsWith("{")) {
    // llama.cpp refusing the file while Strata accepts it is a disagreement too.
    console.error(`FAIL ${job.label}: llama.cpp refused it: ${JSON.parse(peerOut).error}`);
    failures++;
    rows.push([job.label, "llama.cpp refused it"]);
    continue;
  }
  if (strata.status !== 0) {
    console.error(`FAIL ${job.label}: runtime tokenize exited ${strata.status}: ${strata.stderr.trim()}`);
    failures++;
    rows.push([job.label, "runtime failed"]);
    continue;
  }
  const a = lines(strata.stdout), b = lines(peerOut);
  let bad = 0;
  for (let i = 0; i < corpus.length; i++) {
    compared++;
    if (a[i] === b[i]) continue;
    if (bad < 3) console.error(`FAIL ${job.label}: ${JSON.stringify(corpus[i])}\n  strata   ${a[i]}\n  llama.cpp ${b[i]}`);
    bad++;
  }
  if (bad) failures++;
  rows.push([job.label, bad ? `${bad}/${corpus.length} differ` : `${corpus.length}/${corpus.length} equal`]);
}

for (const [label, result] of rows) console.log(`${label.padEnd(44)} ${result}`);
console.log(`${compared} tokenizations compared, ${failures} case(s) failed`);
process.exit(failures ? 1 : 0);
