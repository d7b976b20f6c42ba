#include "hearth/text/json_schema.h"

#include <fmt/core.h>

#include <map>
#include <set>

#include "hearth/base/error.h"

namespace hearth::text {

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxCount = 1000;  // bounds of minItems/maxItems/minLength/maxLength honoured
constexpr int kMaxDepth = 64;    // nesting of schemas

// The shared pieces every schema grammar may use.
constexpr const char* kPrimitives = R"(ws ::= [ \t]{0,20} | "\n" [ \t]{0,20}
char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}"
array ::= "[" ws (value ws ("," ws value ws)*)? "]"
)";

// Keywords that only describe: ignored.
const std::set<std::string> kDescriptive = {
    "title", "description", "default",  "examples",  "$schema",    "$id",    "$comment", "format",
    "$defs", "definitions", "readOnly", "writeOnly", "deprecated", "strict", "name"};

// `bytes` as a GBNF string literal.
std::string literal(const std::string& bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

class Builder {
 public:
  explicit Builder(const json& root) : root_(root) {}

  std::string build() {
    const std::string body = expr(root_, "", 0);
    std::string out = "root ::= " + body + "\n";
    for (const auto& [name, def] : rules_) out += name + " ::= " + def + "\n";
    return out + kPrimitives;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw UsageError(fmt::format("JSON schema{}{}: {}", path.empty() ? "" : " at ",
                                 path.empty() ? "" : path, what));
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  static int count(const json& s, const char* key, const std::string& path) {
    const json& v = s[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      fail(join(path, key), "must be a non-negative integer");
    }
    if (v.get<int64_t>() > kMaxCount) fail(join(path, key), fmt::format("above {}", kMaxCount));
    return static_cast<int>(v.get<int64_t>());
  }

  // A new rule holding `def`; returns its name.
  std::string define(const std::string& def) {
    const std::string name = fmt::format("s{}", rules_.size());
    rules_[name] = def;
    return name;
  }

  // A GBNF expression for `s` (a rule name, a literal or a parenthesized alternative).
  std::string expr(const json& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail(path, fmt::format("nested deeper than {}", kMaxDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "'false' admits no value");
      return "value";
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it) {
      static const std::set<std::string> known = {
          "type",      "properties", "required", "additionalProperties",
          "items",     "minItems",   "maxItems", "minLength",
          "maxLength", "enum",       "const",    "anyOf",
          "oneOf",     "$ref"};
      if (!known.count(it.key()) && !kDescriptive.count(it.key())) {
        fail(join(path, it.key()), "this keyword is not supported");
      }
    }
    if (s.contains("$ref")) return ref(s["$ref"], path, depth);
    if (s.contains("const")) return literal(s["const"].dump());
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail(join(path, "enum"), "must be a non-empty list");
      std::string alts;
      for (const auto& v : e) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      return "(" + alts + ")";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& list = s[key];
      if (!list.is_array() || list.empty()) fail(join(path, key), "must be a non-empty list");
      std::string alts;
      for (size_t i = 0; i < list.size(); ++i) {
        alts += (alts.empty() ? "" : " | ") +
                expr(list[i], join(path, fmt::format("{}[{}]", key, i)), depth + 1);
      }
      return "(" + alts + ")";
    }
    if (!s.contains("type")) {
      if (s.contains("properties")) return object(s, path, depth);
      if (s.contains("items")) return array(s, path, depth);
      return "value";
    }
    const json& t = s["type"];
    if (t.is_array()) {
      if (t.empty()) fail(join(path, "type"), "an empty list of types");
      std::string alts;
      for (const auto& one : t) {
        json single = s;
        single["type"] = one;
        alts += (alts.empty() ? "" : " | ") + expr(single, path, depth + 1);
      }
      return "(" + alts + ")";
    }
    if (!t.is_string()) fail(join(path, "type"), "must be a string or a list of strings");
    const std::string type = t.get<std::string>();
    if (type == "object") return object(s, path, depth);
    if (type == "array") return array(s, path, depth);
    if (type == "string") return string(s, path);
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return type;
    fail(join(path, "type"), fmt::format("unknown type '{}'", type));
  }

  std::string ref(const json& r, const std::string& path, int depth) {
    if (!r.is_string()) fail(join(path, "$ref"), "must be a string");
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    std::string key;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (target.rfind(prefix, 0) == 0) key = prefix;
    }
    if (key.empty()) fail(join(path, "$ref"), "only '#/$defs/NAME' and '#/definitions/NAME'");
    const std::string section = key == "#/$defs/" ? "$defs" : "definitions";
    const std::string name = target.substr(key.size());
    if (!root_.contains(section) || !root_[section].is_object() || !root_[section].contains(name)) {
      fail(join(path, "$ref"), fmt::format("'{}' is not defined", target));
    }
    // Named before its body is built, so that a schema may refer to itself.
    const std::string rule = define("");
    refs_[target] = rule;
    rules_[rule] = expr(root_[section][name], target, depth + 1);
    return rule;
  }

  std::string string(const json& s, const std::string& path) {
    const int min = s.contains("minLength") ? count(s, "minLength", path) : 0;
    const int max = s.contains("maxLength") ? count(s, "maxLength", path) : -1;
    if (min == 0 && max < 0) return "string";
    if (max >= 0 && max < min) fail(path, "maxLength is below minLength");
    return define(max < 0 ? fmt::format(R"("\"" char{{{},}} "\"")", min)
                          : fmt::format(R"("\"" char{{{},{}}} "\"")", min, max));
  }

  std::string array(const json& s, const std::string& path, int depth) {
    const std::string item =
        s.contains("items") ? expr(s["items"], join(path, "items"), depth + 1) : "value";
    const int min = s.contains("minItems") ? count(s, "minItems", path) : 0;
    const int max = s.contains("maxItems") ? count(s, "maxItems", path) : -1;
    if (max >= 0 && max < min) fail(path, "maxItems is below minItems");
    if (max == 0) return define(R"("[" ws "]")");
    const std::string more = fmt::format(R"(("," ws {} ws))", item);
    std::string reps;
    const int lo = std::max(min - 1, 0);
    if (max < 0) {
      reps = lo == 0 ? more + "*" : fmt::format("{}{{{},}}", more, lo);
    } else {
      reps = fmt::format("{}{{{},{}}}", more, lo, max - 1);
    }
    const std::string items = fmt::format("{} ws {}", item, reps);
    return define(min == 0 ? fmt::format(R"("[" ws ({})? "]")", items)
                           : fmt::format(R"("[" ws {} "]")", items));
  }

  std::string object(const json& s, const std::string& path, int depth) {
    if (s.contains("additionalProperties")) {
      const json& ap = s["additionalProperties"];
      if (!(ap.is_boolean() && !ap.get<bool>()) && !s.contains("properties")) {
        return "object";  // any keys: the generic object
      }
    }
    if (!s.contains("properties")) return "object";
    const json& props = s["properties"];
    if (!props.is_object()) fail(join(path, "properties"), "must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) fail(join(path, "required"), "must be a list of names");
      for (const auto& n : r) {
        if (!n.is_string() || !props.contains(n.get<std::string>())) {
          fail(join(path, "required"), fmt::format("names {} that is not a property", n.dump()));
        }
        required.insert(n.get<std::string>());
      }
    }
    // One "key": value piece per property; required ones first (in property order).
    std::vector<std::string> must, may;
    for (auto it = props.begin(); it != props.end(); ++it) {
      const std::string kv =
          fmt::format("{} ws \":\" ws {} ws", literal(json(it.key()).dump()),
                      expr(it.value(), join(path, "properties." + it.key()), depth + 1));
      (required.count(it.key()) ? must : may).push_back(define(kv));
    }
    std::string body;
    for (size_t i = 0; i < must.size(); ++i) {
      body += (i == 0 ? "" : " \",\" ws ") + must[i];
    }
    if (!must.empty()) {
      for (const auto& m : may) body += fmt::format(R"( ("," ws {})?)", m);
    } else if (!may.empty()) {
      // No required key: the first one present starts, each later one may follow.
      std::string alts;
      for (size_t i = 0; i < may.size(); ++i) {
        std::string alt = may[i];
        for (size_t j = i + 1; j < may.size(); ++j) alt += fmt::format(R"( ("," ws {})?)", may[j]);
        alts += (alts.empty() ? "" : " | ") + alt;
      }
      body = "(" + alts + ")?";
    }
    return define(fmt::format(R"("{{" ws {} "}}")", body));
  }

  const json& root_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string json_schema_to_grammar(const json& schema) {
  return Builder(schema).build();
}

std::string json_object_grammar() {
  return std::string("root ::= object\n") + kPrimitives;
}

}  // namespace hearth::text
