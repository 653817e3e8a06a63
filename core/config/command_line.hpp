// Command-line parsing in two steps. parse_command_line runs before plugins load, so it cannot know which flags are
// switches; it records each unknown --flag with the word after it. resolve_flags, given the full schema, decides
// whether that word was the flag's value.
#pragma once

#include "config/document.hpp"
#include "config/schema.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::config {

// One --flag as written, before the schema decides what it means.
struct flag_token {
    std::string name;                       // as written, with dashes: "--threads", "--no-stream"
    std::optional<std::string> inline_value; // from --flag=value
    std::optional<std::string> next_word;    // the following argv element when it could be this flag's value
    std::vector<std::string> more_words;     // plain words after that: a list flag's further items (vLLM's nargs)
};

struct command_line {
    std::string subcommand; // "" (run), "serve", "plugins", "topology", "plan", "help"
    // `runtime serve MODEL`: the positional model (a GGUF file), as written.
    std::optional<std::string> model_argument;
    std::optional<std::string> config_path;
    std::vector<std::string> set_assignments; // from --set, in order
    // Other flags, provisionally paired with a value: --flag value / --flag=value / bare --flag ("true") /
    // --no-flag ("false"). Final meaning comes from resolve_flags; this is for display and simple checks.
    std::vector<std::pair<std::string, std::string>> flags;
    std::vector<flag_token> flag_tokens; // the same flags as raw tokens, in order, for resolve_flags
    bool help = false;
    bool json = false;
    bool version = false;
};

// Built-in options: --config F / --config=F (TOML, or vLLM-style YAML by extension), --set t.k=v (repeatable),
// --help / -h, --json, --version. (-c is llama.cpp's --ctx-size, a schema alias.) The subcommand is the first plain
// word when it is one of serve|plugins|topology|plan|help; `serve` takes the model as the next plain word (vLLM's
// `vllm serve MODEL`). Other flags are --long or llama.cpp-style -short (-ngl 20, -t 8, -c 4096); -O3 is -O 3. Any
// other plain word that is not the value of a flag is an error. Throws strata::error with a hint.
command_line parse_command_line(int argc, const char *const *argv);

// Maps the flags to "table.key=value" assignments using the schema's flags and their aliases. A BOOL key's flag may
// be given bare (true), as --no-flag (false), or followed by true/false; an inverted alias (--disable-log-requests)
// flips the value; any other flag takes the next argv element as its value, even a negative number; a list flag
// takes the plain words after it too, and a repeated list flag adds its items (-ot a=X -ot b=Y). Unknown flags:
// "unknown option --temprature; did you mean --temperature?".
std::vector<std::string> resolve_flags(const command_line &cl, const schema &s);

// The same assignments with the flag each came from, as written, for messages ("-ngl: ...").
struct flag_assignment {
    std::string assignment;
    std::string origin;
};
std::vector<flag_assignment> resolve_flag_assignments(const command_line &cl, const schema &s);

// Applies --set assignments, then flags (a flag is the more specific spelling, so it wins over --set).
void apply_command_line(document &doc, const command_line &cl, const schema &s);

} // namespace strata::config
