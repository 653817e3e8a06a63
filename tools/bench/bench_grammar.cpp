// bench-grammar: one token_filter::allowed() call (the mask of tokens a grammar allows next) over the Llama 3
// vocabulary (128256 tokens, read from llama.cpp's vocab GGUF in ../shared/models/vocab), in typical JSON states and
// in the worst case where almost every token is allowed. Google Benchmark; each state is set up once, outside the
// timing. Results with the exact command in the grammar report.
//
//   bench-grammar [--benchmark_repetitions=3 --benchmark_report_aggregates_only=true]
#include "grammar/gbnf_parser.hpp"
#include "grammar/json_schema_grammar.hpp"
#include "grammar/matcher.hpp"
#include "grammar/token_filter.hpp"
#include "vocab_pieces.hpp"

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace {

using namespace strata::grammar;

const std::vector<std::string> &pieces() {
    static const std::vector<std::string> p =
        testing::load_byte_level_pieces(std::string(STRATA_SHARED_DIR) + "/models/vocab/ggml-vocab-llama-bpe.gguf")
            .pieces;
    return p;
}

const token_filter &filter() {
    static const token_filter f(pieces());
    return f;
}

const std::string &schema_gbnf() {
    static const std::string g = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "format": "email"},
            "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                        "required": ["street", "city"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8}
        },
        "required": ["name", "age", "address"]
    })"));
    return g;
}

void run(benchmark::State &state, const std::string &gbnf, const std::string &prefix) {
    matcher m(parse_gbnf(gbnf));
    m.advance(prefix);
    std::vector<uint8_t> mask;
    filter().allowed(m, mask); // warm the vocabulary and the trie
    size_t allowed = 0;
    for (auto _ : state) {
        filter().allowed(m, mask);
        benchmark::DoNotOptimize(mask.data());
    }
    for (const uint8_t x : mask) allowed += x;
    state.counters["allowed_tokens"] = static_cast<double>(allowed);
    state.SetItemsProcessed(state.iterations());
}

void BM_JsonObject_Start(benchmark::State &s) { run(s, json_object_gbnf(), ""); }
void BM_JsonObject_AfterBrace(benchmark::State &s) { run(s, json_object_gbnf(), "{"); }
void BM_JsonObject_InKey(benchmark::State &s) { run(s, json_object_gbnf(), "{\"na"); }
void BM_JsonObject_InStringValue(benchmark::State &s) { run(s, json_object_gbnf(), "{\"name\": \"Jo"); }
void BM_JsonObject_AfterNumber(benchmark::State &s) { run(s, json_object_gbnf(), "{\"a\": [1, 22"); }
void BM_JsonObject_AfterValue(benchmark::State &s) { run(s, json_object_gbnf(), "{\"a\": {\"b\": true}"); }
void BM_Schema_PropertyValue(benchmark::State &s) { run(s, schema_gbnf(), "{\"name\": "); }
void BM_Schema_InString(benchmark::State &s) { run(s, schema_gbnf(), "{\"name\": \"Ada Lo"); }
void BM_Schema_Integer(benchmark::State &s) { run(s, schema_gbnf(), "{\"name\": \"Ada\", \"age\": 3"); }
void BM_Schema_NextKey(benchmark::State &s) { run(s, schema_gbnf(), "{\"name\": \"Ada\", \"age\": 36, "); }
// Worst case: every well-formed piece is allowed, so the whole trie is walked.
void BM_AnyText(benchmark::State &s) { run(s, "root ::= .*", ""); }
void BM_CjkOnly(benchmark::State &s) { run(s, "root ::= [\\u4E00-\\u9FA5]+", ""); }

BENCHMARK(BM_JsonObject_Start)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonObject_AfterBrace)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonObject_InKey)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonObject_InStringValue)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonObject_AfterNumber)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonObject_AfterValue)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Schema_PropertyValue)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Schema_InString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Schema_Integer)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Schema_NextKey)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AnyText)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CjkOnly)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
