// The OpenAI-compatible HTTP front end (cpp-httplib): routes, authentication, limits, and
// the bridge between HTTP threads and the scheduler thread.
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions (both with SSE streaming),
// GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize, POST /detokenize,
// POST /v1/cancel. Errors are OpenAI error objects {"error": {message, type, param, code}}.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "hearth/serve/backend.h"
#include "hearth/serve/scheduler.h"
#include "hearth/text/tokenizer.h"

namespace hearth::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (see Server::port())
  std::string api_key;              // non-empty: every request but /health needs "Bearer KEY"
  std::string model_id;             // the one model name /v1/models lists and requests may name
  size_t max_body_bytes = 1 << 22;  // larger bodies get 413
  int read_timeout_s = 15;          // a client that sends nothing for this long is dropped
  int write_timeout_s = 30;
  SchedulerOptions scheduler;
};

class Server {
 public:
  // `backend` and `tokenizer` must outlive the server; `chat_template` is Jinja source.
  Server(Backend& backend, const text::Tokenizer& tokenizer, std::string chat_template,
         ServerOptions options);
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
