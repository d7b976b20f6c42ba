// Chat templates: the real templates of Llama 2, Llama 3, ChatML, Qwen 2.5 and
// DeepSeek-R1 rendered against expected strings produced by @huggingface/jinja
// (fixtures/text/chat_templates.json), the built-in templates against the same strings,
// and the Jinja subset on its own.
#include "hearth/text/chat.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "hearth/base/error.h"
#include "hearth/text/jinja.h"
#include "hearth/text/vocab.h"

namespace hearth::text {
namespace {

using nlohmann::json;

json fixture() {
  std::ifstream in(std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/text/chat_templates.json");
  return json::parse(in);
}

std::vector<ChatMessage> conversation(const json& fx, const std::string& name) {
  std::vector<ChatMessage> out;
  for (const auto& m : fx.at("conversations").at(name))
    out.push_back({m.at("role"), m.at("content")});
  return out;
}

TEST(ChatTemplate, RealTemplatesMatchReferenceRenderings) {
  const json fx = fixture();
  int rendered = 0, rejected = 0;
  for (const auto& c : fx.at("cases")) {
    const std::string tmpl = fx.at("templates").at(c.at("template").get<std::string>());
    const auto msgs = conversation(fx, c.at("conversation"));
    const std::string label = c.at("template").get<std::string>() + "/" +
                              c.at("conversation").get<std::string>() +
                              (c.at("add_generation_prompt").get<bool>() ? "+gen" : "");
    if (c.contains("expected_error")) {
      try {
        render_chat(tmpl, msgs, c.at("add_generation_prompt"), c.at("bos_token").get<std::string>(),
                    c.at("eos_token").get<std::string>());
        ADD_FAILURE() << label << ": expected an error";
      } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find(c.at("expected_error").get<std::string>()),
                  std::string::npos)
            << label << ": " << e.what();
        ++rejected;
      }
      continue;
    }
    EXPECT_EQ(
        render_chat(tmpl, msgs, c.at("add_generation_prompt"), c.at("bos_token").get<std::string>(),
                    c.at("eos_token").get<std::string>()),
        c.at("expected").get<std::string>())
        << label;
    ++rendered;
  }
  EXPECT_GE(rendered, 30);
  EXPECT_EQ(rejected, 2);
}

// Variables beyond the conversation (chat_template_kwargs), as Qwen 3's enable_thinking:
// renderings equal @huggingface/jinja's with the same variables.
TEST(ChatTemplate, ExtraVariablesReachTheTemplate) {
  const json fx = fixture();
  int checked = 0;
  for (const auto& c : fx.at("kwargs_cases")) {
    const std::string tmpl = fx.at("templates").at(c.at("template").get<std::string>());
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    for (const auto& m : conversation(fx, c.at("conversation")))
      msgs.push_back({{"role", m.role}, {"content", m.content}});
    const auto kwargs = nlohmann::ordered_json::parse(c.at("kwargs").dump());
    EXPECT_EQ(render_chat(tmpl, msgs, nullptr, true, "", "", kwargs), c.at("expected"))
        << c.at("kwargs").dump();
    ++checked;
  }
  EXPECT_EQ(checked, 3);
  // The variables hearth sets cannot be replaced.
  const nlohmann::ordered_json msgs = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_THROW(render_chat("{{ messages }}", msgs, nullptr, true, "", "",
                           nlohmann::ordered_json{{"add_generation_prompt", false}}),
               UsageError);
  EXPECT_THROW(render_chat("x", msgs, nullptr, true, "", "", nlohmann::ordered_json::array()),
               UsageError);
}

TEST(ChatTemplate, BuiltinsMatchTheRealTemplates) {
  const json fx = fixture();
  const std::pair<const char*, const char*> pairs[] = {{"llama2", "llama2"},
                                                       {"llama3", "llama3"},
                                                       {"chatml", "chatml"},
                                                       {"deepseek-r1", "deepseek-r1"}};
  int checked = 0;
  for (const auto& [builtin, real] : pairs) {
    const auto src = builtin_chat_template(builtin);
    ASSERT_TRUE(src.has_value()) << builtin;
    for (const auto& c : fx.at("cases")) {
      if (c.at("template") != real || c.contains("expected_error")) continue;
      EXPECT_EQ(
          render_chat(*src, conversation(fx, c.at("conversation")), c.at("add_generation_prompt"),
                      c.at("bos_token").get<std::string>(), c.at("eos_token").get<std::string>()),
          c.at("expected").get<std::string>())
          << builtin << "/" << c.at("conversation").get<std::string>();
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6 + 8 + 8 + 8);  // llama2 rejects one conversation
  EXPECT_THROW(
      render_chat(*builtin_chat_template("llama2"), {{"user", "a"}, {"user", "b"}}, true, "", ""),
      UsageError);
}

TEST(ChatTemplate, SelectByNameOrFromVocab) {
  VocabData v;
  EXPECT_THROW(select_chat_template("", v), UsageError);
  EXPECT_THROW(select_chat_template("no-such", v), UsageError);
  EXPECT_EQ(select_chat_template("chatml", v), *builtin_chat_template("chatml"));
  v.chat_template = "{{ 1 }}";
  EXPECT_EQ(select_chat_template("", v), "{{ 1 }}");
  EXPECT_EQ(builtin_chat_template_names().size(), 4u);
}

std::string render(const std::string& src, const json& ctx = json::object()) {
  return jinja::Template(src).render(ctx);
}

TEST(Jinja, ExpressionsAndFilters) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 3 }} {{ 7 / 2 }}"),
            "7 3 2 8 3.5");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' + 'c' }}"), "a1None abc");
  EXPECT_EQ(
      render("{{ '  x  ' | trim }}|{{ 'Hi' | upper }}{{ 'Hi' | lower }}|{{ [1,2,3] | length }}"),
      "x|HIhi|3");
  EXPECT_EQ(render("{{ x | tojson }}", {{"x", {{"a", json::array({1, "é"})}}}}),
            R"({"a": [1, "é"]})");
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}",
                   {{"d", {{"a", 1}, {"b", 2}}}}),
            "a=1;b=2;");
  EXPECT_EQ(render("{{ xs[1:] }} {{ xs[-1] }} {{ xs[::-1] }} {{ 'héllo'[1:3] }}",
                   {{"xs", json::array({1, 2, 3})}}),
            "[2, 3] 3 [3, 2, 1] él");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ ' x '.strip() }} {{ 'abc'.startswith('ab') }} "
                   "{{ 'abc'.endswith('x') }} {{ 'aXa'.replace('a', 'b') }}"),
            "['a', 'b', '', 'c'] x True False bXb");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' not in {'k': 1} }} {{ not 0 }}"),
            "True True False True");
  EXPECT_EQ(render("{{ y is defined }} {{ x is none }} {{ x is not none }} {{ 3 is odd }}",
                   {{"x", nullptr}}),
            "False True False True");
  EXPECT_EQ(
      render("{{ 'yes' if x else 'no' }} {{ x or 'd' }} {{ u | default('dd') }}", {{"x", false}}),
      "no d dd");
}

TEST(Jinja, StatementsScopesAndWhitespace) {
  const json ctx = {{"xs", json::array({"a", "b", "c"})}};
  EXPECT_EQ(
      render("{% for x in xs %}{{ loop.index0 }}{{ x }}{% if loop.first %}F{% elif loop.last %}L"
             "{% else %}-{% endif %}{% endfor %}",
             ctx),
      "0aF1b-2cL");
  // A plain set inside a loop does not leak; a namespace carries state out.
  EXPECT_EQ(
      render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for x in xs %}{% set n = n + 1 %}"
             "{% set ns.n = ns.n + 1 %}{% endfor %}{{ n }} {{ ns.n }}",
             ctx),
      "0 3");
  EXPECT_EQ(
      render("{% for x in xs if x != 'b' %}{{ loop.length }}{{ x }}{% else %}none{% endfor %}",
             ctx),
      "2a2c");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  // {%- -%} strips all whitespace; trim_blocks drops the newline after a tag;
  // lstrip_blocks drops indentation before a tag.
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("{% if true %}\n  x\n  {% endif %}\ny\n"), "  x\ny");
  EXPECT_EQ(render("{{- ' a ' -}}  \n {# note #}\n{{ 'b' }}"), " a b");
}

TEST(Jinja, ErrorsNameTheLine) {
  auto message = [](const std::string& src, const json& ctx = json::object()) -> std::string {
    try {
      jinja::Template(src).render(ctx);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message("line1\n{% macro m() %}{% endmacro %}").find("line 2"), std::string::npos);
  EXPECT_NE(message("{% if x %}").find("endif"), std::string::npos);
  EXPECT_NE(message("{{ x | nosuchfilter }}", {{"x", 1}}).find("nosuchfilter"), std::string::npos);
  EXPECT_NE(message("{{ 'a' - 1 }}").find("'-'"), std::string::npos);
  EXPECT_NE(message("{{ 'unterminated }}").find("not closed"), std::string::npos);
  EXPECT_NE(message("{{ u.attr }}").find("undefined"), std::string::npos);
  EXPECT_THROW(render("{{ raise_exception('stop') }}"), UsageError);
}

}  // namespace
}  // namespace hearth::text

namespace hearth::text {
namespace {

// Arithmetic a template in a model file can use to crash or exhaust the server: every case is
// an error naming the problem, within the budgets (16 MiB per value and output, 2 s).
TEST(Jinja, ArithmeticAndSizeAttacksAreErrors) {
  const std::string min = "(-9223372036854775807 - 1)";
  const std::vector<std::string> overflows = {min + " // -1",
                                              "-" + min,
                                              min + " - 1",
                                              "9223372036854775807 + 1",
                                              "4611686018427387904 * 4",
                                              "2 ** 64",
                                              min + " | abs",
                                              "100000000000000000000.0 | int"};
  for (const std::string& expr : overflows) {
    try {
      render("{{ " + expr + " }}");
      ADD_FAILURE() << expr << " rendered";
    } catch (const FormatError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("overflow") != std::string::npos ||
                  what.find("range") != std::string::npos)
          << expr << ": " << what;
    }
  }
  EXPECT_EQ(render("{{ " + min + " % -1 }} {{ -7 // 2 }} {{ 7 % -3 }}"), "0 -4 -2");
  // Size: repetition, replace, concatenation in a loop, indentation; all stopped early.
  for (const std::string& src :
       {std::string("{{ ('x' * 100000) * 20000 }}"),
        std::string("{{ ('x' * 1000000).replace('x', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy') }}"),
        std::string("{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"),
        std::string("{% for i in range(1000000) %}{{ 'x' * 100 }}{% endfor %}"),
        std::string("{{ range(100000000) | length }}")}) {
    EXPECT_THROW(render(src), FormatError) << src;
  }
  // Slices and ranges with steps that would overflow end instead.
  EXPECT_EQ(render("{{ [1, 2, 3][::9223372036854775807] }}"), "[1]");
  EXPECT_EQ(render("{{ range(9223372036854775806, 9223372036854775807, 1000) | list }}"),
            "[9223372036854775806]");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=-5) }}"), "{\"a\": [1]}");
  // An argument of the wrong type (found by jinja_fuzz) is the template's error.
  EXPECT_THROW(render("{{ 'abc'.replace('a', 'b', 'x') }}"), FormatError);
}

TEST(Jinja, HostileTemplatesFailCleanly) {
  // Deep nesting, runaway loops and random mutations of real templates: errors, never
  // crashes or hangs.
  EXPECT_THROW(render("{{ " + std::string(100000, '(')), FormatError);
  EXPECT_THROW(render("{{ " + std::string(5000, '-') + "1 }}"), FormatError);
  EXPECT_THROW(
      render("{% for a in range(2000) %}{% for b in range(2000) %}{% endfor %}{% endfor %}"),
      FormatError);
  const json fx = fixture();
  std::mt19937 rng(11);
  int errors = 0;
  for (const auto& [name, tmpl] : fx.at("templates").items()) {
    for (int k = 0; k < 300; ++k) {
      std::string s = tmpl;
      for (int m = 0; m < 3; ++m) {
        const size_t at = rng() % s.size();
        switch (rng() % 3) {
          case 0:
            s.erase(at, 1 + rng() % 4);
            break;
          case 1:
            s.insert(at, 1, "{}%#-()[]'\"|.~"[rng() % 14]);
            break;
          default:
            s[at] = static_cast<char>(rng());
        }
        if (s.empty()) s = "x";
      }
      try {
        render_chat(s, conversation(fx, "system_multi_turn"), true, "<s>", "</s>");
      } catch (const Error&) {
        ++errors;  // FormatError or UsageError: both fine
      }
    }
  }
  EXPECT_GT(errors, 100);
}

}  // namespace
}  // namespace hearth::text
