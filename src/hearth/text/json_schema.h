// JSON Schema -> GBNF grammar (text/grammar.h), so that generation can be held to a schema.
//
// Covered: type (object, array, string, number, integer, boolean, null, or a list of them),
// properties (in their order; required ones always, optional ones may be left out),
// additionalProperties (only false or absent are honoured: no other keys are generated),
// items, minItems, maxItems, minLength, maxLength, enum, const, anyOf / oneOf, and $ref to
// "#/$defs/NAME" or "#/definitions/NAME". An empty schema ({} or true) is any JSON value.
// Whitespace between tokens is bounded (at most one newline and 20 blanks), so that a model
// cannot stall in it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hearth::text {

// The grammar's source (its start rule is `root`). UsageError naming the schema path
// ("properties.items.type") for what is not covered or malformed. The schema is an
// ordered_json because property order is generation order ("reasoning" before "answer").
std::string json_schema_to_grammar(const nlohmann::ordered_json& schema);

// Any JSON object (OpenAI's response_format {"type": "json_object"}).
std::string json_object_grammar();

}  // namespace hearth::text
