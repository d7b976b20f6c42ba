// JSON Schema -> GBNF: the grammar accepts JSON the schema admits (in the order it generates)
// and refuses what the schema forbids.
#include "hearth/text/json_schema.h"

#include <gtest/gtest.h>

#include "hearth/base/error.h"
#include "hearth/text/grammar.h"

namespace hearth::text {
namespace {

using json = nlohmann::ordered_json;

bool accepts(const std::string& grammar, const std::string& text) {
  GrammarMatcher m(std::make_shared<const Grammar>(parse_grammar(grammar)));
  return m.accept(text) && m.complete();
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  const json schema = json::parse(R"({
    "type": "object", "title": "person",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 8},
      "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
      "ok": {"type": "boolean"}
    },
    "required": ["name", "age"], "additionalProperties": false})");
  const std::string g = json_schema_to_grammar(schema);
  EXPECT_TRUE(accepts(g, R"({"name": "ann", "age": 31})"));
  EXPECT_TRUE(
      accepts(g, "{\n  \"name\":\"b\",\n  \"age\": -2, \"tags\": [\"x\", \"y\"], \"ok\": true}"));
  EXPECT_TRUE(accepts(g, R"({"name": "c", "age": 0, "ok": false})"));
  EXPECT_FALSE(accepts(g, R"({"age": 31})"));                      // name is required
  EXPECT_FALSE(accepts(g, R"({"name": "", "age": 1})"));           // minLength
  EXPECT_FALSE(accepts(g, R"({"name": "abcdefghi", "age": 1})"));  // maxLength
  EXPECT_FALSE(accepts(g, R"({"name": "a", "age": 1.5})"));        // integer
  EXPECT_FALSE(accepts(g, R"({"name": "a", "age": 1, "tags": ["1", "2", "3"]})"));
  EXPECT_FALSE(accepts(g, R"({"name": "a", "age": 1, "extra": 2})"));  // no other keys
}

TEST(JsonSchema, OnlyOptionalPropertiesMayAllBeLeftOut) {
  const std::string g = json_schema_to_grammar(json::parse(
      R"({"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "number"}}})"));
  for (const char* ok : {"{}", R"({"a": null})", R"({"b": 2.5e3})", R"({"a": null, "b": -1})"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  EXPECT_FALSE(accepts(g, R"({"b": 1, "a": null})"));  // the generated order is fixed
  EXPECT_FALSE(accepts(g, R"({, "b": 1})"));
}

TEST(JsonSchema, EnumConstAnyOfArraysAndRefs) {
  const json schema = json::parse(R"({
    "$defs": {"node": {"type": "object",
                       "properties": {"v": {"enum": ["x", 2, null]},
                                      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                       "required": ["v"]}},
    "type": "object",
    "properties": {"kind": {"const": "tree"},
                   "root": {"$ref": "#/$defs/node"},
                   "size": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                   "pair": {"type": "array", "items": {"type": ["integer", "null"]},
                            "minItems": 2, "maxItems": 2}},
    "required": ["kind", "root", "size", "pair"]})");
  const std::string g = json_schema_to_grammar(schema);
  EXPECT_TRUE(accepts(
      g,
      R"({"kind": "tree", "root": {"v": "x", "kids": [{"v": 2}, {"v": null, "kids": []}]}, "size": 3, "pair": [1, null]})"));
  EXPECT_TRUE(
      accepts(g, R"({"kind": "tree", "root": {"v": 2}, "size": "big", "pair": [null, null]})"));
  EXPECT_FALSE(accepts(g, R"({"kind": "bush", "root": {"v": 2}, "size": 1, "pair": [1, 2]})"));
  EXPECT_FALSE(accepts(g, R"({"kind": "tree", "root": {"v": 3}, "size": 1, "pair": [1, 2]})"));
  EXPECT_FALSE(accepts(g, R"({"kind": "tree", "root": {"v": 2}, "size": 1, "pair": [1]})"));
  EXPECT_FALSE(accepts(g, R"({"kind": "tree", "root": {"v": 2}, "size": true, "pair": [1, 2]})"));
}

TEST(JsonSchema, AnyJsonObject) {
  const std::string g = json_object_grammar();
  EXPECT_TRUE(accepts(g, R"({"a": [1, {"b": null}, "c\n\u00e9"], "d": {}})"));
  EXPECT_FALSE(accepts(g, "[1]"));
  EXPECT_FALSE(accepts(g, R"({"a": 01})"));
  EXPECT_FALSE(accepts(g, R"({"a": "x)"));
}

TEST(JsonSchema, WhatIsNotCoveredIsNamed) {
  struct Case {
    std::string schema, what;
  };
  for (const auto& c : std::vector<Case>{
           {R"({"type": "string", "pattern": "^a"})", "pattern"},
           {R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": 3}}})",
            "properties.a.minimum"},
           {R"({"type": "date"})", "unknown type"},
           {R"({"$ref": "#/$defs/missing"})", "not defined"},
           {R"({"$ref": "http://x/y"})", "only"},
           {R"({"type": "array", "minItems": 3, "maxItems": 2})", "below"},
           {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "not a property"},
           {R"(false)", "admits no value"},
       }) {
    try {
      (void)json_schema_to_grammar(json::parse(c.schema));
      ADD_FAILURE() << c.schema;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.what), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace hearth::text
