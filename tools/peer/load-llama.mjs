// Loads node-llama-cpp's prebuilt CPU build of llama.cpp, or exits with PEER_UNAVAILABLE (77, CTest's
// skip code) and the reason, so callers can tell "no peer here" apart from a real disagreement.
export const PEER_UNAVAILABLE = 77;

export function fail(message, code = 1) {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

export async function loadLlamaCpp() {
  let nlc;
  try {
    nlc = await import("node-llama-cpp");
  } catch (err) {
    fail(`peer unavailable: cannot import node-llama-cpp (${err.message.split("\n")[0]}); ` +
         "install it with: npm ci --prefix tools/peer --omit=optional", PEER_UNAVAILABLE);
  }
  try {
    // gpu:false and build:"never": the CPU prebuilt binary or nothing; never compile llama.cpp here.
    const llama = await nlc.getLlama({
      gpu: false,
      build: "never",
      skipDownload: true,
      progressLogs: false,
      logLevel: nlc.LlamaLogLevel.error,
      logger: (level, message) => process.stderr.write(`llama.cpp [${level}]: ${message}`),
    });
    return { nlc, llama };
  } catch (err) {
    fail(`peer unavailable: node-llama-cpp could not load its llama.cpp binary (${err.message.split("\n")[0]})`,
         PEER_UNAVAILABLE);
  }
}

// Minimal --key value parser; every option must be known and have a value.
export function parseArgs(argv, known, usage) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i];
    if (key === "--help" || key === "-h") fail(usage, 0);
    if (!key.startsWith("--") || !(key.slice(2) in known)) fail(`unknown option ${key}\n${usage}`, 2);
    if (i + 1 >= argv.length) fail(`option ${key} needs a value\n${usage}`, 2);
    out[key.slice(2)] = argv[++i];
  }
  for (const [k, dflt] of Object.entries(known)) {
    if (out[k] === undefined) {
      if (dflt === undefined) fail(`missing --${k}\n${usage}`, 2);
      out[k] = dflt;
    }
  }
  return out;
}

export function nonNegativeInt(name, text) {
  const v = Number(text);
  if (!Number.isInteger(v) || v < 0) fail(`--${name} must be a non-negative integer, got "${text}"`, 2);
  return v;
}
