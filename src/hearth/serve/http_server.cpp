#include "hearth/serve/http_server.h"

#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <semaphore>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/base/sha256.h"
#include "hearth/serve/http_listener.h"
#include "hearth/serve/metrics.h"
#include "hearth/serve/openai_api.h"
#include "hearth/serve/web_assets.h"
#include "hearth/text/chat.h"
#include "hearth/text/tool_calls.h"
#include "hearth/text/unicode.h"

namespace hearth::serve {

using nlohmann::json;

namespace {

// The ring's state for /metrics (the same facts as /health's "ring"); nothing without a ring.
std::string ring_metrics(const RingState& st) {
  if (!st.ring) return {};
  std::string out;
  auto one = [&](const char* name, const char* type, const char* help, int v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
  };
  one("hearth_ring_devices", "gauge", "Devices in the ring now, head included.", st.devices);
  one("hearth_ring_devices_at_start", "gauge", "Devices in the first ring.", st.devices_at_start);
  one("hearth_ring_degraded", "gauge", "1 while the ring has fewer devices than at start.",
      st.devices < st.devices_at_start ? 1 : 0);
  one("hearth_ring_recoveries_total", "counter",
      "Re-plans after lost devices (the ring re-formed without them).", st.recoveries);
  one("hearth_ring_joins_total", "counter",
      "Re-plans after devices lost earlier or newly announced joined.", st.rejoins);
  return out;
}

// Generated text may end in a partial UTF-8 character; never fail a response for it.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_json(HttpExchange& ex, int status, const json& j) {
  ex.respond(status, "application/json", dump(j));
}

void send_error(HttpExchange& ex, const ApiError& e) {
  HttpHeaders headers;
  if (e.retry_after_s > 0) headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  ex.respond(e.status, "application/json", dump(error_json(e)), headers);
}

// A request the queue refused past its deadline (Job::refuse_busy): 503, try again later.
ApiError busy_error(const JobOutput& o) {
  ApiError e(503, o.error, "server_error", {}, "server_busy");
  e.retry_after_s = 10;
  return e;
}

// The error code of the answers the listener gives itself.
std::string listener_error_code(int status) {
  switch (status) {
    case 408:
      return "request_timeout";
    case 413:
      return "payload_too_large";
    case 414:
      return "uri_too_long";
    case 415:
      return "unsupported_encoding";
    case 431:
      return "headers_too_large";
    case 503:
      return "server_busy";
    default:
      return "bad_request";
  }
}

// 128 random bits: a request's id is what lets a client cancel it, so it must not be guessable.
std::string random_hex128() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

// Compares the Authorization header with the expected one in time that does not depend on
// where they differ (both are hashed first, so neither does their length).
bool same_secret(std::string_view given, std::string_view expected) {
  const auto a = sha256(as_bytes(given));
  const auto b = sha256(as_bytes(expected));
  unsigned diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ b[i]);
  return diff == 0;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

json usage_json(const JobOutput& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"total_tokens", o.prompt_tokens + o.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", o.cached_tokens}}},
          // Speculative decoding's drafts, in the fields OpenAI uses for predicted outputs.
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", o.accepted},
            {"rejected_prediction_tokens", o.drafted - o.accepted}}}};
}

json finish_json(const std::string& reason) {
  if (reason.empty()) return nullptr;
  return reason;
}

constexpr auto kPoll = std::chrono::milliseconds(100);

// The pages hold no secrets (the API key is asked for by the page and kept in the browser), so
// they need no key; they load nothing from elsewhere and may not be framed.
const HttpHeaders kPageHeaders = {
    {"Content-Security-Policy",
     "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
     "form-action 'self'; frame-ancestors 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"Cache-Control", "no-cache"}};

// /cluster/events streams hold a handler thread each: a few viewers at once.
constexpr int kMaxClusterViewers = 4;

// An exchange whose answers all carry some more headers (an allowed cross-origin request's
// CORS headers), whichever handler answers.
class HeaderedExchange : public HttpExchange {
 public:
  HeaderedExchange(HttpExchange& inner, HttpHeaders extra)
      : inner_(inner), extra_(std::move(extra)) {}
  const HttpRequest& request() const override { return inner_.request(); }
  const std::string& remote_addr() const override { return inner_.remote_addr(); }
  void respond(int status, std::string_view content_type, std::string_view body,
               const HttpHeaders& headers) override {
    inner_.respond(status, content_type, body, with_extra(headers));
  }
  bool begin_stream(int status, std::string_view content_type, const HttpHeaders& headers,
                    std::string probe) override {
    return inner_.begin_stream(status, content_type, with_extra(headers), std::move(probe));
  }
  bool write(std::string_view data) override { return inner_.write(data); }
  void end_stream() override { inner_.end_stream(); }
  bool client_gone() override { return inner_.client_gone(); }
  bool responded() const override { return inner_.responded(); }

 private:
  HttpHeaders with_extra(const HttpHeaders& h) const {
    HttpHeaders all = h;
    all.insert(all.end(), extra_.begin(), extra_.end());
    return all;
  }
  HttpExchange& inner_;
  HttpHeaders extra_;
};

// Bodies from this size on are parsed a few at a time (their DOM can take ~10x their size).
constexpr size_t kLargeBody = 256 << 10;

// Hands memory freed by a large request back to the system: glibc keeps it in the handler
// thread's arena otherwise, and RSS would only ever grow with the largest bodies seen.
void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace

struct Server::Impl {
  Impl(head::LogitsSource& src, DeviceStatus& dev, const text::Tokenizer& t, std::string tmpl,
       ServerOptions o)
      : devices(dev),
        tokenizer(t),
        chat_template(std::move(tmpl)),
        tool_format(text::detect_tool_format(chat_template)),
        opt(std::move(o)),
        scheduler(src, dev, t, metrics, opt.scheduler),
        listener(listener_options(opt), [this](HttpExchange& ex) { handle(ex); }) {}

  DeviceStatus& devices;
  const text::Tokenizer& tokenizer;
  const std::string chat_template;
  const text::ToolFormat tool_format;  // how this model's template calls tools
  const ServerOptions opt;
  Metrics metrics;
  Scheduler scheduler;
  HttpListener listener;
  std::counting_semaphore<2> large_parses{2};
  std::atomic<int> cluster_viewers{0};
  std::atomic<bool> stopping{false};
  int bound_port = -1;
  const int64_t created = unix_now();

  static ListenerOptions listener_options(const ServerOptions& o) {
    ListenerOptions lo;
    lo.host = o.host;
    lo.port = o.port;
    lo.limits.max_body = o.max_body_bytes;
    lo.max_buffered_bytes = std::max<size_t>(64 << 20, 2 * o.max_body_bytes);
    lo.request_timeout_s = o.read_timeout_s;
    lo.keep_alive_timeout_s = o.read_timeout_s;
    lo.write_timeout_s = o.write_timeout_s;
    lo.max_connections = o.max_connections;
    // Every streaming client holds a handler thread for its whole generation, and waiting
    // clients need a thread to be told 429: size the pool for active + waiting + spare.
    lo.threads = static_cast<size_t>(o.scheduler.parallel + o.scheduler.max_queue + 8);
    lo.error_body = [](int status, const std::string& message) {
      return dump(error_json(message, "invalid_request_error", {}, listener_error_code(status)));
    };
    return lo;
  }

  static std::string new_id(const char* prefix) {
    return fmt::format("{}-{}", prefix, random_hex128());
  }

  std::vector<int32_t> chat_prompt(const GenerationRequest& r) const {
    const std::string bos = tokenizer.bos() >= 0 ? tokenizer.piece(tokenizer.bos()) : "";
    const std::string eos = tokenizer.eos() >= 0 ? tokenizer.piece(tokenizer.eos()) : "";
    std::string rendered;
    try {
      rendered =
          text::render_chat(chat_template, r.messages, r.tools, true, bos, eos, r.template_kwargs);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("the chat template rejected the messages: {}", e.what()),
                     "invalid_request_error", "messages", "invalid_value");
    }
    std::vector<int32_t> ids =
        tokenizer.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
    if (tokenizer.vocab().add_bos && tokenizer.bos() >= 0 &&
        (ids.empty() || ids[0] != tokenizer.bos())) {
      ids.insert(ids.begin(), tokenizer.bos());
    }
    return ids;
  }

  // Tools need a template that knows how to call them; a required call is held to the
  // format by a grammar over the tools' parameter schemas.
  void prepare_tools(GenerationRequest& r) const {
    if (r.tools.is_null()) return;
    if (tool_format == text::ToolFormat::kNone) {
      throw ApiError(400,
                     "'tools': this model's chat template has no tool-call format hearth knows "
                     "(Llama 3.1+ JSON calls, or Qwen 2.5 / Hermes <tool_call> blocks)",
                     "invalid_request_error", "tools", "unsupported_parameter");
    }
    if (!r.tool_required) return;
    try {
      r.grammar = std::make_shared<const text::Grammar>(
          text::parse_grammar(text::tool_call_grammar(tool_format, r.tools, r.forced_tool)));
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("'tools': {}", e.what()), "invalid_request_error", "tools",
                     "invalid_value");
    }
  }

  // choices[i].message.tool_calls / delta.tool_calls: OpenAI's form, with fresh ids.
  static json tool_calls_json(const std::vector<text::ToolCall>& calls, bool stream) {
    json out = json::array();
    for (size_t k = 0; k < calls.size(); ++k) {
      json c{{"id", "call_" + random_hex128().substr(0, 24)},
             {"type", "function"},
             {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}};
      if (stream) c["index"] = k;
      out.push_back(std::move(c));
    }
    return out;
  }

  std::vector<int32_t> completion_prompt(const GenerationRequest& r) const {
    std::vector<int32_t> ids = r.prompt_ids;
    if (!ids.empty()) {
      for (int32_t id : ids) {
        if (id >= static_cast<int32_t>(tokenizer.n_vocab())) {
          throw ApiError(400,
                         fmt::format("prompt token id {} is outside the vocabulary of {}", id,
                                     tokenizer.n_vocab()),
                         "invalid_request_error", "prompt", "invalid_value");
        }
      }
      return ids;
    }
    ids = tokenizer.encode(r.prompt, /*add_special=*/true);
    if (ids.empty() && tokenizer.bos() >= 0) ids = {tokenizer.bos()};
    if (ids.empty())
      throw ApiError(400, "'prompt' has no tokens", "invalid_request_error", "prompt");
    return ids;
  }

  // The request's jobs, one per choice, submitted together (or none: 429). Choice i > 0 runs
  // under "<id>#i" and its own seed (seed + i when the client gave one).
  std::vector<std::shared_ptr<Job>> make_jobs(const GenerationRequest& r,
                                              std::vector<int32_t> prompt, const char* prefix) {
    if (!r.model.empty() && r.model != opt.model_id) {
      throw ApiError(404,
                     fmt::format("the model '{}' does not exist; this server serves '{}'", r.model,
                                 opt.model_id),
                     "invalid_request_error", "model", "model_not_found");
    }
    const int64_t n_ctx = scheduler.n_ctx();
    if (static_cast<int64_t>(prompt.size()) + 1 > n_ctx) {
      throw ApiError(400,
                     fmt::format("the prompt has {} tokens; this model's context is {} tokens "
                                 "and at least one must remain for the reply",
                                 prompt.size(), n_ctx),
                     "invalid_request_error", "messages", "context_length_exceeded");
    }
    for (const auto& [id, bias] : r.sampling.logit_bias) {
      if (static_cast<size_t>(id) >= tokenizer.n_vocab()) {
        throw ApiError(400,
                       fmt::format("'logit_bias' names token {}, outside the vocabulary of {}", id,
                                   tokenizer.n_vocab()),
                       "invalid_request_error", "logit_bias", "invalid_value");
      }
    }
    JobParams p;
    p.prompt = std::move(prompt);
    p.max_tokens = r.max_tokens;
    p.sampling = r.sampling;
    if (!r.seed_given) p.sampling.seed = std::random_device{}();
    p.stop = r.stop;
    p.ignore_eos = r.ignore_eos;
    p.logprobs = r.logprobs;
    p.grammar = r.grammar;
    try {
      text::Sampler check(p.sampling);  // rejects out-of-range combinations early
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "invalid_request_error", {}, "invalid_value");
    }
    const std::string id = new_id(prefix);
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < r.n; ++i) {
      JobParams pi = p;
      pi.sampling.seed = p.sampling.seed + static_cast<uint64_t>(i);
      auto job = std::make_shared<Job>(i == 0 ? id : fmt::format("{}#{}", id, i), std::move(pi));
      if (!scheduler.submit(job)) {
        for (auto& j : jobs) j->cancel();
        metrics.rejected();
        throw ApiError(429, "too many requests are waiting; try again later", "rate_limit_error",
                       {}, "queue_full");
      }
      jobs.push_back(std::move(job));
    }
    return jobs;
  }

  // A token as OpenAI reports it: its text and its bytes (a token may hold part of a UTF-8
  // character, so the text alone cannot say).
  json token_json(int32_t id, float logprob) const {
    const std::string bytes = tokenizer.token_to_bytes(id, /*special=*/true);
    json b = json::array();
    for (unsigned char c : bytes) b.push_back(c);
    return {{"token", token_text(id)}, {"logprob", logprob}, {"bytes", std::move(b)}};
  }

  // A token's text; one that is not whole UTF-8 (part of a character) is written as OpenAI
  // does, "bytes:\\xe3\\x81".
  std::string token_text(int32_t id) const {
    const std::string bytes = tokenizer.token_to_bytes(id, /*special=*/true);
    bool valid = true;
    for (const auto& cp : text::decode_utf8(bytes)) valid = valid && !cp.raw;
    if (valid) return bytes;
    std::string out = "bytes:";
    for (unsigned char c : bytes) out += fmt::format("\\x{:02x}", c);
    return out;
  }

  // choices[i].logprobs for these tokens: chat's {"content": [...]}, or the completions form
  // {tokens, token_logprobs, top_logprobs, text_offset} (offsets from `offset`, advanced).
  json logprobs_json(bool chat, const std::vector<text::TokenLogprobs>& lps, size_t& offset) const {
    if (chat) {
      json content = json::array();
      for (const auto& lp : lps) {
        json e = token_json(lp.id, lp.logprob);
        json top = json::array();
        for (const auto& [id, l] : lp.top) top.push_back(token_json(id, l));
        e["top_logprobs"] = std::move(top);
        content.push_back(std::move(e));
      }
      return {{"content", std::move(content)}, {"refusal", nullptr}};
    }
    json tokens = json::array(), token_lps = json::array(), tops = json::array(),
         offsets = json::array();
    for (const auto& lp : lps) {
      const std::string bytes = tokenizer.token_to_bytes(lp.id, true);
      tokens.push_back(token_text(lp.id));
      token_lps.push_back(lp.logprob);
      json top = json::object();
      for (const auto& [id, l] : lp.top) top[token_text(id)] = l;
      tops.push_back(std::move(top));
      offsets.push_back(offset);
      offset += bytes.size();
    }
    return {{"tokens", std::move(tokens)},
            {"token_logprobs", std::move(token_lps)},
            {"top_logprobs", std::move(tops)},
            {"text_offset", std::move(offsets)}};
  }

  // One chunk or final object of a chat or text completion.
  json choice(bool chat, bool stream, int index, const std::string& text, const std::string& reason,
              bool first, json logprobs = nullptr) const {
    json c{{"index", index},
           {"logprobs", std::move(logprobs)},
           {"finish_reason", finish_json(reason)}};
    if (!chat) {
      c["text"] = text;
    } else if (stream) {
      json delta = json::object();
      if (first) delta["role"] = "assistant";
      if (!text.empty() || first) delta["content"] = text;
      c["delta"] = delta;
    } else {
      c["message"] = {{"role", "assistant"}, {"content", text}};
    }
    return c;
  }

  json envelope(bool chat, bool stream, const std::string& id) const {
    return {{"id", id},
            {"object",
             chat ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
            {"created", unix_now()},
            {"model", opt.model_id}};
  }

  // parse(body) under the bound on large bodies parsed at once.
  template <typename Parse>
  auto parse_gated(const std::string& body, Parse parse) {
    if (body.size() < kLargeBody) return parse(body);
    large_parses.acquire();
    struct Release {
      Impl& im;
      ~Release() {
        im.large_parses.release();
        trim_heap();
      }
    } release{*this};
    return parse(body);
  }

  // The JSON body of a request to a small endpoint (tokenize, detokenize, cancel).
  json small_body(HttpExchange& ex) {
    return parse_gated(ex.request().body, [](const std::string& b) { return parse_body(b); });
  }

  // The 400 of a body field with a value it must not have; `must` says what it must be.
  static ApiError invalid_field(const std::string& field, std::string_view must) {
    return ApiError(400, fmt::format("'{}' must be {}", field, must), "invalid_request_error",
                    field, "invalid_value");
  }

  // Runs a completion (its n choices) for the client; cancels it as soon as the client is gone.
  void generate(HttpExchange& ex, bool chat) {
    const HttpRequest& req = ex.request();
    GenerationRequest r = parse_gated(req.body, [chat](const std::string& b) {
      return chat ? parse_chat_request(b) : parse_completion_request(b);
    });
    prepare_tools(r);
    const bool tools = !r.tools.is_null();
    std::vector<int32_t> prompt = chat ? chat_prompt(r) : completion_prompt(r);
    const std::vector<std::shared_ptr<Job>> jobs =
        make_jobs(r, std::move(prompt), chat ? "chatcmpl" : "cmpl");
    const std::string& id = jobs.front()->id();
    const bool with_logprobs = r.logprobs >= 0;
    auto gone = [&] {
      for (const auto& job : jobs) job->cancel();
      log::info("serve: client of {} went away; cancelled", id);
    };
    struct Choice {
      std::string text;
      std::vector<text::TokenLogprobs> logprobs;
      JobOutput last;     // the final output (finish reason, counts)
      size_t offset = 0;  // completions' text_offset so far
      size_t sent = 0;    // with tools, bytes of text streamed (the rest may be a call)
      bool finished = false;
    };
    std::vector<Choice> choices(jobs.size());
    const auto poll =
        std::max(std::chrono::milliseconds(10), kPoll / static_cast<int>(jobs.size()));
    auto usage = [&] {
      JobOutput total;
      total.prompt_tokens = choices.front().last.prompt_tokens;
      total.cached_tokens = choices.front().last.cached_tokens;
      for (const auto& c : choices) {
        total.completion_tokens += c.last.completion_tokens;
        total.drafted += c.last.drafted;
        total.accepted += c.last.accepted;
      }
      return usage_json(total);
    };
    auto failure = [&]() -> const JobOutput* {
      for (const auto& c : choices) {
        if (c.last.finish_reason == "error") return &c.last;
      }
      return nullptr;
    };

    if (!r.stream) {
      size_t left = jobs.size();
      while (left > 0) {
        for (size_t i = 0; i < jobs.size(); ++i) {
          Choice& c = choices[i];
          if (c.finished) continue;
          JobOutput o = jobs[i]->take(poll);
          c.text += o.text;
          for (auto& lp : o.logprobs) c.logprobs.push_back(std::move(lp));
          if (o.finished) {
            c.last = std::move(o);
            c.finished = true;
            --left;
          }
        }
        if (left > 0 && ex.client_gone()) return gone();
      }
      if (const JobOutput* o = failure()) {
        if (o->busy) throw busy_error(*o);
        throw ApiError(500, fmt::format("generation failed: {}", o->error), "server_error", {},
                       "generation_failed");
      }
      json j = envelope(chat, false, id);
      j["choices"] = json::array();
      for (size_t i = 0; i < choices.size(); ++i) {
        Choice& c = choices[i];
        json lp = with_logprobs ? logprobs_json(chat, c.logprobs, c.offset) : json();
        if (!tools) {
          j["choices"].push_back(choice(chat, false, static_cast<int>(i), c.text,
                                        c.last.finish_reason, false, std::move(lp)));
          continue;
        }
        const text::ParsedReply reply = text::parse_tool_calls(tool_format, c.text);
        json ch =
            choice(chat, false, static_cast<int>(i), reply.content,
                   reply.calls.empty() ? c.last.finish_reason : "tool_calls", false, std::move(lp));
        if (!reply.calls.empty()) {
          if (reply.content.empty()) ch["message"]["content"] = nullptr;
          ch["message"]["tool_calls"] = tool_calls_json(reply.calls, false);
        }
        j["choices"].push_back(std::move(ch));
      }
      j["usage"] = usage();
      send_json(ex, 200, j);
      return;
    }

    auto send = [&](const json& j) { return ex.write("data: " + dump(j) + "\n\n"); };
    // The stream (and its 200) starts once every choice left the queue, so that one the queue
    // refuses is still answered with a 503.
    for (const auto& job : jobs) {
      while (!job->wait_started(kPoll)) {
        if (ex.client_gone()) return gone();
      }
    }
    for (const auto& job : jobs) {
      if (const auto refused = job->refused()) {
        for (const auto& j : jobs) j->cancel();
        throw busy_error(*refused);
      }
    }
    // An SSE comment: clients ignore it; it tells a half-closed client from a closed one.
    if (!ex.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}, ":\n\n")) {
      return gone();
    }
    if (chat) {
      json j = envelope(true, true, id);
      j["choices"] = json::array();
      for (size_t i = 0; i < jobs.size(); ++i) {
        j["choices"].push_back(choice(true, true, static_cast<int>(i), "", "", true));
      }
      if (!send(j)) return gone();
    }
    size_t left = jobs.size();
    while (left > 0) {
      bool quiet = true;
      for (size_t i = 0; i < jobs.size(); ++i) {
        Choice& c = choices[i];
        if (c.finished) continue;
        JobOutput o = jobs[i]->take(poll);
        std::string piece = std::move(o.text);
        if (tools) {
          // Text that may still become a call is held until the reply ends.
          c.text += piece;
          const size_t ready = text::tool_text_prefix(tool_format, c.text);
          piece = ready > c.sent ? c.text.substr(c.sent, ready - c.sent) : std::string();
          c.sent = std::max(c.sent, ready);
        }
        if (!piece.empty() || !o.logprobs.empty()) {
          quiet = false;
          json j = envelope(chat, true, id);
          j["choices"] = json::array(
              {choice(chat, true, static_cast<int>(i), piece, "", false,
                      with_logprobs ? logprobs_json(chat, o.logprobs, c.offset) : json())});
          if (!send(j)) return gone();
        }
        if (o.finished) {
          c.last = std::move(o);
          c.finished = true;
          --left;
          if (c.last.finish_reason == "error") continue;
          std::string reason = c.last.finish_reason;
          if (tools) {
            // The held rest: text, then the calls, one chunk each.
            const text::ParsedReply reply = text::parse_tool_calls(tool_format, c.text);
            if (reply.content.size() > c.sent) {
              json j = envelope(chat, true, id);
              j["choices"] = json::array({choice(chat, true, static_cast<int>(i),
                                                 reply.content.substr(c.sent), "", false)});
              if (!send(j)) return gone();
            }
            if (!reply.calls.empty()) {
              reason = "tool_calls";
              json j = envelope(chat, true, id);
              json ch = choice(chat, true, static_cast<int>(i), "", "", false);
              ch["delta"]["tool_calls"] = tool_calls_json(reply.calls, true);
              j["choices"] = json::array({std::move(ch)});
              if (!send(j)) return gone();
            }
          }
          json j = envelope(chat, true, id);
          j["choices"] = json::array({choice(chat, true, static_cast<int>(i), "", reason, false)});
          if (!send(j)) return gone();
        }
      }
      if (left > 0 && quiet && ex.client_gone()) return gone();
    }
    if (const JobOutput* o = failure()) {
      const json e = error_json(fmt::format("generation failed: {}", o->error), "server_error", {},
                                "generation_failed");
      if (!send(e)) return gone();
    } else if (r.include_usage) {
      json u = envelope(chat, true, id);
      u["choices"] = json::array();
      u["usage"] = usage();
      if (!send(u)) return gone();
    }
    if (!ex.write("data: [DONE]\n\n")) return gone();
    ex.end_stream();
  }

  void models(HttpExchange& ex) {
    json m{{"id", opt.model_id},
           {"object", "model"},
           {"created", created},
           {"owned_by", "hearth"},
           {"meta", {{"n_ctx", scheduler.n_ctx()}, {"n_vocab", tokenizer.n_vocab()}}}};
    send_json(ex, 200, {{"object", "list"}, {"data", json::array({m})}});
  }

  json cluster_snapshot(double tokens_per_s) const {
    return cluster_json(opt.model_id, metrics.snapshot(), devices.ring_state(), opt.plan,
                        tokens_per_s);
  }

  // The /cluster page's live feed: a snapshot now, then one a second until the client leaves.
  void cluster_events(HttpExchange& ex) {
    if (cluster_viewers.fetch_add(1) >= kMaxClusterViewers) {
      --cluster_viewers;
      throw ApiError(429, fmt::format("{} cluster views are open; close one", kMaxClusterViewers),
                     "rate_limit_error", {}, "too_many_viewers");
    }
    struct Leave {
      std::atomic<int>& n;
      ~Leave() { --n; }
    } leave{cluster_viewers};
    if (!ex.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}, ":\n\n")) {
      return;
    }
    using clock = std::chrono::steady_clock;
    uint64_t tokens = metrics.snapshot().generated_tokens;
    auto at = clock::now();
    double rate = 0;
    while (!stopping) {
      if (!ex.write("data: " + dump(cluster_snapshot(rate)) + "\n\n")) return;
      for (int i = 0; i < 10 && !stopping; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (ex.client_gone()) return;
      const uint64_t now_tokens = metrics.snapshot().generated_tokens;
      const auto now = clock::now();
      rate = static_cast<double>(now_tokens - tokens) /
             std::max(1e-3, std::chrono::duration<double>(now - at).count());
      tokens = now_tokens;
      at = now;
    }
    ex.end_stream();
  }

  // A ring that lost devices still serves, on fewer: "degraded", with what it lost.
  void health(HttpExchange& ex) {
    const RingState st = devices.ring_state();
    json j{{"status", st.devices < st.devices_at_start ? "degraded" : "ok"}};
    if (st.ring) {
      j["ring"] = {{"devices", st.devices},
                   {"devices_at_start", st.devices_at_start},
                   {"recoveries", st.recoveries},
                   {"rejoins", st.rejoins},
                   {"lost", st.lost}};
    }
    send_json(ex, 200, j);
  }

  void tokenize(HttpExchange& ex) {
    const json j = small_body(ex);
    if (!j.contains("content") || !j["content"].is_string()) {
      throw invalid_field("content", "a string");
    }
    bool add_special = false;
    if (j.contains("add_special")) {
      if (!j["add_special"].is_boolean()) throw invalid_field("add_special", "a boolean");
      add_special = j["add_special"].get<bool>();
    }
    send_json(ex, 200,
              {{"tokens", tokenizer.encode(j["content"].get<std::string>(), add_special)}});
  }

  void detokenize(HttpExchange& ex) {
    const json j = small_body(ex);
    if (!j.contains("tokens") || !j["tokens"].is_array()) {
      throw invalid_field("tokens", "a list of token ids");
    }
    std::vector<int32_t> ids;
    for (const auto& t : j["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= static_cast<int64_t>(tokenizer.n_vocab())) {
        throw ApiError(400, fmt::format("'tokens' must hold ids in [0, {})", tokenizer.n_vocab()),
                       "invalid_request_error", "tokens", "invalid_value");
      }
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    send_json(ex, 200, {{"content", tokenizer.decode(ids)}});
  }

  // Only the full id cancels: ids carry 128 random bits, so only the client that was given
  // one (its stream's or response's "id") can name it.
  void cancel(HttpExchange& ex) {
    const json j = small_body(ex);
    if (!j.contains("id") || !j["id"].is_string()) throw invalid_field("id", "a string");
    const std::string id = j["id"].get<std::string>();
    // A request's further choices run under "<id>#i".
    bool any = false;
    for (int i = 0; i < kMaxChoices; ++i) {
      any = scheduler.cancel(i == 0 ? id : fmt::format("{}#{}", id, i)) || any;
    }
    if (!any) {
      throw ApiError(404, "no running request has that id", "invalid_request_error", "id",
                     "not_found");
    }
    send_json(ex, 200, {{"id", id}, {"cancelled", true}});
  }

  void handle(HttpExchange& raw) {
    const HttpRequest& req = raw.request();
    // Browsers say where a request's page came from; pages of other origins get nothing
    // unless --cors lets them in.
    const std::string* origin = req.header("origin");
    HttpHeaders cors;
    switch (check_origin(origin, req.header("host"), opt.cors_origins)) {
      case OriginCheck::kRefused:
        return send_error(
            raw, ApiError(403,
                          fmt::format("a request from a page of '{}' is refused; allow that "
                                      "origin with --cors",
                                      origin->substr(0, 128)),
                          "invalid_request_error", {}, "cross_origin_refused"));
      case OriginCheck::kAllowed:
        cors = {{"Access-Control-Allow-Origin", *origin}, {"Vary", "Origin"}};
        if (req.method == "OPTIONS") {  // preflight
          HttpHeaders h = cors;
          h.insert(h.end(), {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                             {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                             {"Access-Control-Max-Age", "600"}});
          return raw.respond(204, "text/plain", "", h);
        }
        break;
      case OriginCheck::kNone:
      case OriginCheck::kSame:
        break;
    }
    HeaderedExchange ex(raw, std::move(cors));
    WebPage page;
    const bool is_page = find_web_page(req.path, page);
    try {
      if (!opt.api_key.empty() && req.path != "/health" && !is_page) {
        const std::string* auth = req.header("authorization");
        if (!auth || !same_secret(*auth, "Bearer " + opt.api_key)) {
          throw ApiError(401, "missing or wrong API key (send 'Authorization: Bearer KEY')",
                         "invalid_request_error", {}, "invalid_api_key");
        }
      }
      route(ex);
    } catch (const ApiError& e) {
      send_error(ex, e);
    } catch (const UsageError& e) {
      send_error(ex, ApiError(400, e.what()));
    } catch (const std::exception& e) {
      log::warn("serve: {} {}: {}", req.method, req.path, e.what());
      send_error(ex, ApiError(500, e.what(), "server_error"));
    }
  }

  void route(HttpExchange& ex) {
    const HttpRequest& req = ex.request();
    const bool get = req.method == "GET" || req.method == "HEAD";
    const bool post = req.method == "POST";
    auto wrong_method = [&](const char* allowed) {
      json e = error_json(
          fmt::format("{} takes {} requests, not {}", req.path, allowed, req.method.substr(0, 16)),
          "invalid_request_error", {}, "method_not_allowed");
      ex.respond(405, "application/json", dump(e), {{"Allow", allowed}});
    };
    if (req.path == "/v1/chat/completions" || req.path == "/v1/completions") {
      if (!post) return wrong_method("POST");
      return generate(ex, req.path == "/v1/chat/completions");
    }
    if (req.path == "/tokenize" || req.path == "/detokenize" || req.path == "/v1/cancel") {
      if (!post) return wrong_method("POST");
      if (req.path == "/tokenize") return tokenize(ex);
      if (req.path == "/detokenize") return detokenize(ex);
      return cancel(ex);
    }
    WebPage page;
    if (find_web_page(req.path, page)) {
      if (!get) return wrong_method("GET");
      return ex.respond(200, page.content_type, page.body, kPageHeaders);
    }
    if (req.path == "/v1/cluster" || req.path == "/v1/cluster/events") {
      if (!get) return wrong_method("GET");
      if (req.path == "/v1/cluster") return send_json(ex, 200, cluster_snapshot(0));
      return cluster_events(ex);
    }
    if (req.path == "/v1/models" || req.path == "/health" || req.path == "/metrics") {
      if (!get) return wrong_method("GET");
      if (req.path == "/v1/models") return models(ex);
      if (req.path == "/health") return health(ex);
      return ex.respond(200, "text/plain; version=0.0.4",
                        metrics.render() + ring_metrics(devices.ring_state()));
    }
    throw ApiError(404,
                   fmt::format("no route {} {}", req.method.substr(0, 16), req.path.substr(0, 256)),
                   "invalid_request_error", {}, "not_found");
  }
};

Server::Server(head::LogitsSource& source, DeviceStatus& devices, const text::Tokenizer& tokenizer,
               std::string chat_template, ServerOptions options)
    : impl_(std::make_unique<Impl>(source, devices, tokenizer, std::move(chat_template),
                                   std::move(options))) {}

Server::~Server() {
  stop();
}

int Server::bind() {
  auto& im = *impl_;
  im.bound_port = im.listener.bind();
  if (im.opt.api_key.empty() && !is_loopback_host(im.opt.host)) {
    log::warn(
        "serve: listening on {} without --api-key: anyone who can reach this address can "
        "use the model; set --api-key KEY",
        im.opt.host);
  }
  return im.bound_port;
}

int Server::port() const {
  return impl_->bound_port;
}

void Server::run() {
  impl_->listener.run();
}

void Server::stop() {
  impl_->stopping = true;
  impl_->scheduler.cancel_all();
  impl_->listener.stop();
}

}  // namespace hearth::serve
