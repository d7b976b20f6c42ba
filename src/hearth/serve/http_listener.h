// The server's own HTTP/1.1 connection handling: one thread reads requests off every
// connection at once (poll), a pool of handler threads answers complete ones.
//
// Why not a library: a stranger must not be able to hold what others need. Here a connection
// costs a file descriptor and at most the parser's bounded buffer while its request arrives;
// a request must arrive whole within `request_timeout_s`, a full table drops the connection
// that has been reading longest, and only complete requests reach a handler thread, so slow or
// half-sent requests never take the threads that /health and real clients need.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hearth/serve/http_request.h"

namespace hearth::serve {

struct ListenerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  HttpLimits limits;
  int request_timeout_s = 15;     // from a request's first byte to its last: 408 after
  int keep_alive_timeout_s = 15;  // an idle connection between requests is closed after
  int write_timeout_s = 30;       // a client that reads nothing for this long is dropped
  size_t max_connections = 512;   // open at once; past it the longest-reading one is dropped
  // Request bytes held by all connections still reading theirs; past it, bodies wait (their
  // request deadline still runs), so many large bodies at once cannot exhaust memory.
  size_t max_buffered_bytes = 64 << 20;
  size_t threads = 16;  // handler threads (each answer, or stream, holds one)
  // The body of the errors the listener answers itself (malformed or slow requests), as
  // application/json; by default {"error": message}.
  std::function<std::string(int status, const std::string& message)> error_body;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// One request and its answer, on a handler thread. Either respond() once, or begin_stream(),
// write() chunks and end_stream().
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  virtual const std::string& remote_addr() const = 0;

  virtual void respond(int status, std::string_view content_type, std::string_view body,
                       const HttpHeaders& headers = {}) = 0;

  // Streamed answer (chunked on HTTP/1.1). `probe` is a chunk the client ignores (an SSE
  // comment), written to find out whether a client that half-closed is still there.
  virtual bool begin_stream(int status, std::string_view content_type, const HttpHeaders& headers,
                            std::string probe) = 0;
  virtual bool write(std::string_view data) = 0;  // false: the client is gone
  virtual void end_stream() = 0;

  // True once the client has closed or reset the connection; never blocks for long. A client
  // that only half-closed (shutdown of its sending side) still gets its answer: to tell the
  // two apart, it is sent an interim "100 Continue" (or the stream's probe), which a closed
  // connection refuses.
  virtual bool client_gone() = 0;
  virtual bool responded() const = 0;
};

using HttpHandler = std::function<void(HttpExchange&)>;

class HttpListener {
 public:
  HttpListener(ListenerOptions options, HttpHandler handler);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds and listens; returns the port. UsageError naming host:port on failure.
  int bind();
  // Serves until stop(); returns when every handler has returned.
  void run();
  // From any thread (or before run()); idempotent.
  void stop();

  // Connections open now (reading a request, idle, or being answered).
  size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::serve
