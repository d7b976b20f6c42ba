// The OpenAI-compatible HTTP front end: routes, authentication, and the bridge between
// handler threads and the scheduler thread (connections and HTTP limits: http_listener.h).
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions (both with SSE streaming),
// GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize, POST /detokenize,
// POST /v1/cancel. Errors are OpenAI error objects {"error": {message, type, param, code}}.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "hearth/head/logits_source.h"
#include "hearth/serve/device_status.h"
#include "hearth/serve/scheduler.h"
#include "hearth/serve/web_api.h"
#include "hearth/text/tokenizer.h"

namespace hearth::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (see Server::port())
  std::string api_key;              // non-empty: every request but /health needs "Bearer KEY"
  std::string model_id;             // the one model name /v1/models lists and requests may name
  size_t max_body_bytes = 1 << 22;  // larger bodies (also once decompressed) get 413
  int read_timeout_s = 15;          // a request must arrive whole this long after its first byte
  int write_timeout_s = 30;         // a client that reads nothing for this long is dropped
  size_t max_connections = 512;     // open at once; past it the longest-waiting one is dropped
  std::vector<std::string> cors_origins;  // other origins whose pages may call the API (--cors)
  PlanFacts plan;                         // what the plan predicted, for the /cluster page
  SchedulerOptions scheduler;
};

class Server {
 public:
  // `source`, `devices` and `tokenizer` must outlive the server; `chat_template` is Jinja
  // source.
  Server(head::LogitsSource& source, DeviceStatus& devices, const text::Tokenizer& tokenizer,
         std::string chat_template, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket (UsageError naming host:port on failure); returns the port.
  int bind();
  int port() const;
  // Serves until stop() (from another thread or a signal watcher).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::serve
