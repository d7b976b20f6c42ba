// Jinja evaluator: walks the tree from jinja_parser.cpp with Python-like value semantics
// (truthiness, integer vs float arithmetic, negative indices, slices).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "hearth/base/error.h"
#include "hearth/text/jinja.h"
#include "hearth/text/jinja_ast.h"
#include "hearth/text/unicode.h"

namespace hearth::text::jinja {
namespace {

using json = nlohmann::ordered_json;

// A value: JSON data, "undefined", or a namespace (a mutable object shared by reference).
struct Value {
  bool undefined = false;
  json data;
  std::shared_ptr<json> ns;

  static Value undef() {
    Value v;
    v.undefined = true;
    return v;
  }
  static Value of(json j) {
    Value v;
    v.data = std::move(j);
    return v;
  }
  const json& as_json() const { return ns ? *ns : data; }
};

[[noreturn]] void fail(const Node& n, const std::string& what) {
  throw FormatError(fmt::format("chat template line {}: {}", n.line, what));
}

std::string type_name(const Value& v) {
  if (v.undefined) return "undefined";
  if (v.ns) return "namespace";
  return v.data.type_name();
}

bool truthy(const Value& v) {
  if (v.undefined) return false;
  if (v.ns) return true;
  const json& j = v.data;
  switch (j.type()) {
    case json::value_t::null:
      return false;
    case json::value_t::boolean:
      return j.get<bool>();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return j.get<int64_t>() != 0;
    case json::value_t::number_float:
      return j.get<double>() != 0.0;
    case json::value_t::string:
      return !j.get_ref<const std::string&>().empty();
    case json::value_t::array:
    case json::value_t::object:
      return !j.empty();
    default:
      return false;
  }
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string repr(const json& j);

// How {{ value }} prints: Python's str().
std::string to_str(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "None";
    case json::value_t::boolean:
      return j.get<bool>() ? "True" : "False";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return std::to_string(j.get<int64_t>());
    case json::value_t::number_float:
      return python_float(j.get<double>());
    case json::value_t::string:
      return j.get<std::string>();
    default:
      return repr(j);
  }
}

std::string repr(const json& j) {
  if (j.is_string()) {
    std::string out = "'";
    for (char c : j.get_ref<const std::string&>()) {
      if (c == '\'' || c == '\\') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    return out + "'";
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ", ";
      out += repr(j[i]);
    }
    return out + "]";
  }
  if (j.is_object()) {
    std::string out = "{";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ", ";
      out += repr(json(it.key()));
      out += ": ";
      out += repr(it.value());
      first = false;
    }
    return out + "}";
  }
  return to_str(j);
}

std::string to_str(const Value& v) {
  return v.undefined ? std::string() : to_str(v.as_json());
}

// Python's json.dumps(ensure_ascii=False) with ", " / ": " separators or an indent.
void dump_py(const json& j, int indent, int depth, std::string& out) {
  std::string nl, nl_end;
  if (indent > 0) {
    nl.assign(1, '\n').append(static_cast<size_t>(indent * (depth + 1)), ' ');
    nl_end.assign(1, '\n').append(static_cast<size_t>(indent * depth), ' ');
  }
  const char* sep = indent > 0 ? "," : ", ";
  if (j.is_array()) {
    if (j.empty()) {
      out += "[]";
      return;
    }
    out += "[";
    for (size_t i = 0; i < j.size(); ++i) {
      out += i ? sep : "";
      out += nl;
      dump_py(j[i], indent, depth + 1, out);
    }
    out += nl_end;
    out += ']';
  } else if (j.is_object()) {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += "{";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out += first ? "" : sep;
      out += nl;
      out += json(it.key()).dump(-1, ' ', false) + ": ";
      dump_py(it.value(), indent, depth + 1, out);
      first = false;
    }
    out += nl_end;
    out += '}';
  } else if (j.is_number_float()) {
    out += python_float(j.get<double>());
  } else {
    out += j.dump(-1, ' ', false);
  }
}

// Code points of a UTF-8 string, for Python-style indexing of strings.
std::vector<std::string> chars(const std::string& s) {
  std::vector<std::string> out;
  for (const auto& c : decode_utf8(s)) out.push_back(s.substr(c.begin, c.len));
  return out;
}

std::string strip(const std::string& s, const std::string* set, bool left, bool right) {
  auto in_set = [&](char c) {
    return set ? set->find(c) != std::string::npos
               : (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v');
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && in_set(s[b])) ++b;
  if (right)
    while (e > b && in_set(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string upper(std::string s) {
  for (auto& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return s;
}
std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}
std::string title(std::string s, bool only_first) {
  bool start = true;
  for (auto& c : s) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) {
      c = start ? static_cast<char>(std::toupper(c))
                : (only_first ? static_cast<char>(std::tolower(c)) : c);
      if (!only_first) c = start ? c : static_cast<char>(std::tolower(c));
      start = false;
    } else if (!only_first) {
      start = true;
    }
  }
  return s;
}

int64_t py_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
int64_t py_floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

class Renderer {
 public:
  explicit Renderer(const json& globals) {
    scopes_.emplace_back();
    if (globals.is_object()) {
      for (auto it = globals.begin(); it != globals.end(); ++it) {
        scopes_.back()[it.key()] = Value::of(it.value());
      }
    }
  }

  void exec(const Node& n, std::string& out) {
    switch (n.kind) {
      case NodeKind::kBody:
        for (const auto& c : n.children) exec(*c, out);
        return;
      case NodeKind::kText:
        out += n.str;
        check_output(n, out);
        return;
      case NodeKind::kOutput:
        out += to_str(eval(*n.children[0]));
        check_output(n, out);
        return;
      case NodeKind::kIf: {
        const size_t pairs = (n.children.size() - (n.flag ? 1 : 0)) / 2;
        for (size_t i = 0; i < pairs; ++i) {
          if (truthy(eval(*n.children[2 * i]))) {
            exec(*n.children[2 * i + 1], out);
            return;
          }
        }
        if (n.flag) exec(*n.children.back(), out);
        return;
      }
      case NodeKind::kFor:
        exec_for(n, out);
        return;
      case NodeKind::kSet: {
        Value v = eval(*n.children[0]);
        if (!n.attr.empty()) {
          Value* target = lookup(n.names[0]);
          if (!target || !target->ns) {
            fail(n, fmt::format("'{}' is not a namespace; cannot set .{}", n.names[0], n.attr));
          }
          (*target->ns)[n.attr] = v.as_json();
        } else {
          scopes_.back()[n.names[0]] = std::move(v);
        }
        return;
      }
      default:
        fail(n, "internal: not a statement");
    }
  }

 private:
  Value* lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  std::vector<json> iterate(const Node& n, const Value& v) {
    if (v.undefined || v.data.is_null()) return {};  // Jinja loops over undefined as empty
    const json& j = v.as_json();
    std::vector<json> items;
    if (j.is_array()) {
      items.assign(j.begin(), j.end());
    } else if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key());
    } else if (j.is_string()) {
      for (auto& c : chars(j.get<std::string>())) items.emplace_back(c);
    } else {
      fail(n, fmt::format("cannot loop over a {}", type_name(v)));
    }
    return items;
  }

  void bind_loop_vars(const Node& n, const json& item, std::unordered_map<std::string, Value>& s) {
    if (n.names.size() == 1) {
      s[n.names[0]] = Value::of(item);
      return;
    }
    if (!item.is_array() || item.size() != n.names.size()) {
      fail(n, fmt::format("cannot unpack {} into {} names", item.dump(), n.names.size()));
    }
    for (size_t k = 0; k < n.names.size(); ++k) s[n.names[k]] = Value::of(item[k]);
  }

  void exec_for(const Node& n, std::string& out) {
    std::vector<json> items = iterate(n, eval(*n.children[0]));
    if (n.children[2]) {  // {% for x in xs if cond %}: filter before loop.* is computed
      std::vector<json> kept;
      for (auto& item : items) {
        scopes_.emplace_back();
        bind_loop_vars(n, item, scopes_.back());
        const bool keep = truthy(eval(*n.children[2]));
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (n.children.size() > 3) exec(*n.children[3], out);
      return;
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      // Budgets keep a hostile template from running or growing without end.
      if (++iterations_ > kMaxIterations) fail(n, "too many loop iterations");
      check_output(n, out);
      scopes_.emplace_back();
      auto& s = scopes_.back();
      bind_loop_vars(n, items[i], s);
      json loop = {{"index", i + 1},          {"index0", i},   {"first", i == 0},
                   {"last", i == len - 1},    {"length", len}, {"revindex", len - i},
                   {"revindex0", len - i - 1}};
      if (i > 0) loop["previtem"] = items[i - 1];
      if (i + 1 < len) loop["nextitem"] = items[i + 1];
      s["loop"] = Value::of(std::move(loop));
      exec(*n.children[1], out);
      scopes_.pop_back();
    }
  }

  // Every expression passes here: the time budget is checked now and then, and no value may
  // grow past the size budget (whatever operator or filter made it).
  Value eval(const Node& n) {
    if ((++steps_ & 1023) == 0 && std::chrono::steady_clock::now() > deadline_) {
      fail(n, fmt::format("rendering took longer than {} ms", kMaxMillis));
    }
    Value v = eval_node(n);
    if (!v.undefined && !v.ns) {
      const json& j = v.as_json();
      if (j.is_string() && j.get_ref<const std::string&>().size() > kMaxValue) {
        fail(n, "a string value is too large");
      }
      if ((j.is_array() || j.is_object()) && j.size() > kMaxItems) {
        fail(n, "a list or mapping is too large");
      }
    }
    return v;
  }

  void check_output(const Node& n, const std::string& out) const {
    if (out.size() > kMaxOutput) fail(n, "rendered text is too large");
  }

  Value eval_node(const Node& n) {
    switch (n.kind) {
      case NodeKind::kLiteral:
        return Value::of(n.value);
      case NodeKind::kName: {
        Value* v = lookup(n.str);
        return v ? *v : Value::undef();
      }
      case NodeKind::kList: {
        json arr = json::array();
        for (const auto& c : n.children) arr.push_back(eval(*c).as_json());
        return Value::of(std::move(arr));
      }
      case NodeKind::kDict: {
        json obj = json::object();
        for (size_t i = 0; i + 1 < n.children.size(); i += 2) {
          const Value k = eval(*n.children[i]);
          if (!k.as_json().is_string()) fail(n, "dict keys must be strings");
          obj[k.as_json().get<std::string>()] = eval(*n.children[i + 1]).as_json();
        }
        return Value::of(std::move(obj));
      }
      case NodeKind::kAttr:
        return attribute(n, eval(*n.children[0]), n.str);
      case NodeKind::kIndex:
        return index(n, eval(*n.children[0]), eval(*n.children[1]));
      case NodeKind::kSlice:
        return slice(n);
      case NodeKind::kCall:
        return call(n);
      case NodeKind::kFilter:
        return filter(n);
      case NodeKind::kTest: {
        const bool r = test(n);
        return Value::of(n.flag ? !r : r);
      }
      case NodeKind::kUnary: {
        const Value v = eval(*n.children[0]);
        if (n.str == "not") return Value::of(!truthy(v));
        const json& j = v.as_json();
        if (!j.is_number()) fail(n, fmt::format("unary {} on a {}", n.str, type_name(v)));
        if (n.str == "+") return v;
        if (j.is_number_float()) return Value::of(-j.get<double>());
        const int64_t x = j.get<int64_t>();
        if (x == std::numeric_limits<int64_t>::min()) fail(n, "integer overflow in unary -");
        return Value::of(-x);
      }
      case NodeKind::kBinary:
        return binary(n);
      case NodeKind::kCond: {
        if (truthy(eval(*n.children[1]))) return eval(*n.children[0]);
        return n.children[2] ? eval(*n.children[2]) : Value::undef();
      }
      default:
        fail(n, "internal: not an expression");
    }
  }

  Value attribute(const Node& n, const Value& obj, const std::string& name) {
    if (obj.undefined) fail(n, fmt::format("undefined value has no attribute '{}'", name));
    const json& j = obj.as_json();
    if (j.is_object()) {
      auto it = j.find(name);
      return it == j.end() ? Value::undef() : Value::of(*it);
    }
    if (j.is_null()) fail(n, fmt::format("None has no attribute '{}'", name));
    return Value::undef();
  }

  Value index(const Node& n, const Value& obj, const Value& key) {
    if (obj.undefined) fail(n, "cannot index an undefined value");
    const json& j = obj.as_json();
    const json& k = key.as_json();
    if (j.is_object()) {
      if (!k.is_string()) return Value::undef();
      auto it = j.find(k.get<std::string>());
      return it == j.end() ? Value::undef() : Value::of(*it);
    }
    if ((j.is_array() || j.is_string()) && k.is_number_integer()) {
      std::vector<std::string> cs;
      if (j.is_string()) cs = chars(j.get<std::string>());
      const int64_t size =
          j.is_array() ? static_cast<int64_t>(j.size()) : static_cast<int64_t>(cs.size());
      int64_t i = k.get<int64_t>();
      if (i < 0) i += size;
      if (i < 0 || i >= size) return Value::undef();
      return j.is_array() ? Value::of(j[static_cast<size_t>(i)])
                          : Value::of(cs[static_cast<size_t>(i)]);
    }
    fail(n, fmt::format("cannot index a {} with a {}", type_name(obj), k.type_name()));
  }

  Value slice(const Node& n) {
    const Value obj = eval(*n.children[0]);
    const json& j = obj.as_json();
    if (!(j.is_array() || j.is_string()) || obj.undefined) {
      fail(n, fmt::format("cannot slice a {}", type_name(obj)));
    }
    std::vector<json> items;
    if (j.is_array()) {
      items.assign(j.begin(), j.end());
    } else {
      for (auto& c : chars(j.get<std::string>())) items.emplace_back(c);
    }
    const int64_t size = static_cast<int64_t>(items.size());
    auto bound = [&](const Node* c, bool& given) -> int64_t {
      given = false;
      if (!c) return 0;
      const Value v = eval(*c);
      if (v.as_json().is_null()) return 0;
      if (!v.as_json().is_number_integer()) fail(n, "slice bounds must be integers");
      given = true;
      return v.as_json().get<int64_t>();
    };
    bool has_start, has_stop, has_step;
    int64_t start = bound(n.children[1].get(), has_start);
    int64_t stop = bound(n.children[2].get(), has_stop);
    int64_t step = bound(n.children[3].get(), has_step);
    if (!has_step) step = 1;
    if (step == 0) fail(n, "slice step cannot be zero");
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v += size;
      return std::max(lo, std::min(v, hi));
    };
    if (step > 0) {
      start = has_start ? clamp(start, 0, size) : 0;
      stop = has_stop ? clamp(stop, 0, size) : size;
    } else {
      start = has_start ? clamp(start, -1, size - 1) : size - 1;
      stop = has_stop ? clamp(stop, -1, size - 1) : -1;
    }
    json out = j.is_array() ? json::array() : json(std::string());
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (j.is_array()) {
        out.push_back(items[static_cast<size_t>(i)]);
      } else {
        out.get_ref<std::string&>() += items[static_cast<size_t>(i)].get<std::string>();
      }
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return Value::of(std::move(out));
  }

  // Evaluated arguments of a call or filter, skipping the first `skip` children.
  struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    const Value* get(size_t i, const char* name) const {
      if (i < pos.size()) return &pos[i];
      for (const auto& [k, v] : kw)
        if (k == name) return &v;
      return nullptr;
    }
  };
  Args args_of(const Node& n, size_t skip) {
    Args a;
    const size_t n_pos = n.n_positional;
    for (size_t i = 0; i < n_pos; ++i) a.pos.push_back(eval(*n.children[skip + i]));
    for (size_t i = 0; i < n.names.size(); ++i) {
      a.kw.emplace_back(n.names[i], eval(*n.children[skip + n_pos + i]));
    }
    return a;
  }
  const std::string& str_arg(const Node& n, const Args& a, size_t i, const char* name) {
    const Value* v = a.get(i, name);
    if (!v || !v->as_json().is_string())
      fail(n, fmt::format("argument '{}' must be a string", name));
    return v->as_json().get_ref<const std::string&>();
  }

  Value call(const Node& n) {
    const Node& callee = *n.children[0];
    Args a = args_of(n, 1);
    if (callee.kind == NodeKind::kName && !lookup(callee.str)) {
      const std::string& f = callee.str;
      if (f == "raise_exception") {
        const Value* msg = a.get(0, "message");
        std::string text = "chat template raised an exception: ";
        if (msg) text += to_str(*msg);
        throw UsageError(text);
      }
      if (f == "namespace" || f == "dict") {
        json obj = json::object();
        for (auto& [k, v] : a.kw) obj[k] = v.as_json();
        if (f == "dict") return Value::of(std::move(obj));
        Value v;
        v.ns = std::make_shared<json>(std::move(obj));
        return v;
      }
      if (f == "range") {
        std::vector<int64_t> r;
        for (const auto& p : a.pos) {
          if (!p.as_json().is_number_integer()) fail(n, "range() takes integers");
          r.push_back(p.as_json().get<int64_t>());
        }
        if (r.empty() || r.size() > 3) fail(n, "range() takes 1 to 3 arguments");
        const int64_t start = r.size() > 1 ? r[0] : 0;
        const int64_t stop = r.size() > 1 ? r[1] : r[0];
        const int64_t step = r.size() > 2 ? r[2] : 1;
        if (step == 0) fail(n, "range() step cannot be zero");
        json out = json::array();
        for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
          out.push_back(i);
          if (out.size() > kMaxItems) fail(n, "range() is too long");
          if (__builtin_add_overflow(i, step, &i)) break;
        }
        return Value::of(std::move(out));
      }
      fail(n, fmt::format("function '{}' is not supported", f));
    }
    if (callee.kind != NodeKind::kAttr) fail(n, "only functions and methods can be called");
    const Value obj = eval(*callee.children[0]);
    const std::string& m = callee.str;
    const json& j = obj.as_json();
    if (!obj.undefined && j.is_string()) {
      const std::string& s = j.get_ref<const std::string&>();
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        const Value* chars_arg = a.get(0, "chars");
        const std::string* set = chars_arg && chars_arg->as_json().is_string()
                                     ? &chars_arg->as_json().get_ref<const std::string&>()
                                     : nullptr;
        return Value::of(strip(s, set, m != "rstrip", m != "lstrip"));
      }
      if (m == "startswith") return Value::of(s.starts_with(str_arg(n, a, 0, "prefix")));
      if (m == "endswith") return Value::of(s.ends_with(str_arg(n, a, 0, "suffix")));
      if (m == "upper") return Value::of(upper(s));
      if (m == "lower") return Value::of(lower(s));
      if (m == "title") return Value::of(title(s, false));
      if (m == "capitalize") return Value::of(title(lower(s), true));
      if (m == "replace") {
        const std::string& from = str_arg(n, a, 0, "old");
        const std::string& to = str_arg(n, a, 1, "new");
        const Value* count = a.get(2, "count");
        if (count && !count->as_json().is_number_integer())
          fail(n, "replace() count must be an integer");
        int64_t left = count ? count->as_json().get<int64_t>() : -1;
        std::string out;
        size_t pos = 0;
        if (from.empty()) return Value::of(s);
        while (left != 0) {
          const size_t hit = s.find(from, pos);
          if (hit == std::string::npos) break;
          out.append(s, pos, hit - pos).append(to);
          if (out.size() > kMaxValue) fail(n, "replace() result is too large");
          pos = hit + from.size();
          --left;
        }
        out.append(s, pos);
        return Value::of(out);
      }
      if (m == "split") {
        const Value* sep = a.get(0, "sep");
        const Value* maxsplit = a.get(1, "maxsplit");
        int64_t left = maxsplit ? maxsplit->as_json().get<int64_t>() : -1;
        json out = json::array();
        if (!sep || sep->as_json().is_null()) {  // runs of whitespace, no empty parts
          size_t i = 0;
          while (true) {
            while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
            if (i >= s.size()) break;
            if (left == 0) {
              out.push_back(strip(s.substr(i), nullptr, false, true));
              break;
            }
            size_t e = i;
            while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e]))) ++e;
            out.push_back(s.substr(i, e - i));
            --left;
            i = e;
          }
          return Value::of(std::move(out));
        }
        const std::string& d = str_arg(n, a, 0, "sep");
        if (d.empty()) fail(n, "split() separator is empty");
        size_t pos = 0;
        while (left != 0) {
          const size_t hit = s.find(d, pos);
          if (hit == std::string::npos) break;
          out.push_back(s.substr(pos, hit - pos));
          pos = hit + d.size();
          --left;
        }
        out.push_back(s.substr(pos));
        return Value::of(std::move(out));
      }
      if (m == "join") {
        const Value* list = a.get(0, "iterable");
        if (!list) fail(n, "join() needs a list");
        std::string out;
        bool first = true;
        for (const auto& item : iterate(n, *list)) {
          if (!first) out += s;
          out += to_str(item);
          first = false;
        }
        return Value::of(out);
      }
    }
    if (!obj.undefined && j.is_object()) {
      if (m == "items") {
        json out = json::array();
        for (auto it = j.begin(); it != j.end(); ++it)
          out.push_back(json::array({it.key(), it.value()}));
        return Value::of(std::move(out));
      }
      if (m == "keys" || m == "values") {
        json out = json::array();
        for (auto it = j.begin(); it != j.end(); ++it) {
          out.push_back(m == "keys" ? json(it.key()) : it.value());
        }
        return Value::of(std::move(out));
      }
      if (m == "get") {
        const std::string& k = str_arg(n, a, 0, "key");
        auto it = j.find(k);
        if (it != j.end()) return Value::of(*it);
        const Value* def = a.get(1, "default");
        return def ? *def : Value::of(nullptr);
      }
    }
    fail(n, fmt::format("{} has no method '{}'", type_name(obj), m));
  }

  Value filter(const Node& n) {
    const Value in = eval(*n.children[0]);
    const Args a = args_of(n, 1);
    const std::string& f = n.str;
    const json& j = in.as_json();
    if (f == "default" || f == "d") {
      const Value* def = a.get(0, "default_value");
      const Value* boolean = a.get(1, "boolean");
      const bool use_default = in.undefined || (boolean && truthy(*boolean) && !truthy(in));
      if (use_default) return def ? *def : Value::of("");
      return in;
    }
    if (f == "safe") return in;
    if (f == "string") return Value::of(to_str(in));
    if (f == "tojson") {
      const Value* indent = a.get(0, "indent");
      std::string out;
      int width = 0;
      if (indent && indent->as_json().is_number_integer()) {
        width = static_cast<int>(std::clamp<int64_t>(indent->as_json().get<int64_t>(), 0, 16));
      }
      dump_py(j, width, 0, out);
      return Value::of(out);
    }
    if (in.undefined) fail(n, fmt::format("filter '{}' applied to an undefined value", f));
    if (f == "trim") {
      if (!j.is_string()) return Value::of(strip(to_str(in), nullptr, true, true));
      const Value* chars_arg = a.get(0, "chars");
      const std::string* set = chars_arg && chars_arg->as_json().is_string()
                                   ? &chars_arg->as_json().get_ref<const std::string&>()
                                   : nullptr;
      return Value::of(strip(j.get<std::string>(), set, true, true));
    }
    if (f == "upper") return Value::of(upper(to_str(in)));
    if (f == "lower") return Value::of(lower(to_str(in)));
    if (f == "title") return Value::of(title(to_str(in), false));
    if (f == "capitalize") return Value::of(title(lower(to_str(in)), true));
    if (f == "length" || f == "count") {
      if (j.is_string()) return Value::of(static_cast<int64_t>(chars(j.get<std::string>()).size()));
      if (j.is_array() || j.is_object()) return Value::of(static_cast<int64_t>(j.size()));
      fail(n, fmt::format("a {} has no length", type_name(in)));
    }
    if (f == "items") {
      if (!j.is_object()) fail(n, "items needs a mapping");
      json out = json::array();
      for (auto it = j.begin(); it != j.end(); ++it)
        out.push_back(json::array({it.key(), it.value()}));
      return Value::of(std::move(out));
    }
    if (f == "list") return Value::of(json(iterate(n, in)));
    if (f == "first" || f == "last") {
      const auto items = iterate(n, in);
      if (items.empty()) return Value::undef();
      return Value::of(f == "first" ? items.front() : items.back());
    }
    if (f == "reverse") {
      if (j.is_string()) {
        auto cs = chars(j.get<std::string>());
        std::string out;
        for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
        return Value::of(out);
      }
      auto items = iterate(n, in);
      std::reverse(items.begin(), items.end());
      return Value::of(json(items));
    }
    if (f == "join") {
      const Value* sep = a.get(0, "d");
      const std::string d = sep ? to_str(*sep) : "";
      std::string out;
      bool first = true;
      for (const auto& item : iterate(n, in)) {
        if (!first) out += d;
        out += to_str(item);
        first = false;
      }
      return Value::of(out);
    }
    if (f == "replace") {
      const std::string s = to_str(in);
      const std::string& from = str_arg(n, a, 0, "old");
      const std::string& to = str_arg(n, a, 1, "new");
      if (from.empty()) return Value::of(s);
      std::string out;
      size_t pos = 0;
      while (true) {
        const size_t hit = s.find(from, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos).append(to);
        if (out.size() > kMaxValue) fail(n, "replace result is too large");
        pos = hit + from.size();
      }
      out.append(s, pos);
      return Value::of(out);
    }
    if (f == "int") {
      if (j.is_number_integer()) return in;
      if (j.is_number()) {
        const double d = j.get<double>();
        if (!(d > -9.2e18 && d < 9.2e18)) fail(n, "int() of a number out of range");
        return Value::of(static_cast<int64_t>(d));
      }
      try {
        return Value::of(static_cast<int64_t>(std::stoll(to_str(in))));
      } catch (const std::exception&) {
        return Value::of(0);
      }
    }
    if (f == "abs") {
      if (j.is_number_integer()) {
        const int64_t x = j.get<int64_t>();
        if (x == std::numeric_limits<int64_t>::min()) fail(n, "integer overflow in abs");
        return Value::of(x < 0 ? -x : x);
      }
      if (j.is_number()) return Value::of(std::fabs(j.get<double>()));
    }
    if (f == "selectattr" || f == "rejectattr") {
      const std::string& attr = str_arg(n, a, 0, "attr");
      json out = json::array();
      for (const auto& item : iterate(n, in)) {
        const Value v =
            item.is_object() && item.contains(attr) ? Value::of(item[attr]) : Value::undef();
        bool ok;
        if (a.pos.size() >= 2) {
          const std::string& t = str_arg(n, a, 1, "test");
          ok = run_test(n, t, v, a.pos.size() >= 3 ? &a.pos[2] : nullptr);
        } else {
          ok = truthy(v);
        }
        if (ok == (f == "selectattr")) out.push_back(item);
      }
      return Value::of(std::move(out));
    }
    fail(n, fmt::format("filter '{}' is not supported", f));
  }

  bool run_test(const Node& n, const std::string& t, const Value& v, const Value* arg) {
    const json& j = v.as_json();
    if (t == "defined") return !v.undefined;
    if (t == "undefined") return v.undefined;
    if (t == "none") return !v.undefined && !v.ns && j.is_null();
    if (t == "string") return !v.undefined && j.is_string();
    if (t == "number") return !v.undefined && j.is_number();
    if (t == "integer") return !v.undefined && j.is_number_integer();
    if (t == "float") return !v.undefined && j.is_number_float();
    if (t == "boolean") return !v.undefined && j.is_boolean();
    if (t == "true") return !v.undefined && j.is_boolean() && j.get<bool>();
    if (t == "false") return !v.undefined && j.is_boolean() && !j.get<bool>();
    if (t == "mapping") return !v.undefined && j.is_object();
    if (t == "sequence" || t == "iterable") {
      return !v.undefined && (j.is_array() || j.is_string() || j.is_object());
    }
    if (t == "odd" || t == "even") {
      if (!j.is_number_integer()) fail(n, fmt::format("'{}' test needs an integer", t));
      return (py_mod(j.get<int64_t>(), 2) == 1) == (t == "odd");
    }
    if (t == "divisibleby") {
      if (!arg || !j.is_number_integer() || !arg->as_json().is_number_integer() ||
          arg->as_json().get<int64_t>() == 0) {
        fail(n, "'divisibleby' needs two integers");
      }
      return py_mod(j.get<int64_t>(), arg->as_json().get<int64_t>()) == 0;
    }
    if (t == "equalto" || t == "eq" || t == "==" || t == "sameas") {
      if (!arg) fail(n, fmt::format("'{}' test needs an argument", t));
      return equal(v, *arg);
    }
    if (t == "ne" || t == "!=") return arg && !equal(v, *arg);
    fail(n, fmt::format("test '{}' is not supported", t));
  }

  bool test(const Node& n) {
    const Value v = eval(*n.children[0]);
    const Args a = args_of(n, 1);
    // "x is equalto 3" form puts the argument as a positional child without n_positional.
    const Value extra = n.children.size() > 1 && a.pos.empty() && a.kw.empty()
                            ? eval(*n.children[1])
                            : Value::undef();
    const Value* arg = !a.pos.empty() ? &a.pos[0] : (extra.undefined ? nullptr : &extra);
    return run_test(n, n.str, v, arg);
  }

  static bool equal(const Value& a, const Value& b) {
    if (a.undefined || b.undefined) return a.undefined && b.undefined;
    const json& x = a.as_json();
    const json& y = b.as_json();
    if (x.is_boolean() != y.is_boolean() && (x.is_number() || y.is_number())) {
      // Python: True == 1; keep that.
      const double dx =
          x.is_boolean() ? (x.get<bool>() ? 1 : 0) : (x.is_number() ? x.get<double>() : NAN);
      const double dy =
          y.is_boolean() ? (y.get<bool>() ? 1 : 0) : (y.is_number() ? y.get<double>() : NAN);
      return dx == dy;
    }
    return x == y;
  }

  Value binary(const Node& n) {
    const std::string& op = n.str;
    if (op == "and") {
      Value l = eval(*n.children[0]);
      return truthy(l) ? eval(*n.children[1]) : l;
    }
    if (op == "or") {
      Value l = eval(*n.children[0]);
      return truthy(l) ? l : eval(*n.children[1]);
    }
    const Value l = eval(*n.children[0]);
    const Value r = eval(*n.children[1]);
    if (op == "~") return Value::of(to_str(l) + to_str(r));
    if (op == "==") return Value::of(equal(l, r));
    if (op == "!=") return Value::of(!equal(l, r));
    const json& x = l.as_json();
    const json& y = r.as_json();
    if (op == "in" || op == "not in") {
      bool found = false;
      if (r.undefined) fail(n, "'in' on an undefined value");
      if (y.is_string()) {
        if (!x.is_string()) fail(n, "'in <string>' needs a string on the left");
        found = y.get_ref<const std::string&>().find(x.get_ref<const std::string&>()) !=
                std::string::npos;
      } else if (y.is_array()) {
        for (const auto& item : y) found = found || equal(l, Value::of(item));
      } else if (y.is_object()) {
        found = x.is_string() && y.contains(x.get<std::string>());
      } else {
        fail(n, fmt::format("'in' on a {}", type_name(r)));
      }
      return Value::of(op == "in" ? found : !found);
    }
    if (l.undefined || r.undefined) {
      fail(n, fmt::format("'{}' on an undefined value", op));
    }
    if (op == "+") {
      if (x.is_string() && y.is_string())
        return Value::of(x.get<std::string>() + y.get<std::string>());
      if (x.is_array() && y.is_array()) {
        json out = x;
        for (const auto& item : y) out.push_back(item);
        return Value::of(std::move(out));
      }
    }
    if (op == "*" && (x.is_string() || y.is_string()) &&
        (x.is_number_integer() || y.is_number_integer())) {
      const std::string& s =
          x.is_string() ? x.get_ref<const std::string&>() : y.get_ref<const std::string&>();
      const int64_t times = x.is_string() ? y.get<int64_t>() : x.get<int64_t>();
      if (times > 0 && (times > static_cast<int64_t>(kMaxValue) ||
                        s.size() * static_cast<size_t>(times) > kMaxValue)) {
        fail(n, "string repetition is too large");
      }
      std::string out;
      for (int64_t i = 0; i < times; ++i) out += s;
      return Value::of(out);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (x.is_number() && y.is_number()) {
        const double a = x.get<double>(), b = y.get<double>();
        c = a < b ? -1 : (a > b ? 1 : 0);
      } else if (x.is_string() && y.is_string()) {
        c = x.get_ref<const std::string&>().compare(y.get_ref<const std::string&>());
      } else {
        fail(n, fmt::format("cannot compare {} and {}", type_name(l), type_name(r)));
      }
      if (op == "<") return Value::of(c < 0);
      if (op == ">") return Value::of(c > 0);
      if (op == "<=") return Value::of(c <= 0);
      return Value::of(c >= 0);
    }
    if (!x.is_number() || !y.is_number()) {
      fail(n, fmt::format("cannot apply '{}' to {} and {}", op, type_name(l), type_name(r)));
    }
    const bool ints = x.is_number_integer() && y.is_number_integer();
    if (ints && op != "/" && op != "**") {
      const int64_t a = x.get<int64_t>(), b = y.get<int64_t>();
      if ((op == "%" || op == "//") && b == 0) fail(n, "division by zero");
      int64_t r = 0;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(a, b, &r);
      if (op == "-") overflow = __builtin_sub_overflow(a, b, &r);
      if (op == "*") overflow = __builtin_mul_overflow(a, b, &r);
      // The one quotient that does not fit: the most negative number divided by -1.
      const bool min_by_minus_one = a == std::numeric_limits<int64_t>::min() && b == -1;
      if (op == "%") r = min_by_minus_one ? 0 : py_mod(a, b);
      if (op == "//") {
        overflow = min_by_minus_one;
        if (!overflow) r = py_floordiv(a, b);
      }
      if (overflow) fail(n, fmt::format("integer overflow in '{}'", op));
      if (op == "+" || op == "-" || op == "*" || op == "%" || op == "//") return Value::of(r);
    }
    const double a = x.get<double>(), b = y.get<double>();
    if (op == "+") return Value::of(a + b);
    if (op == "-") return Value::of(a - b);
    if (op == "*") return Value::of(a * b);
    if (op == "**") {
      const double p = std::pow(a, b);
      if (ints && b >= 0) {
        if (!(p > -9.2e18 && p < 9.2e18)) fail(n, "integer overflow in '**'");
        return Value::of(static_cast<int64_t>(p));
      }
      return Value::of(p);
    }
    if (b == 0) fail(n, "division by zero");
    if (op == "/") return Value::of(a / b);
    if (op == "//") return Value::of(std::floor(a / b));
    if (op == "%") return Value::of(a - b * std::floor(a / b));
    fail(n, fmt::format("unknown operator '{}'", op));
  }

  // Budgets: a chat prompt is at most a few MiB of text; nothing a real template does comes
  // near these, and a hostile one is stopped by them in well under a second of work.
  static constexpr uint64_t kMaxIterations = 1'000'000;
  static constexpr size_t kMaxOutput = 16u << 20;  // bytes of rendered text
  static constexpr size_t kMaxValue = 16u << 20;   // bytes of any one string value
  static constexpr size_t kMaxItems = 1u << 20;    // elements of any one list or mapping
  static constexpr int kMaxMillis = 2000;          // wall time of one render
  uint64_t iterations_ = 0;
  uint64_t steps_ = 0;
  const std::chrono::steady_clock::time_point deadline_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kMaxMillis);
  std::vector<std::unordered_map<std::string, Value>> scopes_;
};

}  // namespace

Template::Template(std::string_view source) : root_(parse(lex(source))) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  Renderer r(context);
  std::string out;
  try {
    r.exec(*root_, out);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // A value of the wrong type deep in a filter or method (a count that is a string, ...):
    // the template is at fault, whatever the library said.
    throw FormatError(fmt::format("chat template: {}", e.what()));
  }
  return out;
}

}  // namespace hearth::text::jinja
