#include "tokenizer/pre_tokenizer.hpp"

#include <algorithm>
#include <array>

#include "common/error.hpp"
#include "tokenizer/unicode.hpp"

namespace strata {

namespace {

// The regex lists, as llama.cpp's llm_tokenizer_bpe writes them (llama.cpp rewrites the tokenizer.json originals
// so std::regex can run them: (?i:'s|...) spelled out as '[sS]|..., possessive quantifiers made greedy, upper and
// lower case told apart with lookaheads). Kept byte for byte: the hand-written splitters are found by this text.
constexpr std::string_view k_gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view k_llama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view k_qwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view k_newlines = "[^\\n]+|[\\n]+";
constexpr std::string_view k_deepseek3 =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view k_split_marks = " ?[^(\\s|.,!?…。，、।۔،)]+";

constexpr std::array<std::string_view, 1> r_llama3{k_llama3};
constexpr std::array<std::string_view, 1> r_jais2{
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"
    "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"};
constexpr std::array<std::string_view, 6> r_deepseek_llm{
    "[\r\n]",
    // (escaped: an editor's Unicode normalisation would turn U+1FD3 into U+0390 and break the ranges)
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370"
    "-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-"
    "\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF"
    "\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50"
    "-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC"
    "\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115"
    "\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183"
    "\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F"
    "\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400"
    "-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0"
    "-\U000118DF\U0001E900-\U0001E943]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+"};
constexpr std::array<std::string_view, 3> r_deepseek3{"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", k_deepseek3};
constexpr std::array<std::string_view, 2> r_youtu{
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'["
    "vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/"
    "]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 5> r_deepseek_coder{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+",
                                                           "\\p{N}"};
constexpr std::array<std::string_view, 3> r_falcon{"[\\p{P}\\$\\+<=>\\^~\\|`]+", k_gpt2, "[0-9][0-9][0-9]"};
constexpr std::array<std::string_view, 2> r_starcoder{"\\p{N}", k_gpt2};
constexpr std::array<std::string_view, 1> r_gpt2{k_gpt2};
constexpr std::array<std::string_view, 1> r_qwen2{k_qwen2};
constexpr std::array<std::string_view, 1> r_qwen35{
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 1> r_poro{k_split_marks};
constexpr std::array<std::string_view, 2> r_viking{k_split_marks, "\\p{N}"};
constexpr std::array<std::string_view, 1> r_tekken{
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+(("
    "?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 6> r_chameleon{"<sentinel:[0-9]+>",   "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                                                      "([\\t\\n]|    |  )",   "\\p{N}",
                                                      "[\\p{P}!-/:-@\\[-`{-~]", k_gpt2};
constexpr std::array<std::string_view, 1> r_gpt4o{
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL]["
    "lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|"
    "'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 1> r_granite_emb_multi{
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|"
    "'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'["
    "tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/"
    "]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 2> r_tiny_aya{
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'["
    "vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/"
    "]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 1> r_kimi_k2{"\\p{Han}+"};
constexpr std::array<std::string_view, 2> r_superbpe{"\\p{N}+", "(?=(\\d{3})+(?!\\d))"};
constexpr std::array<std::string_view, 1> r_bailingmoe{
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 1> r_seed_coder{
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
    "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 3> r_afmoe{
    "\\p{AFMoE_digits}", "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+", k_deepseek3};
constexpr std::array<std::string_view, 2> r_laguna{k_newlines, k_qwen2};
constexpr std::array<std::string_view, 1> r_exaone_moe{
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: "
    "\\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 1> r_newlines{k_newlines};
constexpr std::array<std::string_view, 2> r_minicpm5{
    "\\p{N}{1,3}",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::array<std::string_view, 1> r_whitespace{"\\S+"};
constexpr std::array<std::string_view, 4> r_default{"[\\p{P}\\$\\+<=>\\^~\\|]+", k_gpt2, "\\p{N}+", "[0-9][0-9][0-9]"};

constexpr uint8_t IM = pre_ignore_merges, BOS = pre_add_bos, NOBOS = pre_no_bos,
                  ESC = pre_escape_whitespace, RAW = pre_raw_bytes, NL = pre_newline_words_whole;

// Every tokenizer.ggml.pre name llama.cpp knows (node-llama-cpp 3.21.1's llama.cpp, llama_vocab::impl::load),
// with its regexes and flags.
const pre_tokenizer_spec k_specs[] = {
    {"default", r_default},
    {"minicpm5", r_minicpm5, IM},
    {"llama3", r_llama3, IM | BOS},
    {"llama-v3", r_llama3, IM | BOS},
    {"llama-bpe", r_llama3, IM | BOS},
    {"falcon3", r_llama3, IM | BOS},
    {"falcon-h1", r_llama3, IM | BOS},
    {"pixtral", r_llama3, IM | BOS},
    {"midm-2.0", r_llama3, IM | BOS},
    {"lfm2", r_llama3, IM | BOS},
    {"jina-v5-nano", r_llama3, IM | BOS},
    {"deepseek-llm", r_deepseek_llm},
    {"deepseek-coder", r_deepseek_coder},
    {"deepseek-v3", r_deepseek3},
    {"hunyuan-dense", r_deepseek3},
    {"joyai-llm", r_deepseek3},
    {"youtu", r_youtu, IM},
    {"falcon", r_falcon},
    {"mpt", r_gpt2},
    {"starcoder", r_starcoder},
    {"gpt-2", r_gpt2},
    {"phi-2", r_gpt2},
    {"jina-es", r_gpt2},
    {"jina-de", r_gpt2},
    {"gigachat", r_gpt2},
    {"jina-v2-es", r_gpt2},
    {"jina-v2-de", r_gpt2},
    {"a.x-4.0", r_gpt2},
    {"mellum", r_gpt2},
    {"modern-bert", r_gpt2},
    {"exaone4", r_gpt2},
    {"olmo", r_gpt2},
    {"jais", r_gpt2},
    {"trillion", r_gpt2},
    {"granite-docling", r_gpt2},
    {"jina-v1-en", r_gpt2},
    {"jina-v2-code", r_gpt2},
    {"roberta-bpe", r_gpt2},
    {"jais-2", r_jais2},
    {"gemma4", r_newlines, ESC | RAW | BOS | NL},
    {"granite-embed-multi-311m", r_newlines, ESC | RAW | BOS | NL},
    {"sarvam-moe", r_newlines, ESC | RAW},
    {"whitespace", r_whitespace, RAW},
    {"refact", r_starcoder},
    {"command-r", r_starcoder},
    {"smollm", r_starcoder},
    {"codeshell", r_starcoder},
    {"exaone", r_starcoder},
    {"minerva-7b", r_starcoder},
    {"mellum2", r_starcoder},
    {"qwen2", r_qwen2},
    {"deepseek-r1-qwen", r_qwen2},
    {"kormo", r_qwen2},
    {"f2llmv2", r_qwen2},
    {"megrez", r_qwen2},
    {"stablelm2", r_qwen2},
    {"hunyuan", r_qwen2},
    {"solar-open", r_qwen2},
    {"grok-2", r_qwen2},
    {"qwen35", r_qwen35},
    {"dbrx", r_llama3},
    {"smaug-bpe", r_llama3},
    {"glm4", r_llama3, NOBOS},
    {"chatglm-bpe", r_llama3, NOBOS},
    {"poro-chat", r_poro},
    {"bloom", r_poro},
    {"gpt3-finnish", r_poro},
    {"viking", r_viking},
    {"tekken", r_tekken, IM | BOS},
    {"exaone-moe", r_exaone_moe},
    {"chameleon", r_chameleon, BOS},
    {"gpt-4o", r_gpt4o},
    {"llama4", r_gpt4o},
    {"kanana2", r_gpt4o},
    {"talkie", r_gpt4o},
    {"minimax-m2", r_gpt4o},
    {"granite-embed-multi-97m", r_granite_emb_multi, IM},
    {"tiny_aya", r_tiny_aya},
    {"cohere2moe", r_tiny_aya},
    {"superbpe", r_superbpe},
    {"bailingmoe", r_bailingmoe},
    {"bailingmoe2", r_bailingmoe},
    {"llada-moe", r_bailingmoe},
    {"seed-coder", r_seed_coder},
    {"kimi-k2", r_kimi_k2},
    {"afmoe", r_afmoe},
    {"laguna", r_laguna},
};

// The \p{..} classes llama.cpp's collapse understands; all five letter subclasses are plain LETTER there.
struct category_class {
    std::string_view spelling;
    uint16_t flag;
};
constexpr category_class k_classes[] = {
    {"\\p{N}", unicode::number},  {"\\p{L}", unicode::letter},  {"\\p{P}", unicode::punctuation},
    {"\\p{M}", unicode::mark},    {"\\p{S}", unicode::symbol},  {"\\p{Lu}", unicode::letter},
    {"\\p{Ll}", unicode::letter}, {"\\p{Lt}", unicode::letter}, {"\\p{Lm}", unicode::letter},
    {"\\p{Lo}", unicode::letter},
};

// The code a non-ASCII codepoint of a category stands as in the collapsed text, and the ASCII members that class
// has (llama.cpp's k_ucat_cpt and k_ucat_map).
uint32_t collapsed_code(uint16_t category) {
    switch (category) {
    case unicode::number: return 0xD1;
    case unicode::letter: return 0xD2;
    case unicode::punctuation: return 0xD3;
    case unicode::mark: return 0xD4;
    case unicode::symbol: return 0xD5;
    default: return 0xD0;
    }
}
std::string_view ascii_members(uint16_t category) {
    switch (category) {
    case unicode::number: return "0-9";
    case unicode::letter: return "A-Za-z";
    case unicode::punctuation: return "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}";
    case unicode::symbol: return "\\$\\+<->^`\\|\\~";
    default: return "";
    }
}

bool uses_categories(std::string_view regex) {
    for (const auto &c : k_classes)
        if (regex.find(c.spelling) != std::string_view::npos) return true;
    return false;
}

// llama.cpp's rewrite of a \p regex for the collapsed text: each \p{X} becomes [<code><ASCII members>] (or just
// its contents inside a bracket). The regex must be ASCII.
std::u32string collapse_regex(std::string_view regex, const std::string &name) {
    std::u32string out;
    bool inside = false;
    for (size_t i = 0; i < regex.size(); ++i) {
        const char c = regex[i];
        if (static_cast<unsigned char>(c) >= 0x80)
            fail("pre-tokenizer {}: regex mixes Unicode categories with non-ASCII characters, which llama.cpp's "
                 "collapsed matching cannot run",
                 name);
        if (c == '[' && (i == 0 || regex[i - 1] != '\\')) {
            out += U'[';
            inside = true;
            continue;
        }
        if (inside && c == ']' && regex[i - 1] != '\\') {
            out += U']';
            inside = false;
            continue;
        }
        if (c == '\\' && i + 3 < regex.size() && regex[i + 1] == 'p' && regex[i + 2] == '{') {
            const size_t close = regex.find('}', i + 3);
            if (close != std::string_view::npos && close <= i + 10) {
                const std::string_view spelled = regex.substr(i, close - i + 1);
                for (const auto &cls : k_classes) {
                    if (cls.spelling != spelled) continue;
                    if (!inside) out += U'[';
                    out += static_cast<char32_t>(collapsed_code(cls.flag));
                    for (const char m : ascii_members(cls.flag)) out += static_cast<char32_t>(m);
                    if (!inside) out += U']';
                    i = close;
                    goto next;
                }
            }
        }
        out += static_cast<char32_t>(c);
    next:;
    }
    return out;
}

std::u32string decode_regex(std::string_view regex) {
    std::vector<uint32_t> cpts;
    unicode::decode_utf8(regex, cpts);
    return std::u32string(cpts.begin(), cpts.end());
}

} // namespace

std::optional<pre_tokenizer_spec> find_pre_tokenizer(std::string_view name) {
    for (const auto &s : k_specs)
        if (s.name == name) return s;
    return std::nullopt;
}

std::vector<std::string_view> pre_tokenizer_names() {
    std::vector<std::string_view> names;
    for (const auto &s : k_specs) names.push_back(s.name);
    return names;
}

bpe_rules rules_for(const pre_tokenizer_spec &spec) {
    bpe_rules r;
    for (const std::string_view regex : spec.regexes) r.splits.push_back({std::string(regex), regex_dialect::llama_cpp});
    r.byte_level = (spec.flags & pre_raw_bytes) == 0;
    r.unknown = r.byte_level ? unknown_symbol::single_bytes : unknown_symbol::byte_tokens;
    r.ignore_merges = (spec.flags & pre_ignore_merges) != 0;
    r.newline_words_whole = (spec.flags & pre_newline_words_whole) != 0;
    if (spec.flags & pre_escape_whitespace) r.replacements.emplace_back(" ", "\xE2\x96\x81");
    return r;
}

pre_tokenizer::pre_tokenizer(std::span<const split_rule> rules, std::string name) : name_(std::move(name)) {
    for (const split_rule &rule : rules) {
        step s;
        s.rule = rule;
        const std::string label = fmt::format("{} #{}", name_, steps_.size() + 1);
        if (rule.dialect == regex_dialect::unicode) {
            s.regex.emplace(decode_regex(rule.regex), true, label);
        } else if ((s.custom = find_custom_splitter(rule.regex)) != nullptr) {
            // llama.cpp's hand-written splitter for exactly this regex
        } else if (uses_categories(rule.regex)) {
            s.on = subject::collapsed;
            s.regex.emplace(collapse_regex(rule.regex, name_), false, label);
            need_collapsed_ = true;
        } else {
            s.on = subject::wide;
            s.regex.emplace(decode_regex(rule.regex), false, label);
            need_wide_ = true;
        }
        steps_.push_back(std::move(s));
    }
}

namespace {

// Hugging Face's split of one piece into words by behaviour (tokenizers' NormalizedString::split): the segments
// are matches and the stretches between them; empty ones take part in the merging and are dropped at the end.
void words_by_behavior(std::vector<split_regex::segment> &segs, const split_rule &rule, std::vector<size_t> &out) {
    if (rule.invert)
        for (auto &g : segs) g.match = !g.match;
    std::vector<size_t> words;
    switch (rule.behavior) {
    case split_behavior::isolated:
        for (const auto &g : segs) words.push_back(g.length);
        break;
    case split_behavior::merged_with_previous: {
        bool previous_match = false;
        for (const auto &g : segs) {
            if (g.match && !previous_match && !words.empty())
                words.back() += g.length;
            else
                words.push_back(g.length);
            previous_match = g.match;
        }
        break;
    }
    case split_behavior::merged_with_next: {
        bool previous_match = false; // of the segment after this one (walking backwards)
        for (size_t i = segs.size(); i-- > 0;) {
            const auto &g = segs[i];
            if (g.match && !previous_match && !words.empty())
                words.back() += g.length;
            else
                words.push_back(g.length);
            previous_match = g.match;
        }
        std::reverse(words.begin(), words.end());
        break;
    }
    case split_behavior::contiguous: {
        bool previous_match = false;
        for (const auto &g : segs) {
            if (g.match && previous_match && !words.empty())
                words.back() += g.length;
            else
                words.push_back(g.length);
            previous_match = g.match;
        }
        break;
    }
    }
    for (const size_t w : words)
        if (w > 0) out.push_back(w);
}

} // namespace

void pre_tokenizer::split(std::string_view text, pre_split_result &r) const {
    r.cpts.clear();
    unicode::decode_utf8(text, r.cpts);
    const size_t n = r.cpts.size();
    if (need_collapsed_) {
        r.collapsed.resize(n);
        for (size_t i = 0; i < n; ++i) {
            const uint32_t c = r.cpts[i];
            if (c < 0x80) {
                r.collapsed[i] = c;
                continue;
            }
            const uint16_t f = unicode::flags(c);
            r.collapsed[i] = (f & unicode::whitespace) ? 0x0B : collapsed_code(f & unicode::category_mask);
        }
    }
    if (need_wide_) {
        r.wide.resize(n);
        for (size_t i = 0; i < n; ++i) {
            const uint32_t c = r.cpts[i];
            r.wide[i] = (c > 0x7F && (unicode::flags(c) & unicode::whitespace)) ? 0x0B : c;
        }
    }
    r.lengths.assign(1, n);
    for (const step &s : steps_) {
        r.next.clear();
        if (s.custom != nullptr) {
            s.custom(r.cpts, r.lengths, r.next);
        } else {
            const std::vector<uint32_t> &subject = s.on == subject::collapsed ? r.collapsed
                                                   : s.on == subject::wide    ? r.wide
                                                                              : r.cpts;
            size_t start = 0;
            for (const size_t length : r.lengths) {
                s.regex->segments(std::span<const uint32_t>(subject.data() + start, length), r.scratch, r.segments);
                start += length;
                if (s.rule.dialect == regex_dialect::unicode) {
                    words_by_behavior(r.segments, s.rule, r.next);
                } else {
                    // llama.cpp keeps every match and gap, an empty match as an empty word.
                    for (const auto &g : r.segments) r.next.push_back(g.length);
                }
            }
        }
        r.lengths.swap(r.next);
    }
}

} // namespace strata
