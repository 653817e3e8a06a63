// JSON Schema -> GBNF on a corpus of realistic schemas (OpenAI structured-output examples, function arguments,
// pydantic and zod output, nested objects, arrays of objects, enums, anyOf, $defs/definitions references, recursion):
// for each, hand-written valid instances must match (compact and pretty-printed) and invalid ones must not. Valid
// instances list properties in the order the grammar generates them: required ones in `properties` order, then the
// optional ones. Then every refusal, with its wording and location.
#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/json_schema_grammar.hpp"
#include "grammar/matcher.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using nlohmann::ordered_json;
using strata::grammar::json_object_gbnf;
using strata::grammar::json_schema_to_gbnf;
using strata::grammar::json_value_gbnf;
using strata::grammar::matcher;
using strata::grammar::parse_gbnf;

bool matches(const matcher &start, const std::string &text) {
    matcher m = start;
    if (!m.accepts(text)) return false;
    m.advance(text);
    return m.can_end();
}

struct schema_case {
    const char *name;
    const char *schema;
    std::vector<std::string> valid;
    std::vector<std::string> invalid;
};

const std::vector<schema_case> &corpus() {
    static const std::vector<schema_case> c = {
        {"openai_math_reasoning",
         R"({"type":"object","properties":{"steps":{"type":"array","items":{"type":"object","properties":{
             "explanation":{"type":"string"},"output":{"type":"string"}},"required":["explanation","output"],
             "additionalProperties":false}},"final_answer":{"type":"string"}},"required":["steps","final_answer"],
             "additionalProperties":false})",
         {R"({"steps":[],"final_answer":"x = 3"})",
          R"({"steps":[{"explanation":"Subtract 7","output":"8x = -30"},{"explanation":"Divide",)"
          R"("output":"x = -3.75"}],"final_answer":"x = -3.75"})"},
         {R"({"steps":[]})", R"({"steps":[{"explanation":"a"}],"final_answer":"b"})",
          R"({"steps":[],"final_answer":"x","extra":1})", R"({"steps":{},"final_answer":"x"})",
          R"({"steps":[],"final_answer":3})"}},
        {"openai_ui_recursive",
         R"({"type":"object","properties":{"type":{"type":"string","enum":["div","button","header","section",)"
         R"("field","form"]},
             "label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}},
             "attributes":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},
             "value":{"type":"string"}},"required":["name","value"],"additionalProperties":false}}},
             "required":["type","label","children","attributes"],"additionalProperties":false})",
         {R"({"type":"form","label":"Sign up","children":[{"type":"field","label":"Name","children":[],)"
          R"("attributes":[{"name":"placeholder","value":"Ada"}]},{"type":"button","label":"Go","children":[],)"
          R"("attributes":[]}],"attributes":[]})"},
         {R"({"type":"span","label":"x","children":[],"attributes":[]})",
          R"({"type":"div","label":"x","children":[{"type":"div"}],"attributes":[]})"}},
        {"openai_research_paper",
         R"({"type":"object","properties":{"title":{"type":"string"},"authors":{"type":"array",)"
         R"("items":{"type":"string"}},
             "abstract":{"type":"string"},"keywords":{"type":"array","items":{"type":"string"}}},
             "required":["title","authors","abstract","keywords"],"additionalProperties":false})",
         {R"({"title":"Attention Is All You Need","authors":["Vaswani","Shazeer"],)"
          R"("abstract":"The dominant \"sequence\" models…\nare RNNs.","keywords":["transformer","attention"]})"},
         {R"({"title":"T","authors":"Vaswani","abstract":"A","keywords":[]})",
          R"({"title":"T","authors":[],"abstract":"bad escape \q","keywords":[]})",
          R"({"title":"T","authors":[],"abstract":"raw
newline","keywords":[]})"}},
        {"openai_moderation_nullable_enum",
         R"({"type":"object","properties":{"is_violating":{"type":"boolean"},
             "category":{"type":["string","null"],"enum":["violence","sexual","self_harm",null]},
             "explanation_if_violating":{"type":["string","null"]}},
             "required":["is_violating","category","explanation_if_violating"],"additionalProperties":false})",
         {R"({"is_violating":false,"category":null,"explanation_if_violating":null})",
          R"({"is_violating":true,"category":"violence","explanation_if_violating":"threatens harm"})"},
         {R"({"is_violating":"no","category":null,"explanation_if_violating":null})",
          R"({"is_violating":true,"category":"spam","explanation_if_violating":null})",
          R"({"is_violating":true,"category":null,"explanation_if_violating":7})"}},
        {"openai_function_get_weather",
         R"({"type":"object","properties":{"location":{"type":"string",)"
         R"("description":"City and country e.g. Bogotá, Colombia"},
             "unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location","unit"],
             "additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"})",
         {R"({"location":"Bogotá, Colombia","unit":"celsius"})", R"({"location":"東京","unit":"fahrenheit"})"},
         {R"({"location":"Paris","unit":"kelvin"})", R"({"unit":"celsius","location":"Paris"})",
          R"({"location":"Paris"})"}},
        {"calendar_event_formats",
         R"({"type":"object","properties":{"name":{"type":"string"},"date":{"type":"string","format":"date"},
             "starts":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},
             "participants":{"type":"array","items":{"type":"string"}}},"required":["name","date","participants"]})",
         {R"({"name":"Science fair","date":"2024-05-17","participants":["Alice","Bob"]})",
          R"({"name":"x","date":"1999-12-31","participants":[],"starts":"2024-05-17T09:30:00Z",)"
          R"("id":"123e4567-e89b-12d3-a456-426614174000"})",
          R"({"name":"x","date":"2000-01-01","participants":[],"starts":"2024-05-17T09:30:00.123+02:00"})"},
         {R"({"name":"x","date":"2024-13-01","participants":[]})", R"({"name":"x","date":"24-01-01",)"
          R"("participants":[]})",
          R"({"name":"x","date":"2024-01-01","participants":[],"starts":"2024-05-17 09:30:00Z"})",
          R"({"name":"x","date":"2024-01-01","participants":[],"id":"123e4567e89b12d3a456426614174000"})"}},
        {"person_optional_and_ranges",
         R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":10},
             "age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","format":"email"},
             "height_m":{"type":"number","minimum":0,"maximum":3}},"required":["name"]})",
         {R"({"name":"Ada"})", R"({"name":"Ada","age":36})", R"({"name":"Ada","email":"ada@example.com"})",
          R"({"name":"Ada","age":0,"email":"a@b","height_m":1.65})", R"({"name":"Ada","height_m":3})",
          R"({"name":"Ada","height_m":3.0})", R"({"name":"\u00e9\n","age":150})"},
         {R"({"name":""})", R"({"name":"Ada Lovelace!"})", R"({"name":"Ada","age":151})", R"({"name":"Ada","age":-1})",
          R"({"name":"Ada","age":36.5})", R"({"name":"Ada","height_m":3.5})", R"({"name":"Ada","height_m":-0.5})",
          R"({"name":"Ada","age":007})", R"({"name":"Ada","email":"a@b","age":3})"}},
        {"nested_address_defs",
         R"({"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string","minLength":5,"maxLength":5}},"required":["street","city"]}},
             "type":"object","properties":{"home":{"$ref":"#/$defs/address"},"work":{"$ref":"#/$defs/address"}},
             "required":["home"]})",
         {R"({"home":{"street":"1 Main St","city":"Springfield"}})",
          R"({"home":{"street":"a","city":"b","zip":"12345"},"work":{"street":"c","city":"d"}})"},
         {R"({"home":{"street":"a"}})", R"({"home":{"street":"a","city":"b","zip":"1234"}})",
          R"({"work":{"street":"c","city":"d"}})"}},
        {"pydantic_definitions_allof_ref",
         R"({"title":"Order","type":"object","definitions":{"Color":{"title":"Color","description":"An enumeration.",
             "enum":["red","green","blue"],"type":"string"},"Item":{"title":"Item","type":"object","properties":{
             "sku":{"title":"Sku","type":"string"},"qty":{"title":"Qty","type":"integer","exclusiveMinimum":0}},
             "required":["sku","qty"]}},"properties":{
             "color":{"description":"Paint","allOf":[{"$ref":"#/definitions/Color"}]},
             "items":{"title":"Items","type":"array","items":{"$ref":"#/definitions/Item"},"minItems":1}},
             "required":["color","items"]})",
         {R"({"color":"red","items":[{"sku":"A-1","qty":1}]})",
          R"({"color":"blue","items":[{"sku":"A","qty":2},{"sku":"B","qty":10}]})"},
         {R"({"color":"pink","items":[{"sku":"A","qty":1}]})", R"({"color":"red","items":[]})",
          R"({"color":"red","items":[{"sku":"A","qty":0}]})"}},
        {"discriminated_anyof",
         R"({"type":"object","properties":{"shape":{"anyOf":[
             {"type":"object","properties":{"kind":{"const":"circle"},"radius":{"type":"number"}},
              "required":["kind","radius"],"additionalProperties":false},
             {"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},
              "required":["kind","side"],"additionalProperties":false}]}},
             "required":["shape"]})",
         {R"({"shape":{"kind":"circle","radius":1.5}})", R"({"shape":{"kind":"square","side":2e3}})"},
         {R"({"shape":{"kind":"circle","side":2}})", R"({"shape":{"kind":"triangle","side":2}})"}},
        {"array_of_objects_bounded",
         R"({"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
             "required":["name","age"]},"minItems":2,"maxItems":3})",
         {R"([{"name":"a","age":1},{"name":"b","age":2}])", R"([{"name":"a","age":1},{"name":"b","age":2},)"
          R"({"name":"c","age":-3}])"},
         {R"([{"name":"a","age":1}])", R"([{"name":"a","age":1},{"name":"b","age":2},{"name":"c","age":3},)"
          R"({"name":"d","age":4}])",
          R"([])"}},
        {"tuple_prefix_items",
         R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"type":"boolean"}],"items":false})",
         {R"(["a",1,true])"},
         {R"(["a",1])", R"(["a",1,true,null])", R"([1,"a",true])"}},
        {"tuple_prefix_items_with_rest",
         R"({"type":"array","prefixItems":[{"const":"cmd"}],"items":{"type":"number"},"maxItems":3})",
         {R"(["cmd"])", R"(["cmd",1])", R"(["cmd",1,2.5])"},
         {R"(["cmd",1,2,3])", R"(["cmd","x"])", R"([])"}},
        {"enum_mixed_values",
         R"({"enum":[1,"two",null,true,{"a":[1,2]},[3]]})",
         {"1", R"("two")", "null", "true", R"({"a":[1,2]})", "[3]"},
         {"2", R"("three")", "false", R"({"a":[1]})"}},
        {"const_root", R"({"const":{"status":"ok","code":200}})", {R"({"status":"ok","code":200})"},
         {R"({"status":"ok","code":201})", R"({"status":"ok"})"}},
        {"string_lengths",
         R"({"type":"object","properties":{"code":{"type":"string","minLength":3,"maxLength":3},
             "note":{"type":"string","maxLength":0}},"required":["code","note"]})",
         {R"({"code":"abc","note":""})", R"({"code":"\"\\x","note":""})", R"({"code":"é中😀","note":""})"},
         {R"({"code":"ab","note":""})", R"({"code":"abcd","note":""})", R"({"code":"abc","note":"x"})"}},
        {"number_bounds",
         R"({"type":"object","properties":{"celsius":{"type":"number","minimum":-50,"maximum":60},
             "p":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
             "score":{"type":"integer","minimum":-5,"exclusiveMaximum":10}},"required":["celsius","p","score"]})",
         {R"({"celsius":-50,"p":0.5,"score":-5})", R"({"celsius":59.99,"p":0.0001,"score":9})",
          R"({"celsius":60.000,"p":0.999,"score":0})", R"({"celsius":-0.5,"p":0.1,"score":5})"},
         {R"({"celsius":-50.5,"p":0.5,"score":0})", R"({"celsius":60.1,"p":0.5,"score":0})",
          R"({"celsius":0,"p":0,"score":0})", R"({"celsius":0,"p":1,"score":0})", R"({"celsius":0,"p":0.5,"score":10})",
          R"({"celsius":0,"p":0.5,"score":-6})", R"({"celsius":1e2,"p":0.5,"score":0})"}},
        {"dictionary_additional_schema",
         R"({"type":"object","additionalProperties":{"type":"integer"}})",
         {"{}", R"({"apples":3,"pears":-1})", R"({"":0})"},
         {R"({"apples":"three"})", R"({"apples":1.5})"}},
        {"additional_true_no_duplicates",
         R"({"type":"object","properties":{"id":{"type":"integer"},"idx":{"type":"string"}},"required":["id"],
             "additionalProperties":true})",
         {R"({"id":1})", R"({"id":1,"idx":"a"})", R"({"id":1,"i":true})", R"({"id":1,"idxy":[1,{"b":null}]})",
          R"({"id":1,"idx":"a","extra":"b","more":{}})", R"({"id":1,"":1})"},
         {R"({"id":1,"id":2})", R"({"id":1,"idx":"a","idx":"b"})", R"({"idx":"a"})"}},
        {"type_list_and_nullable",
         R"({"type":"object","properties":{"v":{"type":["integer","string"]},"n":{"type":"string","nullable":true}},
             "required":["v","n"]})",
         {R"({"v":3,"n":null})", R"({"v":"three","n":"x"})"},
         {R"({"v":3.5,"n":null})", R"({"v":true,"n":null})", R"({"v":1,"n":2})"}},
        {"recursive_tree_defs",
         R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
             "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"]}}})",
         {R"({"value":1})", R"({"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4,)"
          R"("children":[]}]})"},
         {R"({"value":1,"children":[{"children":[]}]})", R"({"children":[]})"}},
        {"empty_schema_any_value", "{}", {"1", "\"s\"", "[1,{\"a\":null}]", "{\"k\":[true,false]}", "-0.5e10"},
         {"", "[1,]", "{'a':1}", "nul"}},
        {"boolean_root", R"({"type":"boolean"})", {"true", "false"}, {"1", "\"true\"", "True"}},
        {"allof_inheritance",
         R"({"$defs":{"Base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},
             "allOf":[{"$ref":"#/$defs/Base"},
                      {"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}]})",
         {R"({"id":1,"name":"x"})"},
         {R"({"id":1})", R"({"name":"x"})", R"({"id":"1","name":"x"})"}},
        {"all_optional_properties",
         R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})",
         {"{}", R"({"a":1})", R"({"b":2})", R"({"c":3})", R"({"a":1,"c":3})", R"({"a":1,"b":2,)"
          R"("c":3})", R"({"b":2,"c":3})"},
         {R"({"d":1})", R"({"a":1,"a":1})", R"({"a":"x"})", R"({,"a":1})"}},
        {"draft4_exclusive_booleans",
         R"({"type":"integer","minimum":1,"exclusiveMinimum":true,"maximum":5,"exclusiveMaximum":true})",
         {"2", "3", "4"}, {"1", "5", "0", "-3"}},
        {"prefix_items_as_one_schema_like_llama_cpp", R"({"type":"array","prefixItems":{"type":"string"}})",
         {"[]", R"(["a","b"])"}, {"[1]", R"(["a",null])"}},
        {"empty_array_only", R"({"type":"array","maxItems":0})", {"[]", "[ ]"}, {"[1]", "[null]"}},
        {"draft7_tuple_additional_items",
         R"({"type":"array","items":[{"type":"integer"},{"type":"string"}],"additionalItems":{"type":"boolean"}})",
         {R"([1,"a"])", R"([1,"a",true,false])"}, {R"([1,"a",1])", R"([1])"}},
        {"string_patterns",
         R"({"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$"},
             "phone":{"type":"string","pattern":"^\\+?[0-9 ]{7,15}$"},"slug":{"type":"string","pattern":"[a-z]"},
             "quoted":{"type":"string","pattern":"^\"[^\"]*\"$"}},"required":["sku","phone","slug"]})",
         {R"({"sku":"ABC-1234","phone":"+1 555 0100","slug":"-a-"})", R"({"sku":"XYZ-0000","phone":"1234567",)"
          R"("slug":"QxQ"})",
          R"({"sku":"XYZ-0000","phone":"1234567","slug":"x","quoted":"\"hi there\""})"},
         {R"({"sku":"AB-1234","phone":"1234567","slug":"a"})", R"({"sku":"ABC-12345","phone":"1234567","slug":"a"})",
          R"({"sku":"ABC-1234","phone":"555","slug":"a"})", R"({"sku":"ABC-1234","phone":"1234567","slug":"ABC"})",
          R"({"sku":"ABC-1234","phone":"1234567","slug":"a","quoted":"\"a\"b\""})"}},
        {"unicode_property_names",
         R"({"type":"object","properties":{"名前":{"type":"string"},"quote\"d":{"type":"integer"},)"
         R"("a/b~c":{"type":"null"}},
             "required":["名前","quote\"d","a/b~c"]})",
         {R"({"名前":"テスト","quote\"d":1,"a/b~c":null})"}, {R"({"名前":"テスト","quote\"d":1})"}},
    };
    return c;
}

TEST(grammar_json_schema, CorpusAcceptsValidAndRefusesInvalidInstances) {
    ASSERT_GE(corpus().size(), 20u);
    for (const schema_case &c : corpus()) {
        SCOPED_TRACE(c.name);
        const ordered_json schema = ordered_json::parse(c.schema);
        std::string gbnf;
        ASSERT_NO_THROW(gbnf = json_schema_to_gbnf(schema));
        const matcher m(parse_gbnf(gbnf));
        for (const std::string &v : c.valid) {
            ASSERT_TRUE(ordered_json::accept(v)) << "test data is not JSON: " << v;
            EXPECT_TRUE(matches(m, v)) << "valid instance refused: " << v << "\ngrammar:\n" << gbnf;
            const ordered_json parsed = ordered_json::parse(v);
            // Re-serialised compactly and pretty-printed (whitespace between tokens is allowed, bounded).
            if (!v.empty() && v.find("\\u") == std::string::npos) {
                EXPECT_TRUE(matches(m, parsed.dump())) << parsed.dump();
                EXPECT_TRUE(matches(m, parsed.dump(2))) << parsed.dump(2);
            }
        }
        for (const std::string &v : c.invalid)
            EXPECT_FALSE(matches(m, v)) << "invalid instance accepted: " << v << "\ngrammar:\n" << gbnf;
    }
}

TEST(grammar_json_schema, GrammarShapeFollowsLlamaCppConventions) {
    const std::string g = json_schema_to_gbnf(ordered_json::parse(
        R"({"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},
            "required":["name"]})"));
    EXPECT_EQ(g.rfind("root ::= ", 0), 0u) << g;
    EXPECT_NE(g.find("name-kv ::= \"\\\"name\\\"\" space \":\" space string space\n"), std::string::npos) << g;
    EXPECT_NE(g.find("space ::= \"\" | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"), std::string::npos) << g;
    EXPECT_NE(g.find("tags ::= \"[\" space ( string space"), std::string::npos) << g;
    EXPECT_EQ(g.find("tags-item"), std::string::npos) << g; // a primitive item needs no rule of its own
}

TEST(grammar_json_schema, WhitespaceIsBoundedBetweenTokens) {
    const matcher m(parse_gbnf(json_object_gbnf()));
    EXPECT_TRUE(matches(m, "{\n  \"a\" : [ 1 , 2 ] ,\n\n\t\"b\":{}\n}"));
    EXPECT_TRUE(matches(m, "{\n" + std::string(20, ' ') + "\"a\": 1}"));
    EXPECT_FALSE(matches(m, "{\n" + std::string(21, ' ') + "\"a\": 1}"));
    EXPECT_FALSE(matches(m, "{\n\n\n\"a\": 1}"));
    EXPECT_FALSE(matches(m, "{  \"a\": 1}"));  // two spaces: one " " or a newline run
    EXPECT_FALSE(matches(m, " {\"a\": 1}"));   // nothing before the value
    EXPECT_FALSE(matches(m, "{\"a\": 1} "));   // nor after it: the end is reached at "}"
    matcher done = m;
    done.advance("{\"a\": 1}");
    EXPECT_TRUE(done.done());
}

TEST(grammar_json_schema, BuiltInObjectAndValueGrammars) {
    const matcher object(parse_gbnf(json_object_gbnf()));
    const matcher value(parse_gbnf(json_value_gbnf()));
    for (const std::string v : {"{}", "{\"a\":{\"b\":[1,2.5,-3e+2,true,false,null,\"\\u00e9\\n\"]}}"}) {
        EXPECT_TRUE(matches(object, v)) << v;
        EXPECT_TRUE(matches(value, v)) << v;
    }
    for (const std::string v : {"[]", "1", "\"x\"", "null"}) {
        EXPECT_FALSE(matches(object, v)) << v;
        EXPECT_TRUE(matches(value, v)) << v;
    }
    for (const std::string v : {"{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":\"\\ud800\"}", "{\"a\":+1}",
                                "{\"a\":'x'}", "{a:1}", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":\"\x01\"}"})
        EXPECT_FALSE(matches(value, v)) << v;
    EXPECT_TRUE(matches(value, "\"\\ud83d\\ude00\"")); // a surrogate pair escape
}

std::string conversion_error(const std::string &schema) {
    try {
        json_schema_to_gbnf(ordered_json::parse(schema));
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

#define EXPECT_SCHEMA_ERROR(schema, ...)                                                                              \
    do {                                                                                                              \
        const std::string err_ = conversion_error(schema);                                                            \
        ASSERT_FALSE(err_.empty()) << "converted: " << (schema);                                                      \
        for (const char *part_ : {__VA_ARGS__}) EXPECT_NE(err_.find(part_), std::string::npos) << err_;               \
    } while (0)

TEST(grammar_json_schema_errors, UnsupportedKeywordsNameTheirPath) {
    EXPECT_SCHEMA_ERROR(R"({"type":"object","properties":{"price":{"type":"number","multipleOf":0.01}}})",
                        "JSON schema, at #/properties/price/multipleOf: keyword 'multipleOf' is not supported",
                        "divisibility");
    EXPECT_SCHEMA_ERROR(R"({"type":"string","pattern":"^(a)\\1$"})", "at #/pattern: regular expression",
                        "backreferences are not supported");
    EXPECT_SCHEMA_ERROR(R"({"type":"string","pattern":"^a+$","maxLength":3})",
                        "pattern together with minLength/maxLength is not supported");
    EXPECT_SCHEMA_ERROR(R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})",
                        "at #/uniqueItems: uniqueItems: true is not supported");
    EXPECT_SCHEMA_ERROR(R"({"if":{"type":"string"},"then":{"minLength":1}})", "keyword 'if' is not supported");
    EXPECT_SCHEMA_ERROR(R"({"not":{"type":"null"}})", "at #/not");
    EXPECT_SCHEMA_ERROR(R"({"type":"array","contains":{"const":1}})", "at #/contains");
    EXPECT_SCHEMA_ERROR(R"({"type":"object","patternProperties":{"^x":{}}})", "at #/patternProperties");
    EXPECT_SCHEMA_ERROR(R"({"$defs":{"a":{"type":"object","propertyNames":{"maxLength":3}}},"$ref":"#/$defs/a"})",
                        "at #/$defs/a/propertyNames");
    EXPECT_SCHEMA_ERROR(R"({"items":[{"type":"string","dependentRequired":{}}]})", "at #/items/0/dependentRequired");
}

TEST(grammar_json_schema_errors, ReferencesAndStructure) {
    EXPECT_SCHEMA_ERROR(R"({"$ref":"https://example.com/schema.json"})", "only references inside this schema");
    EXPECT_SCHEMA_ERROR(R"({"$ref":"#/$defs/missing"})", "at #/$ref: $ref \"#/$defs/missing\" points to nothing");
    EXPECT_SCHEMA_ERROR(R"({"$ref":"#anchor"})", "anchors are not");
    EXPECT_SCHEMA_ERROR(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
                        "converts to a grammar the matcher cannot use", "left recursion");
    EXPECT_SCHEMA_ERROR(R"({"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}],"type":"object"}},"$ref":"#/$defs/a"})",
                        "a $ref or allOf that refers to itself");
    EXPECT_SCHEMA_ERROR(R"({"type":"strin"})", "at #/type: unknown type \"strin\"");
    EXPECT_SCHEMA_ERROR(R"({"type":"object","properties":{"a":3}})", "at #/properties/a: a schema must be an object or "
                                                                    "a boolean, got a number");
    EXPECT_SCHEMA_ERROR(R"({"type":"object","properties":{"a":false},"required":["a"]})", "#/properties/a",
                        "required property with schema false");
    EXPECT_SCHEMA_ERROR(R"({"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false})",
                        "required property 'b' is not in properties");
    EXPECT_SCHEMA_ERROR("[1]", "at #: a schema must be an object or a boolean, got an array");
    EXPECT_SCHEMA_ERROR("false", "schema false allows no value");
    std::string deep = "{}";
    for (int i = 0; i < 200; ++i) deep = R"({"type":"array","items":)" + deep + "}";
    EXPECT_SCHEMA_ERROR(deep, "nested deeper than 128 levels");
}

TEST(grammar_json_schema_errors, ImpossibleOrUncountableBounds) {
    EXPECT_SCHEMA_ERROR(R"({"type":"string","minLength":5,"maxLength":2})", "minLength 5 is above maxLength 2");
    EXPECT_SCHEMA_ERROR(R"({"type":"string",)"
    R"("maxLength":100000})", "at #/maxLength: maxLength 100000 is above the 10000");
    EXPECT_SCHEMA_ERROR(R"({"type":"string","minLength":-1})", "minLength must be a non-negative whole number");
    EXPECT_SCHEMA_ERROR(R"({"type":"array","minItems":3,"maxItems":1})", "minItems 3 is above maxItems 1");
    EXPECT_SCHEMA_ERROR(R"({"type":"integer","minimum":5,"maximum":4})", "no integer lies within minimum/maximum");
    EXPECT_SCHEMA_ERROR(R"({"type":"number","minimum":0.5})", "a number bound of 0.5 is not supported");
    EXPECT_SCHEMA_ERROR(R"({"type":"object","properties":{"a":{}},"minProperties":1})", "at #/minProperties");
    EXPECT_SCHEMA_ERROR(R"({"type":"object","additionalProperties":true,"maxProperties":3})", "at #/maxProperties");
    EXPECT_SCHEMA_ERROR(R"({"type":"array","prefixItems":[{},{}],"maxItems":1})", "maxItems 1 is below the 2 "
                                                                                 "prefixItems");
    EXPECT_SCHEMA_ERROR(R"({"type":"string","enum":[1,2]})", "no value of enum has the type \"string\"");
    EXPECT_SCHEMA_ERROR(R"({"allOf":[{"type":"string"},{"type":"integer"}]})", "no value has both");
    EXPECT_SCHEMA_ERROR(R"({"type":"string","format":"date","maxLength":20})", "format \"date\" together with");
}

TEST(grammar_json_schema, AcceptedKeywordsThatAreSatisfiedOrAnnotations) {
    // Satisfied by construction or annotations only: converted, not refused.
    for (const char *s : {R"({"type":"object","properties":{"a":{}},"required":["a"],"minProperties":1,)"
    R"("maxProperties":1})",
                          R"({"type":"array","uniqueItems":false})",
                          R"({"type":"object","properties":{"a":{}},"unevaluatedProperties":false})",
                          R"({"type":"string","format":"email","title":"T","description":"D","examples":["x"],)"
                          R"("x-vendor":1})",
                          R"({"type":"string","contentMediaType":"text/html","deprecated":true,"readOnly":true})",
                          R"({"oneOf":[{"type":"integer"},{"type":"null"}],"default":null})"})
        EXPECT_EQ(conversion_error(s), "") << s;
}

TEST(grammar_json_schema, OutputIsDeterministic) {
    const std::string s = corpus()[1].schema;
    EXPECT_EQ(json_schema_to_gbnf(ordered_json::parse(s)), json_schema_to_gbnf(ordered_json::parse(s)));
}

} // namespace
