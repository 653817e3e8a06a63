#include "tokenizer/hf_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/text_file.hpp"
#include "common/log.hpp"

namespace strata {

namespace {

using json = nlohmann::json;

constexpr std::string_view k_metaspace = "\xE2\x96\x81"; // U+2581, SentencePiece's space
// GPT-2's pattern, which Hugging Face's ByteLevel pre-tokenizer applies when use_regex is true.
constexpr std::string_view k_gpt2_regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class reader {
  public:
    reader(const std::string &origin) : origin_(origin) {}

    [[noreturn]] void refuse(const std::string &field, const std::string &what) const {
        fail("{}: {}: {}", origin_, field, what);
    }
    const json &member(const json &obj, const char *key, const std::string &field) const {
        if (!obj.is_object() || !obj.contains(key)) refuse(field, fmt::format("\"{}\" is missing", key));
        return obj.at(key);
    }
    std::string string_of(const json &v, const std::string &field) const {
        if (!v.is_string()) refuse(field, fmt::format("must be a string, not {}", v.type_name()));
        return v.get<std::string>();
    }
    bool bool_or(const json &obj, const char *key, bool fallback, const std::string &field) const {
        if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
        if (!obj.at(key).is_boolean()) refuse(field + "." + key, "must be true or false");
        return obj.at(key).get<bool>();
    }
    std::string type_of(const json &obj, const std::string &field) const {
        return string_of(member(obj, "type", field), field + ".type");
    }
    // A literal string or a regex, as Hugging Face writes patterns: {"String": "..."} or {"Regex": "..."}.
    std::string pattern_regex(const json &pattern, const std::string &field) const {
        if (pattern.is_object() && pattern.contains("Regex")) return string_of(pattern.at("Regex"), field + ".Regex");
        if (pattern.is_object() && pattern.contains("String"))
            return "\\Q" + string_of(pattern.at("String"), field + ".String") + "\\E";
        refuse(field, "must be {\"String\": ...} or {\"Regex\": ...}");
    }
    std::string literal(const json &pattern, const std::string &field) const {
        if (pattern.is_object() && pattern.contains("String")) return string_of(pattern.at("String"), field + ".String");
        refuse(field, "only a literal {\"String\": ...} pattern is supported here");
    }

  private:
    const std::string &origin_;
};

// A token named in tokenizer_config.json: "text" or an AddedToken object {"content": "text", ...}; null is none.
std::optional<std::string> config_token(const json &config, const char *key, const reader &r) {
    if (!config.contains(key) || config.at(key).is_null()) return std::nullopt;
    const json &v = config.at(key);
    if (v.is_object()) return r.string_of(r.member(v, "content", key), std::string(key) + ".content");
    return r.string_of(v, key);
}

void read_normalizer(const json &n, bpe_rules &rules, const reader &r, const std::string &field) {
    if (n.is_null()) return;
    const std::string type = r.type_of(n, field);
    if (type == "Sequence") {
        const json &list = r.member(n, "normalizers", field);
        if (!list.is_array()) r.refuse(field + ".normalizers", "must be a list");
        for (size_t i = 0; i < list.size(); ++i) read_normalizer(list[i], rules, r, fmt::format("{}.normalizers[{}]", field, i));
    } else if (type == "NFC") {
        if (!rules.replacements.empty() || !rules.prepend.empty())
            r.refuse(field, "NFC after a Replace or Prepend normalizer is not supported");
        rules.nfc = true;
    } else if (type == "Replace") {
        rules.replacements.emplace_back(r.literal(r.member(n, "pattern", field), field + ".pattern"),
                                        r.string_of(r.member(n, "content", field), field + ".content"));
    } else if (type == "Prepend") {
        if (!rules.prepend.empty()) r.refuse(field, "a second Prepend normalizer is not supported");
        rules.prepend = r.string_of(r.member(n, "prepend", field), field + ".prepend");
        rules.prepend_where = prepend_scheme::every_stretch;
    } else {
        r.refuse(field, fmt::format("the {} normalizer is not supported (Strata follows NFC, Replace with a literal "
                                    "pattern, Prepend, and Sequences of them)",
                                    type));
    }
}

split_behavior behavior_of(const std::string &name, const reader &r, const std::string &field) {
    if (name == "Isolated") return split_behavior::isolated;
    if (name == "MergedWithPrevious") return split_behavior::merged_with_previous;
    if (name == "MergedWithNext") return split_behavior::merged_with_next;
    if (name == "Contiguous") return split_behavior::contiguous;
    r.refuse(field, fmt::format("split behavior \"{}\" is not supported (Isolated, MergedWithPrevious, MergedWithNext, "
                                "Contiguous)",
                                name));
}

// `first`: this pre-tokenizer sees the whole stretch (it is the first of a Sequence, or alone), which is where the
// ones that add a prefix can be followed exactly.
void read_pre_tokenizer(const json &p, bpe_rules &rules, bool &byte_level, const reader &r, const std::string &field,
                        bool first) {
    if (p.is_null()) return;
    const std::string type = r.type_of(p, field);
    if (type == "Sequence") {
        const json &list = r.member(p, "pretokenizers", field);
        if (!list.is_array()) r.refuse(field + ".pretokenizers", "must be a list");
        for (size_t i = 0; i < list.size(); ++i)
            read_pre_tokenizer(list[i], rules, byte_level, r, fmt::format("{}.pretokenizers[{}]", field, i), first && i == 0);
    } else if (type == "Split") {
        split_rule s;
        s.regex = r.pattern_regex(r.member(p, "pattern", field), field + ".pattern");
        s.behavior = behavior_of(r.string_of(r.member(p, "behavior", field), field + ".behavior"), r, field + ".behavior");
        s.invert = r.bool_or(p, "invert", false, field);
        rules.splits.push_back(std::move(s));
    } else if (type == "ByteLevel") {
        byte_level = true;
        if (r.bool_or(p, "add_prefix_space", false, field)) {
            if (!first) r.refuse(field + ".add_prefix_space", "is only supported on the first pre-tokenizer");
            rules.prepend = " ";
            rules.prepend_where = prepend_scheme::every_stretch;
            rules.prepend_unless_present = true;
        }
        if (r.bool_or(p, "use_regex", true, field)) rules.splits.push_back({std::string(k_gpt2_regex)});
    } else if (type == "Digits") {
        rules.splits.push_back({r.bool_or(p, "individual_digits", false, field) ? "\\p{N}" : "\\p{N}+"});
    } else if (type == "Metaspace") {
        if (!first) r.refuse(field, "Metaspace is only supported as the first pre-tokenizer");
        const std::string replacement = p.contains("replacement") ? r.string_of(p.at("replacement"), field + ".replacement")
                                                                  : std::string(k_metaspace);
        rules.replacements.emplace_back(" ", replacement);
        std::string scheme = "always";
        if (p.contains("prepend_scheme")) scheme = r.string_of(p.at("prepend_scheme"), field + ".prepend_scheme");
        else if (p.contains("add_prefix_space") && !r.bool_or(p, "add_prefix_space", true, field)) scheme = "never";
        if (scheme != "never") {
            if (!rules.prepend.empty()) r.refuse(field, "Metaspace's prepend after a Prepend normalizer is not supported");
            if (scheme != "always" && scheme != "first")
                r.refuse(field + ".prepend_scheme", fmt::format("\"{}\" is not always, first or never", scheme));
            rules.prepend = replacement;
            rules.prepend_where = scheme == "first" ? prepend_scheme::text_start : prepend_scheme::every_stretch;
            rules.prepend_unless_present = true;
        }
        if (r.bool_or(p, "split", true, field))
            rules.splits.push_back({"\\Q" + replacement + "\\E", regex_dialect::unicode, split_behavior::merged_with_next});
    } else {
        r.refuse(field, fmt::format("the {} pre-tokenizer is not supported (Strata follows ByteLevel, Split, Digits, "
                                    "Metaspace, and Sequences of them)",
                                    type));
    }
}

// The decoder must undo what the rules do; it also says whether the first piece's leading space is dropped.
void read_decoder(const json &d, const bpe_rules &rules, bool &drops_leading_space, const reader &r,
                  const std::string &field) {
    if (d.is_null()) return;
    const std::string type = r.type_of(d, field);
    if (type == "Sequence") {
        const json &list = r.member(d, "decoders", field);
        if (!list.is_array()) r.refuse(field + ".decoders", "must be a list");
        for (size_t i = 0; i < list.size(); ++i)
            read_decoder(list[i], rules, drops_leading_space, r, fmt::format("{}.decoders[{}]", field, i));
    } else if (type == "ByteLevel") {
        if (!rules.byte_level) r.refuse(field, "a ByteLevel decoder needs the ByteLevel pre-tokenizer");
    } else if (type == "Replace") {
        // Undoing a normalizer's replacement (U+2581 -> ' '): the pieces already do it.
        const std::string from = r.literal(r.member(d, "pattern", field), field + ".pattern");
        const std::string to = r.string_of(r.member(d, "content", field), field + ".content");
        const bool undoes = std::any_of(rules.replacements.begin(), rules.replacements.end(),
                                        [&](const auto &p) { return p.first == to && p.second == from; });
        if (!undoes) r.refuse(field, fmt::format("Replace \"{}\" -> \"{}\" undoes no normalizer replacement", from, to));
    } else if (type == "ByteFallback" || type == "Fuse") {
        // <0xNN> tokens are bytes and pieces are joined: what Strata's pieces do.
    } else if (type == "Strip") {
        const std::string content = r.string_of(r.member(d, "content", field), field + ".content");
        const auto start = r.member(d, "start", field), stop = r.member(d, "stop", field);
        if (content != " " || !start.is_number_integer() || !stop.is_number_integer() || stop.get<int64_t>() != 0 ||
            start.get<int64_t>() > 1)
            r.refuse(field, "only Strip of one leading space (content \" \", start 1, stop 0) is supported");
        if (start.get<int64_t>() == 1) drops_leading_space = true;
    } else if (type == "Metaspace") {
        std::string scheme = "always";
        if (d.contains("prepend_scheme")) scheme = r.string_of(d.at("prepend_scheme"), field + ".prepend_scheme");
        else if (d.contains("add_prefix_space") && !r.bool_or(d, "add_prefix_space", true, field)) scheme = "never";
        if (scheme != "never") drops_leading_space = true;
    } else {
        r.refuse(field, fmt::format("the {} decoder is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                                    "Metaspace)",
                                    type));
    }
}

// Which special tokens the post-processor adds around a single sequence.
void read_post_processor(const json &p, vocab_data &v, const std::function<int32_t(const std::string &)> &id_of,
                         const reader &r, const std::string &field) {
    if (p.is_null()) return;
    const std::string type = r.type_of(p, field);
    if (type == "Sequence") {
        const json &list = r.member(p, "processors", field);
        if (!list.is_array()) r.refuse(field + ".processors", "must be a list");
        for (size_t i = 0; i < list.size(); ++i)
            read_post_processor(list[i], v, id_of, r, fmt::format("{}.processors[{}]", field, i));
    } else if (type == "ByteLevel") {
        // offsets only
    } else if (type == "TemplateProcessing") {
        const json &single = r.member(p, "single", field);
        if (!single.is_array()) r.refuse(field + ".single", "must be a list");
        // The template as a list of items: special tokens before the sequence are added first, after it last.
        bool seen_sequence = false;
        for (size_t i = 0; i < single.size(); ++i) {
            const json &item = single[i];
            const std::string at = fmt::format("{}.single[{}]", field, i);
            if (item.contains("Sequence")) {
                seen_sequence = true;
                continue;
            }
            if (!item.contains("SpecialToken")) r.refuse(at, "must be a Sequence or a SpecialToken");
            const std::string name = r.string_of(r.member(item.at("SpecialToken"), "id", at), at + ".SpecialToken.id");
            const int32_t id = id_of(name);
            if (id < 0) r.refuse(at, fmt::format("special token \"{}\" is not in the vocabulary", name));
            if (!seen_sequence) {
                if (v.add_bos) r.refuse(at, "more than one special token before the sequence is not supported");
                v.add_bos = true;
                v.bos = id;
            } else {
                if (v.add_eos) r.refuse(at, "more than one special token after the sequence is not supported");
                v.add_eos = true;
                v.eos = id;
            }
        }
    } else {
        r.refuse(field, fmt::format("the {} post-processor is not supported (TemplateProcessing, ByteLevel)", type));
    }
}

} // namespace

hf_tokenizer parse_hf_tokenizer(std::string_view tokenizer_json, std::string_view config_json, const std::string &origin) {
    const reader r(origin);
    json t;
    try {
        t = json::parse(tokenizer_json);
    } catch (const json::exception &e) {
        fail("{}: tokenizer.json is not valid JSON: {}", origin, e.what());
    }
    json config = json::object();
    if (!config_json.empty()) {
        try {
            config = json::parse(config_json);
        } catch (const json::exception &e) {
            fail("{}: tokenizer_config.json is not valid JSON: {}", origin, e.what());
        }
        if (!config.is_object()) r.refuse("tokenizer_config.json", "must be a JSON object");
    }
    if (!t.is_object()) r.refuse("tokenizer.json", "must be a JSON object");

    hf_tokenizer out;
    vocab_data &v = out.vocab;
    v.model = vocab_model::bpe;
    v.convention = special_token_convention::hugging_face;
    v.origin = origin;
    v.pre = "tokenizer.json";

    // The model.
    const json &model = r.member(t, "model", "tokenizer.json");
    const std::string model_type = model.contains("type") ? r.type_of(model, "model") : std::string("BPE");
    if (model_type != "BPE")
        r.refuse("model.type", fmt::format("\"{}\" is not supported; Strata runs BPE tokenizers (WordPiece, Unigram "
                                           "and WordLevel are not implemented)",
                                           model_type));
    if (model.contains("dropout") && !model.at("dropout").is_null() &&
        !(model.at("dropout").is_number() && model.at("dropout").get<double>() == 0.0))
        r.refuse("model.dropout", "BPE dropout samples merges at random; inference needs it null");
    for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (model.contains(key) && !model.at(key).is_null() && !r.string_of(model.at(key), std::string("model.") + key).empty())
            r.refuse(std::string("model.") + key, "a subword prefix or suffix is not supported");
    const bool byte_fallback = r.bool_or(model, "byte_fallback", false, "model");
    v.bpe.ignore_merges = r.bool_or(model, "ignore_merges", false, "model");
    v.bpe.fuse_unknown = r.bool_or(model, "fuse_unk", false, "model");

    const json &vocab_json = r.member(model, "vocab", "model");
    if (!vocab_json.is_object()) r.refuse("model.vocab", "must be an object of token -> id");
    int64_t max_id = -1;
    std::vector<std::pair<int64_t, std::string>> entries;
    entries.reserve(vocab_json.size());
    for (const auto &[text, id] : vocab_json.items()) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= std::numeric_limits<int32_t>::max())
            r.refuse("model.vocab", fmt::format("token \"{}\" has id {}; ids are integers from 0", text, id.dump()));
        entries.emplace_back(id.get<int64_t>(), text);
        max_id = std::max(max_id, id.get<int64_t>());
    }
    const json added = t.contains("added_tokens") ? t.at("added_tokens") : json::array();
    if (!added.is_array()) r.refuse("added_tokens", "must be a list");
    for (size_t i = 0; i < added.size(); ++i) {
        const json &id = r.member(added[i], "id", fmt::format("added_tokens[{}]", i));
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= std::numeric_limits<int32_t>::max())
            r.refuse(fmt::format("added_tokens[{}].id", i), "must be an integer from 0");
        max_id = std::max(max_id, id.get<int64_t>());
    }
    if (max_id < 0) r.refuse("model.vocab", "the vocabulary is empty");
    // Real vocabularies are dense: ids past twice the tokens the file names (plus slack) mean a damaged file, and
    // would cost memory for nothing.
    const int64_t named = static_cast<int64_t>(entries.size() + added.size());
    if (max_id >= 2 * named + 1024 || max_id >= (int64_t{1} << 24))
        r.refuse("model.vocab", fmt::format("id {} is far beyond the {} tokens the file names; the file is damaged",
                                            max_id, named));
    const auto n = static_cast<size_t>(max_id + 1);
    v.tokens.assign(n, std::string());
    v.types.assign(n, token_type::unused);
    for (auto &[id, text] : entries) {
        if (!v.tokens[static_cast<size_t>(id)].empty())
            r.refuse("model.vocab", fmt::format("id {} is given to both \"{}\" and \"{}\"", id, v.tokens[static_cast<size_t>(id)], text));
        v.tokens[static_cast<size_t>(id)] = std::move(text);
        v.types[static_cast<size_t>(id)] = token_type::normal;
    }
    v.lstrip.assign(n, 0);
    v.rstrip.assign(n, 0);
    bool any_strip = false;
    for (size_t i = 0; i < added.size(); ++i) {
        const std::string at = fmt::format("added_tokens[{}]", i);
        const json &a = added[i];
        const auto id = static_cast<size_t>(a.at("id").get<int64_t>());
        const std::string content = r.string_of(r.member(a, "content", at), at + ".content");
        if (content.empty()) r.refuse(at + ".content", "is empty");
        if (v.types[id] != token_type::unused && v.tokens[id] != content)
            r.refuse(at, fmt::format("id {} is \"{}\" in model.vocab but \"{}\" here", id, v.tokens[id], content));
        if (r.bool_or(a, "single_word", false, at))
            r.refuse(at + ".single_word", "single-word added tokens are not supported");
        const bool special = r.bool_or(a, "special", false, at);
        v.tokens[id] = content;
        v.types[id] = special ? token_type::control : token_type::user_defined;
        v.lstrip[id] = r.bool_or(a, "lstrip", false, at);
        v.rstrip[id] = r.bool_or(a, "rstrip", false, at);
        any_strip = any_strip || v.lstrip[id] || v.rstrip[id];
    }
    if (!any_strip) v.lstrip.clear(), v.rstrip.clear();
    for (size_t i = 0; i < n; ++i)
        if (v.types[i] == token_type::unused) v.tokens[i] = fmt::format("[UNUSED_{}]", i); // a hole in the ids

    const json &merges = r.member(model, "merges", "model");
    if (!merges.is_array()) r.refuse("model.merges", "must be a list");
    v.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        const json &m = merges[i];
        const std::string at = fmt::format("model.merges[{}]", i);
        if (m.is_string()) {
            // "left right": Hugging Face splits at the one space.
            const std::string line = m.get<std::string>();
            const size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
                r.refuse(at, fmt::format("\"{}\" is not two symbols separated by one space", line));
            v.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
        } else if (m.is_array() && m.size() == 2) {
            v.merges.emplace_back(r.string_of(m[0], at + "[0]"), r.string_of(m[1], at + "[1]"));
        } else {
            r.refuse(at, "must be \"left right\" or [left, right]");
        }
    }

    // How text is read.
    bool byte_level = false;
    read_normalizer(t.contains("normalizer") ? t.at("normalizer") : json(), v.bpe, r, "normalizer");
    read_pre_tokenizer(t.contains("pre_tokenizer") ? t.at("pre_tokenizer") : json(), v.bpe, byte_level, r,
                       "pre_tokenizer", true);
    v.bpe.byte_level = byte_level;
    if (byte_level) {
        v.bpe.unknown = unknown_symbol::single_bytes; // never needed: the byte alphabet spells every byte
    } else {
        v.bpe.unknown = byte_fallback ? unknown_symbol::byte_fallback : unknown_symbol::unknown_token;
        // <0xNN> tokens are bytes.
        for (size_t i = 0; i < n; ++i)
            if (v.types[i] == token_type::normal && parse_byte_token(v.tokens[i]) >= 0) v.types[i] = token_type::byte;
    }
    if (byte_fallback && byte_level) r.refuse("model.byte_fallback", "byte_fallback with a ByteLevel pre-tokenizer");
    bool drops_leading_space = false;
    read_decoder(t.contains("decoder") ? t.at("decoder") : json(), v.bpe, drops_leading_space, r, "decoder");
    v.add_space_prefix = drops_leading_space;

    // Special ids.
    std::unordered_map<std::string, int32_t> ids;
    for (size_t i = 0; i < n; ++i) ids.emplace(v.tokens[i], static_cast<int32_t>(i));
    const auto id_of = [&](const std::string &text) {
        const auto it = ids.find(text);
        return it == ids.end() ? -1 : it->second;
    };
    if (model.contains("unk_token") && !model.at("unk_token").is_null()) {
        const std::string unk = r.string_of(model.at("unk_token"), "model.unk_token");
        v.unk = id_of(unk);
        if (v.unk < 0) r.refuse("model.unk_token", fmt::format("\"{}\" is not in the vocabulary", unk));
    }
    read_post_processor(t.contains("post_processor") ? t.at("post_processor") : json(), v, id_of, r, "post_processor");
    for (const auto &[key, slot] : {std::pair<const char *, int32_t *>{"bos_token", &v.bos},
                                    {"eos_token", &v.eos}, {"unk_token", &v.unk}, {"pad_token", &v.pad}}) {
        const auto text = config_token(config, key, r);
        if (!text) continue;
        const int32_t id = id_of(*text);
        if (id < 0) r.refuse(std::string("tokenizer_config.json: ") + key, fmt::format("\"{}\" is not in the vocabulary", *text));
        *slot = id;
    }
    // The slow tokenizers' flags, which the fast ones (LlamaTokenizerFast, GemmaTokenizerFast...) follow too.
    v.add_bos = r.bool_or(config, "add_bos_token", v.add_bos, "tokenizer_config.json");
    v.add_eos = r.bool_or(config, "add_eos_token", v.add_eos, "tokenizer_config.json");
    if (r.bool_or(config, "split_special_tokens", false, "tokenizer_config.json"))
        r.refuse("tokenizer_config.json: split_special_tokens", "special tokens that stay text are not supported");

    // Chat templates: a string, or a list of {"name", "template"}.
    if (config.contains("chat_template") && !config.at("chat_template").is_null()) {
        const json &ct = config.at("chat_template");
        if (ct.is_string()) {
            out.chat_templates.emplace_back("default", ct.get<std::string>());
        } else if (ct.is_array()) {
            for (size_t i = 0; i < ct.size(); ++i) {
                const std::string at = fmt::format("tokenizer_config.json: chat_template[{}]", i);
                out.chat_templates.emplace_back(r.string_of(r.member(ct[i], "name", at), at + ".name"),
                                                r.string_of(r.member(ct[i], "template", at), at + ".template"));
            }
        } else {
            r.refuse("tokenizer_config.json: chat_template", "must be a string or a list of {name, template}");
        }
    }
    return out;
}

hf_tokenizer load_hf_tokenizer(const std::filesystem::path &path) {
    namespace fs = std::filesystem;
    const fs::path file = fs::is_directory(path) ? path / "tokenizer.json" : path;
    if (!fs::exists(file)) fail("{}: no tokenizer.json there; a Hugging Face model folder needs one", path.string());
    const fs::path config = file.parent_path() / "tokenizer_config.json";
    return parse_hf_tokenizer(read_text_file(file), fs::exists(config) ? read_text_file(config) : std::string(),
                              file.string());
}

} // namespace strata
