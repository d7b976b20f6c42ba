// HTTP/1.1 requests as the server reads them off a connection: an incremental parser with a
// bound on every part a stranger controls (request line, header bytes, header count, body,
// decompressed body), so that no byte sequence makes it buffer without limit.
//
// Pure: bytes in, a request or an HTTP error status out. The connection handling
// (http_listener.h) owns sockets, deadlines and threads.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hearth::serve {

struct HttpLimits {
  size_t max_request_line = 8 << 10;   // method, target and version: 414 beyond
  size_t max_header_bytes = 32 << 10;  // every header line together: 431 beyond
  size_t max_headers = 100;            // header lines: 431 beyond
  size_t max_body = 4 << 20;           // after chunked and gzip/deflate decoding: 413 beyond
};

struct HttpRequest {
  std::string method;     // as sent (methods are case-sensitive)
  std::string target;     // the request target as sent
  std::string path;       // target up to '?'
  std::string query;      // after '?', undecoded
  int version_minor = 1;  // HTTP/1.<minor>
  // Names lower-cased, values with surrounding blanks trimmed, in arrival order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // decoded (chunked and Content-Encoding undone)
  bool keep_alive = true;
  bool expects_continue = false;  // "Expect: 100-continue"

  // The first header of that (lower-case) name, or nullptr.
  const std::string* header(std::string_view name) const;
};

// Feed bytes as they arrive; the parser keeps what it has not consumed.
class RequestParser {
 public:
  enum class State { kNeedMore, kHeadersDone, kDone, kError };

  explicit RequestParser(HttpLimits limits = {});

  // Consumes from `data` and returns the new state. kHeadersDone is returned once, when the
  // headers are complete and a body is still to come (so that the caller can answer
  // "Expect: 100-continue"); call feed() again (with no bytes if need be) to go on. After kDone
  // or kError, bytes not consumed are reported by `consumed` (pipelined requests).
  State feed(std::string_view data, size_t* consumed);

  State state() const { return state_; }
  bool started() const { return started_; }  // any byte of a request seen
  // Bytes held for the request being read (the line being collected and the body so far).
  size_t buffered_bytes() const { return line_.size() + req_.body.size(); }
  // Reading the body (its bytes count against the listener's buffer budget).
  bool in_body() const { return phase_ >= Phase::kBody && phase_ <= Phase::kChunkDataEnd; }
  // After kHeadersDone: the client waits for "100 Continue" before sending its body.
  bool expects_continue() const { return req_.expects_continue; }

  // After kDone: the request (moves it out), then reset() to parse the next one.
  HttpRequest take();
  void reset();

  // After kError: the status to answer with (400, 413, 414, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

 private:
  enum class Phase {
    kRequestLine,
    kHeaders,
    kBody,
    kChunkSize,
    kChunkData,
    kChunkDataEnd,
    kTrailers,
    kComplete
  };

  State fail(int status, std::string message);
  template <class Message>
  std::optional<std::string> take_line(std::string_view data, size_t& pos, size_t limit, int status,
                                       Message too_long);
  State parse_request_line(const std::string& line);
  State parse_header_line(const std::string& line);
  State headers_complete();
  State finish_body();

  HttpLimits limits_;
  State state_ = State::kNeedMore;
  Phase phase_ = Phase::kRequestLine;
  bool started_ = false;
  std::string line_;  // the line being collected
  size_t header_bytes_ = 0;
  HttpRequest req_;
  bool chunked_ = false;
  size_t content_length_ = 0;  // body bytes still expected (length-delimited or current chunk)
  size_t raw_body_bytes_ = 0;  // bytes of body as sent (before decoding)
  std::string encoding_;       // "", "gzip" or "deflate"
  int error_status_ = 0;
  std::string error_message_;
};

// Undoes a Content-Encoding of gzip or deflate (zlib or raw), producing at most `max_out`
// bytes; false (with `why`) on corrupt data or more output than that.
bool inflate_body(std::string_view in, const std::string& encoding, size_t max_out,
                  std::string& out, std::string& why);

// The standard reason phrase of a status ("OK", "Not Found"); "Unknown" for others.
const char* http_reason(int status);

}  // namespace hearth::serve
