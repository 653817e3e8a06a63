// A seeded corpus of varied strings for tokenizer comparisons (Unicode scripts, CJK, emoji, whitespace runs,
// digits, code, contractions, special-token look-alikes): the same strings on every machine for a seed.
// Every codepoint in it was assigned by Unicode 14, the version of Strata's category tables.

// splitmix32-style generator.
export function makeRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return ((z ^ (z >>> 16)) >>> 0) / 4294967296;
  };
}

export const PIECES = [
  "Hello", "world", "The", "quick", "brown", "fox", "API", "HTTPServer", "camelCase", "snake_case", "ÉCOLE", "naïve",
  "I'm", "you're", "we've", "they'll", "she'd", "it's", "DON'T", "'S", "'ll", "'", "''",
  " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n ", "\u0085", "\u00a0", "\u3000", "\u2009", "\u180e",
  "0", "7", "42", "123", "2024", "1234567", "3.14159", "1,000,000", "½", "²", "٣", "١٢٣", "Ⅻ", "๑๒",
  "нещо", "Български", "Привет", "ВасяПетров", "Ελληνικά", "עברית", "مرحبا", "हिन्दी", "বাংলা", "ไทย", "ខ្មែរ",
  "我想", "在北京", "東京", "ひらがな", "カタカナ", "한국어", "가나다",
  "e\u0301", "a\u0300\u0301", "\u0301", "ß", "ﬁ", "K", "Å", "ſ",
  "😀", "👍🏽", "👨‍👩‍👧", "🇺🇸", "✨", "❤️", "\u200d", "\ufeff",
  ".", ",", "!", "?", "...", "—", "–", "«", "»", "“", "”", "‘", "’", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\",
  "#", "$", "%", "&", "*", "+", "=", "@", "^", "_", "`", "|", "~", ":", ";", "-", "\"",
  "def f(x):", "    return x", "if (a && b) {", "}\n", "<div>", "</div>", "std::vector<int>", "x += 1;", "#include",
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "[INST]", "<|eot_id|>", "<|begin_of_text|>",
  "<|start_header_id|>", "<unk>", "<|user|>", "<|end|>", "<pad>", "<mask>", "<|im_start", "im_end|>", "<<SYS>>",
  "<|fim_prefix|>", "<|fim_middle|>", "<|file_sep|>", "<|repo_name|>", "<|channel|>", "<|return|>", "<eos>", "[PAD]",
];

// `count` strings (the first few are fixed edge cases); `exclude`: pieces to leave out.
export function makeCorpus(count, seed, exclude = []) {
  const rand = makeRandom(seed);
  const pieces = PIECES.filter((p) => !exclude.includes(p));
  const pick = () => pieces[Math.floor(rand() * pieces.length)];
  const corpus = ["", " ", "  ", "\n", "a", "'s", "1", "½"];
  while (corpus.length < count) {
    const n = 1 + Math.floor(rand() * 12);
    let s = "";
    for (let i = 0; i < n; i++) {
      const r = rand();
      if (r < 0.08) s += " ".repeat(1 + Math.floor(rand() * 6));
      else if (r < 0.12) s += String(Math.floor(rand() * 1e9));
      else s += pick();
      if (rand() < 0.5) s += " ";
    }
    corpus.push(s);
  }
  return corpus;
}
