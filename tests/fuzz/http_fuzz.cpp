// libFuzzer target for the HTTP request parser (serve/http_request.h): bytes arrive in pieces
// whose sizes the input chooses, requests are pipelined. Every input must end in requests or
// an error status, and the parser must never hold more than its limits allow.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hearth/serve/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::serve;
  if (size < 1) return 0;
  HttpLimits limits;
  limits.max_request_line = 256;
  limits.max_header_bytes = 1024;
  limits.max_headers = 16;
  limits.max_body = 4096;
  // Hold at most the limits plus one read's worth (line being collected, body so far).
  const size_t bound = limits.max_request_line + limits.max_header_bytes + limits.max_body + 64;
  const size_t step = 1 + data[0] % 64;  // the piece size
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  RequestParser p(limits);
  while (!in.empty()) {
    const std::string_view piece = in.substr(0, step);
    size_t used = 0;
    auto st = p.feed(piece, &used);
    if (used > piece.size()) std::abort();
    if (p.buffered_bytes() > bound) std::abort();
    in.remove_prefix(used);
    if (st == RequestParser::State::kHeadersDone) continue;
    if (st == RequestParser::State::kError) {
      const int s = p.error_status();
      if (s < 400 || s > 505 || p.error_message().empty()) std::abort();
      break;
    }
    if (st == RequestParser::State::kDone) {
      const HttpRequest r = p.take();
      if (r.body.size() > limits.max_body || r.method.empty() || r.target.empty()) std::abort();
      if (r.headers.size() > limits.max_headers) std::abort();
      p.reset();
      continue;
    }
    if (used < piece.size()) std::abort();  // needing more must mean everything was taken
  }
  // A body of any bytes through the decoder, too.
  std::string out, why;
  (void)inflate_body(std::string_view(reinterpret_cast<const char*>(data), size),
                     data[0] & 1 ? "gzip" : "deflate", 1 << 16, out, why);
  if (out.size() > (1 << 16)) std::abort();
  return 0;
}
