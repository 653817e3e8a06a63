#include "config/command_line.hpp"

#include "common/error.hpp"
#include "config/foreign_options.hpp"
#include "config/units.hpp"

#include <fmt/format.h>

#include <array>
#include <map>
#include <string_view>

namespace strata::config {

namespace {

constexpr std::array<std::string_view, 5> k_subcommands{"serve", "plugins", "topology", "plan", "help"};
constexpr std::array<std::string_view, 6> k_builtin_options{"--config", "--set", "--help", "-h", "--json", "--version"};

bool is_subcommand(std::string_view w) {
    for (const std::string_view s : k_subcommands)
        if (s == w) return true;
    return false;
}

bool is_builtin_option(std::string_view w) {
    for (const std::string_view o : k_builtin_options)
        if (o == w || (w.substr(0, o.size()) == o && w.size() > o.size() && w[o.size()] == '=' && o.size() > 2)) return true;
    return false;
}

bool is_bool_word(std::string_view w) { return w == "true" || w == "false"; }

// "--name" or llama.cpp's "-ngl"; "-1" and "-0.5" are values, not flags.
bool is_flag_word(std::string_view w) {
    if (w.size() < 2 || w.front() != '-') return false;
    if (w[1] == '-') return w.size() > 2;
    return !(w[1] >= '0' && w[1] <= '9') && w[1] != '.';
}

[[noreturn]] void unexpected_word(std::string_view word) {
    std::vector<std::string> names(k_subcommands.begin(), k_subcommands.end());
    const std::string best = closest(word, names);
    if (!best.empty()) fail("unexpected argument '{}'; did you mean the subcommand '{}'?", word, best);
    fail("unexpected argument '{}'; the subcommands are serve, plugins, topology, plan and help, and options start "
         "with -",
         word);
}

} // namespace

command_line parse_command_line(int argc, const char *const *argv) {
    command_line cl;
    std::vector<std::string_view> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i] != nullptr ? argv[i] : "");

    const auto value_after = [&](size_t &i, std::string_view option, std::string_view example) -> std::string {
        if (i + 1 >= args.size()) fail("{} needs a value, e.g. {} {}", option, option, example);
        return std::string(args[++i]);
    };

    size_t flags_before_subcommand = 0; // serve's model is the word right after it, whatever flags came before
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        if (a == "--config") {
            cl.config_path = value_after(i, a, "configs/default.toml");
        } else if (a.rfind("--config=", 0) == 0) {
            cl.config_path = std::string(a.substr(9));
        } else if (a == "--set") {
            cl.set_assignments.push_back(value_after(i, a, "sampling.temperature=0.7"));
        } else if (a.rfind("--set=", 0) == 0) {
            cl.set_assignments.emplace_back(a.substr(6));
        } else if (a == "--help" || a == "-h") {
            cl.help = true;
        } else if (a == "--json") {
            cl.json = true;
        } else if (a == "--version") {
            cl.version = true;
        } else if (is_flag_word(a)) {
            flag_token t;
            const size_t eq = a.find('=');
            t.name = std::string(a.substr(0, eq));
            if (a.size() > 2 && a[0] == '-' && a[1] == 'O' && a.find_first_not_of("0123456789", 2) == std::string_view::npos) {
                t.name = "-O"; // vLLM's -O3 = -O 3
                t.inline_value = std::string(a.substr(2));
            } else if (eq != std::string_view::npos) {
                t.inline_value = std::string(a.substr(eq + 1));
            } else if (i + 1 < args.size() && !is_flag_word(args[i + 1]) && !is_builtin_option(args[i + 1]) &&
                       !(cl.subcommand.empty() && is_subcommand(args[i + 1]))) {
                // Maybe this flag's value, maybe a stray word after a switch: resolve_flags decides.
                t.next_word = std::string(args[++i]);
                while (i + 1 < args.size() && !is_flag_word(args[i + 1]) && !is_builtin_option(args[i + 1]) &&
                       !(cl.subcommand.empty() && is_subcommand(args[i + 1])))
                    t.more_words.emplace_back(args[++i]);
            }
            const bool negated = t.name.rfind("--no-", 0) == 0;
            cl.flags.emplace_back(t.name, t.inline_value ? *t.inline_value
                                          : t.next_word  ? *t.next_word
                                          : negated      ? "false"
                                                         : "true");
            cl.flag_tokens.push_back(std::move(t));
        } else if (cl.subcommand.empty() && is_subcommand(a)) {
            cl.subcommand = std::string(a);
            flags_before_subcommand = cl.flag_tokens.size();
        } else if (cl.subcommand == "serve" && !cl.model_argument && cl.flag_tokens.size() == flags_before_subcommand) {
            cl.model_argument = std::string(a);
        } else if (cl.subcommand == "serve" && !cl.model_argument) {
            fail("'{}': the model comes right after serve: runtime serve MODEL [options]", a);
        } else {
            unexpected_word(a);
        }
    }
    if (cl.subcommand == "help") cl.help = true;
    return cl;
}

std::vector<flag_assignment> resolve_flag_assignments(const command_line &cl, const schema &s) {
    std::vector<flag_assignment> out;
    std::map<const key_spec *, size_t> list_at; // a list key's assignment in `out`: a repeated list flag adds to it
    for (const flag_token &t : cl.flag_tokens) {
        flag_match m = s.match_flag(t.name);
        bool negated = false;
        if (m.key == nullptr && t.name.rfind("--no-", 0) == 0) {
            m = s.match_flag("--" + t.name.substr(5));
            if (m.key != nullptr && m.key->type != STRATA_CONFIG_BOOL)
                fail("{}: {} is not a switch; give it a value instead, e.g. {} VALUE", t.name, m.key->flag, m.key->flag);
            negated = m.key != nullptr;
        }
        const key_spec *key = m.key;
        const std::string &table = m.table;
        if (key == nullptr) {
            if (auto why = why_not_here(t.name)) fail("{} has no meaning here: {}", t.name, *why);
            std::vector<std::string> candidates = s.all_flags();
            for (const table_spec &ts : s.tables())
                for (const key_spec &k : ts.keys)
                    if (!k.flag.empty() && k.type == STRATA_CONFIG_BOOL) candidates.push_back("--no-" + k.flag.substr(2));
            for (const std::string_view b : k_builtin_options)
                if (b.size() > 2) candidates.emplace_back(b);
            const std::string best = closest(t.name, candidates);
            if (!best.empty()) fail("unknown option {}; did you mean {}?", t.name, best);
            fail("unknown option {}; run with --help to list the options", t.name);
        }

        std::string value;
        if (key->type == STRATA_CONFIG_BOOL && !t.more_words.empty()) unexpected_word(t.more_words.front());
        if (key->type == STRATA_CONFIG_BOOL) {
            if (t.inline_value) {
                if (negated) fail("{} takes no value; write {} or {}=false", t.name, t.name, key->flag);
                value = *t.inline_value;
            } else if (t.next_word && is_bool_word(*t.next_word) && !negated) {
                value = *t.next_word;
            } else if (t.next_word) {
                // A switch does not take the word after it, so that word was a stray positional argument.
                if (cl.subcommand == "serve" && !cl.model_argument)
                    fail("'{}' after {}: the model comes right after serve: runtime serve MODEL [options]",
                         *t.next_word, t.name);
                if (is_subcommand(*t.next_word))
                    fail("the subcommand '{}' must come before the options: runtime {} [options]", *t.next_word,
                         *t.next_word);
                unexpected_word(*t.next_word);
            } else {
                value = negated ? "false" : "true";
            }
        } else if (t.inline_value) {
            value = *t.inline_value;
        } else if (t.next_word) {
            value = *t.next_word;
            // vLLM's list flags take several words: --served-model-name a b = "a,b".
            for (const std::string &w : t.more_words) {
                if (key->type != STRATA_CONFIG_STRING_LIST) unexpected_word(w);
                value += "," + w;
            }
        } else {
            fail("{} needs a value ({}), e.g. {} VALUE", t.name, type_name(key->type), key->flag);
        }
        if (m.inverted) {
            if (value == "true") value = "false";
            else if (value == "false") value = "true";
        }
        if (key->type == STRATA_CONFIG_STRING_LIST) {
            // llama.cpp's -ot a=X -ot b=Y: every occurrence of a list flag adds its items.
            if (auto it = list_at.find(key); it != list_at.end()) {
                out[it->second].assignment += "," + value;
                continue;
            }
            list_at[key] = out.size();
        }
        out.push_back({fmt::format("{}.{}={}", table, key->name, value), t.name});
    }
    return out;
}

std::vector<std::string> resolve_flags(const command_line &cl, const schema &s) {
    std::vector<std::string> out;
    for (flag_assignment &a : resolve_flag_assignments(cl, s)) out.push_back(std::move(a.assignment));
    return out;
}

void apply_command_line(document &doc, const command_line &cl, const schema &s) {
    for (const std::string &a : cl.set_assignments) doc.set_override(a, "--set");
    for (const flag_assignment &a : resolve_flag_assignments(cl, s)) doc.set_override(a.assignment, a.origin);
}

} // namespace strata::config
