#include "hearth/serve/http_server.h"

#include <fmt/core.h>
#include "hearth/serve/http_lib.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/serve/metrics.h"
#include "hearth/serve/openai_api.h"
#include "hearth/serve/peer_socket.h"
#include "hearth/text/chat.h"

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

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_json(e));
}

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

json usage_json(const JobOutput& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"total_tokens", o.prompt_tokens + o.completion_tokens}};
}

json finish_json(const std::string& reason) {
  if (reason.empty()) return nullptr;
  return reason;
}

constexpr auto kPoll = std::chrono::milliseconds(100);

}  // namespace

struct Server::Impl {
  Impl(Backend& b, const text::Tokenizer& t, std::string tmpl, ServerOptions o)
      : backend(b),
        tokenizer(t),
        chat_template(std::move(tmpl)),
        opt(std::move(o)),
        scheduler(b, t, metrics, opt.scheduler),
        id_salt(std::random_device{}()) {}

  Backend& backend;
  const text::Tokenizer& tokenizer;
  const std::string chat_template;
  const ServerOptions opt;
  Metrics metrics;
  Scheduler scheduler;
  httplib::Server http;
  int bound_port = -1;
  int listen_fd = -1;  // the listening socket, captured as httplib creates it
  std::atomic<uint64_t> next_id{1};
  const uint64_t id_salt;
  const int64_t created = unix_now();

  std::string new_id(const char* prefix) {
    return fmt::format("{}-{:x}{:06x}", prefix, id_salt & 0xffffffu, next_id.fetch_add(1));
  }

  std::vector<int32_t> chat_prompt(const GenerationRequest& r) const {
    const std::string bos = tokenizer.bos() >= 0 ? tokenizer.piece(tokenizer.bos()) : "";
    const std::string eos = tokenizer.eos() >= 0 ? tokenizer.piece(tokenizer.eos()) : "";
    std::string rendered;
    try {
      rendered = text::render_chat(chat_template, r.messages, true, bos, eos);
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

  std::shared_ptr<Job> make_job(const GenerationRequest& r, std::vector<int32_t> prompt,
                                const char* prefix) {
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
    JobParams p;
    p.prompt = std::move(prompt);
    p.max_tokens = r.max_tokens;
    p.sampling = r.sampling;
    if (!r.seed_given) p.sampling.seed = std::random_device{}();
    p.stop = r.stop;
    p.ignore_eos = r.ignore_eos;
    try {
      text::Sampler check(p.sampling);  // rejects out-of-range combinations early
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "invalid_request_error", {}, "invalid_value");
    }
    auto job = std::make_shared<Job>(new_id(prefix), std::move(p));
    if (!scheduler.submit(job)) {
      metrics.rejected();
      throw ApiError(429, "too many requests are waiting; try again later", "rate_limit_error", {},
                     "queue_full");
    }
    return job;
  }

  // One chunk or final object of a chat or text completion.
  json choice(bool chat, bool stream, const std::string& text, const std::string& reason,
              bool first) const {
    json c{{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_json(reason)}};
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

  void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    const GenerationRequest r =
        chat ? parse_chat_request(req.body) : parse_completion_request(req.body);
    std::vector<int32_t> prompt = chat ? chat_prompt(r) : completion_prompt(r);
    std::shared_ptr<Job> job = make_job(r, std::move(prompt), chat ? "chatcmpl" : "cmpl");
    const std::string peer_ip = req.remote_addr;
    const int peer_port = req.remote_port;
    const int local_port = bound_port;

    if (!r.stream) {
      const int fd = find_connection_fd(peer_ip, peer_port, local_port);
      std::string text;
      JobOutput o;
      while (true) {
        o = job->take(kPoll);
        text += o.text;
        if (o.finished) break;
        if (peer_closed(fd)) {
          job->cancel();
          log::info("serve: client of {} went away; cancelled", job->id());
          res.status = 499;
          return;
        }
      }
      if (o.finish_reason == "error") {
        throw ApiError(500, fmt::format("generation failed: {}", o.error), "server_error", {},
                       "generation_failed");
      }
      json j = envelope(chat, false, job->id());
      j["choices"] = json::array({choice(chat, false, text, o.finish_reason, false)});
      j["usage"] = usage_json(o);
      send_json(res, 200, j);
      return;
    }

    const bool include_usage = r.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, job, chat, include_usage, peer_ip, peer_port, local_port](
                                 size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string s = "data: " + dump(j) + "\n\n";
            return sink.write(s.data(), s.size());
          };
          auto gone = [&] {
            job->cancel();
            log::info("serve: client of {} went away; cancelled", job->id());
            return false;
          };
          const int fd = find_connection_fd(peer_ip, peer_port, local_port);
          bool first = chat;
          if (chat) {
            json j = envelope(true, true, job->id());
            j["choices"] = json::array({choice(true, true, "", "", true)});
            if (!send(j)) return gone();
            first = false;
          }
          while (true) {
            const JobOutput o = job->take(kPoll);
            if (!o.text.empty()) {
              json j = envelope(chat, true, job->id());
              j["choices"] = json::array({choice(chat, true, o.text, "", first)});
              if (!send(j)) return gone();
            }
            if (o.finished) {
              if (o.finish_reason == "error") {
                const json e = error_json(fmt::format("generation failed: {}", o.error),
                                          "server_error", {}, "generation_failed");
                if (!send(e)) return gone();
              } else {
                json j = envelope(chat, true, job->id());
                j["choices"] = json::array({choice(chat, true, "", o.finish_reason, false)});
                if (!send(j)) return gone();
                if (include_usage) {
                  json u = envelope(chat, true, job->id());
                  u["choices"] = json::array();
                  u["usage"] = usage_json(o);
                  if (!send(u)) return gone();
                }
              }
              const std::string done = "data: [DONE]\n\n";
              if (!sink.write(done.data(), done.size())) return gone();
              sink.done();
              return true;
            }
            if (o.text.empty() && peer_closed(fd)) return gone();
          }
        });
  }

  void routes() {
    auto guarded = [this](auto fn) {
      return [this, fn](const httplib::Request& req, httplib::Response& res) {
        try {
          fn(req, res);
        } catch (const ApiError& e) {
          send_error(res, e);
        } catch (const UsageError& e) {
          send_error(res, ApiError(400, e.what()));
        } catch (const std::exception& e) {
          log::warn("serve: {} {}: {}", req.method, req.path, e.what());
          send_error(res, ApiError(500, e.what(), "server_error"));
        }
      };
    };
    http.Post("/v1/chat/completions",
              guarded([this](const auto& req, auto& res) { generate(req, res, true); }));
    http.Post("/v1/completions",
              guarded([this](const auto& req, auto& res) { generate(req, res, false); }));
    http.Get("/v1/models", guarded([this](const auto&, auto& res) {
               json m{{"id", opt.model_id},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "hearth"},
                      {"meta", {{"n_ctx", scheduler.n_ctx()}, {"n_vocab", tokenizer.n_vocab()}}}};
               send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
             }));
    // A ring that lost devices still serves, on fewer: "degraded", with what it lost.
    http.Get("/health", guarded([this](const auto&, auto& res) {
               const RingState st = backend.ring_state();
               json j{{"status", st.devices < st.devices_at_start ? "degraded" : "ok"}};
               if (st.ring) {
                 j["ring"] = {{"devices", st.devices},
                              {"devices_at_start", st.devices_at_start},
                              {"recoveries", st.recoveries},
                              {"rejoins", st.rejoins},
                              {"lost", st.lost}};
               }
               send_json(res, 200, j);
             }));
    http.Get("/metrics", guarded([this](const auto&, auto& res) {
               res.set_content(metrics.render() + ring_metrics(backend.ring_state()),
                               "text/plain; version=0.0.4");
             }));
    http.Post("/tokenize", guarded([this](const auto& req, auto& res) {
                const json j = parse_body(req.body);
                if (!j.contains("content") || !j["content"].is_string()) {
                  throw ApiError(400, "'content' must be a string", "invalid_request_error",
                                 "content", "invalid_value");
                }
                bool add_special = false;
                if (j.contains("add_special")) {
                  if (!j["add_special"].is_boolean()) {
                    throw ApiError(400, "'add_special' must be a boolean", "invalid_request_error",
                                   "add_special", "invalid_value");
                  }
                  add_special = j["add_special"].get<bool>();
                }
                send_json(
                    res, 200,
                    {{"tokens", tokenizer.encode(j["content"].get<std::string>(), add_special)}});
              }));
    http.Post("/detokenize", guarded([this](const auto& req, auto& res) {
                const json j = parse_body(req.body);
                if (!j.contains("tokens") || !j["tokens"].is_array()) {
                  throw ApiError(400, "'tokens' must be a list of token ids",
                                 "invalid_request_error", "tokens", "invalid_value");
                }
                std::vector<int32_t> ids;
                for (const auto& t : j["tokens"]) {
                  if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
                      t.get<int64_t>() >= static_cast<int64_t>(tokenizer.n_vocab())) {
                    throw ApiError(
                        400, fmt::format("'tokens' must hold ids in [0, {})", tokenizer.n_vocab()),
                        "invalid_request_error", "tokens", "invalid_value");
                  }
                  ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
                }
                send_json(res, 200, {{"content", tokenizer.decode(ids)}});
              }));
    http.Post("/v1/cancel", guarded([this](const auto& req, auto& res) {
                const json j = parse_body(req.body);
                if (!j.contains("id") || !j["id"].is_string()) {
                  throw ApiError(400, "'id' must be a string", "invalid_request_error", "id",
                                 "invalid_value");
                }
                const std::string id = j["id"].get<std::string>();
                if (!scheduler.cancel(id)) {
                  throw ApiError(404, fmt::format("no running request has id '{}'", id),
                                 "invalid_request_error", "id", "not_found");
                }
                send_json(res, 200, {{"id", id}, {"cancelled", true}});
              }));

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (opt.api_key.empty() || req.path == "/health")
        return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + opt.api_key) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      send_error(res, ApiError(401, "missing or wrong API key (send 'Authorization: Bearer KEY')",
                               "invalid_request_error", {}, "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    });
    // Errors httplib produces itself (unknown route, body too large, bad request line)
    // get an error object too.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string msg = fmt::format("HTTP {}", res.status);
      std::string code;
      if (res.status == 404) {
        msg = fmt::format("no route {} {}", req.method, req.path);
        code = "not_found";
      } else if (res.status == 413) {
        msg = "the request body is too large";
        code = "payload_too_large";
      }
      res.set_content(dump(error_json(msg, "invalid_request_error", {}, code)), "application/json");
    });
    http.set_socket_options([this](socket_t sock) {
      httplib::default_socket_options(sock);
      listen_fd = sock;
    });
    http.set_payload_max_length(opt.max_body_bytes);
    http.set_read_timeout(opt.read_timeout_s, 0);
    http.set_write_timeout(opt.write_timeout_s, 0);
    // Every streaming client holds an HTTP thread for its whole generation, and waiting
    // clients need a thread to be told 429: size the pool for active + waiting + spare.
    const size_t threads =
        static_cast<size_t>(opt.scheduler.parallel + opt.scheduler.max_queue + 8);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  }
};

Server::Server(Backend& backend, const text::Tokenizer& tokenizer, std::string chat_template,
               ServerOptions options)
    : impl_(std::make_unique<Impl>(backend, tokenizer, std::move(chat_template),
                                   std::move(options))) {
  impl_->routes();
}

Server::~Server() {
  stop();
}

int Server::bind() {
  auto& im = *impl_;
  if (im.opt.port == 0) {
    im.bound_port = im.http.bind_to_any_port(im.opt.host);
  } else {
    im.bound_port = im.http.bind_to_port(im.opt.host, im.opt.port) ? im.opt.port : -1;
  }
  if (im.bound_port <= 0) {
    throw UsageError(fmt::format("cannot listen on {}:{} (address in use or not local?)",
                                 im.opt.host, im.opt.port));
  }
  // The library listens with a backlog of 5: a burst of clients connecting at once would see
  // SYNs dropped and retried a second later. Listening again only raises the backlog.
  if (im.listen_fd >= 0) ::listen(im.listen_fd, SOMAXCONN);
  return im.bound_port;
}

int Server::port() const {
  return impl_->bound_port;
}

void Server::run() {
  impl_->http.listen_after_bind();
}

void Server::stop() {
  impl_->scheduler.cancel_all();
  impl_->http.stop();
}

}  // namespace hearth::serve
