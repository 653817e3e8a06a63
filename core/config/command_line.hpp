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
};

struct command_line {
    std::string subcommand; // "" (run), "plugins", "topology", "plan", "help"
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

// Built-in options: --config F / -c F / --config=F, --set t.k=v (repeatable), --help / -h, --json, --version.
// The subcommand is the first plain word when it is one of plugins|topology|plan|help; any other plain word that
// is not the value of a flag is an error. Throws strata::error with a hint.
command_line parse_command_line(int argc, const char *const *argv);

// Maps the flags to "table.key=value" assignments using the schema's flags. A BOOL key's flag may be given bare
// (true), as --no-flag (false), or followed by true/false; any other flag takes the next argv element as its value,
// even one starting with '-'. Unknown flags: "unknown option --temprature; did you mean --temperature?".
std::vector<std::string> resolve_flags(const command_line &cl, const schema &s);

// The same assignments with the flag each came from, for messages ("--threads: ...").
struct flag_assignment {
    std::string assignment;
    std::string origin;
};
std::vector<flag_assignment> resolve_flag_assignments(const command_line &cl, const schema &s);

// Applies --set assignments, then flags (a flag is the more specific spelling, so it wins over --set).
void apply_command_line(document &doc, const command_line &cl, const schema &s);

} // namespace strata::config
