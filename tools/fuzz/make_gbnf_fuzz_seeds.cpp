// Writes seed inputs for fuzz_gbnf into the folder it is given: GBNF grammars (mode byte '0'), JSON schemas ('1') and
// regular expressions ('2'), each with a NUL and a text to match after it.
#include "grammar/json_schema_grammar.hpp"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_gbnf_fuzz_seeds DIR\n");
        return 2;
    }
    const std::string nul(1, '\0');
    const std::vector<std::string> seeds = {
        "0" + strata::grammar::json_object_gbnf() + nul + "{\"a\": [1, 2.5, \"x\\n\"], \"b\": {\"c\": null}}",
        "0" + strata::grammar::json_value_gbnf() + nul + "[true, false, -0.5e3, \"\\u00e9\\ud83d\\ude00\"]",
        "0root ::= (expr \"=\" ws term \"\\n\")+\nexpr ::= term ([-+*/] term)*\n"
        "term ::= ident | num | \"(\" ws expr \")\" "
        "ws\nident ::= [a-z] [a-z0-9_]{0,5} ws\nnum ::= [0-9]+ ws\nws ::= [ \\t]*\n" + nul + "(a + 12) = x\n",
        "0root ::= [^\\n]+ \"\\n\" | \"\xC3\xA9\"{2,4} | [\\u4E00-\\u9FA5]* \"!\" | . \"\\x41\\U0001F600\"\n" + nul +
            "\xE4\xB8\xAD\xE6\x96\x87!",
        "1{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"age\":{\"type\":"
        "\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]}}},"
        "\"required\":[\"name\"],\"additionalProperties\":true}" + nul + "{\"name\": \"Ada\", \"age\": 36, \"x\": 1}",
        "1{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":[\"number\",\"null\"]},\"kids\":{"
        "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"},\"maxItems\":3}}}},\"anyOf\":[{\"$ref\":\"#/$defs/n\"},"
        "{\"const\":[1,2]}]}" + nul + "{\"v\": 1, \"kids\": [{\"v\": null}]}",
        "1{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\",\"format\":\"date\"},{\"type\":\"number\","
        "\"exclusiveMinimum\":0,\"maximum\":1}],\"items\":{\"type\":\"boolean\"},\"minItems\":2}" + nul +
            "[\"2024-01-31\", 0.5, true]",
        "1{\"type\":\"string\",\"pattern\":\"^(\\\\d{3}-)?[A-Z][a-z]+( \\\\w+)*$\"}" + nul + "\"555-Ada Lovelace\"",
        "2^[+-]?(\\d+\\.?\\d*|\\.\\d+)([eE][+-]?\\d{1,3})?$|[^\\s\\u4e00-\\u9fa5]{2,4}|(a|)+b" + nul + "-12.5e3",
    };
    int n = 0;
    for (const std::string &s : seeds)
        std::ofstream(std::string(argv[1]) + "/seed_" + std::to_string(n++), std::ios::binary) << s;
    return 0;
}
