#include "hearth/serve/http_request.h"

#include <fmt/core.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "hearth/base/hex.h"

namespace hearth::serve {

namespace {

// RFC 9110 token characters (methods, header names).
bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls fn(token) for each comma-separated element of a header value, trimmed and lower-cased.
template <typename Fn>
void for_each_element(std::string_view v, Fn fn) {
  while (!v.empty()) {
    const size_t comma = v.find(',');
    const std::string_view part = trim(v.substr(0, comma));
    if (!part.empty()) fn(lower(part));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

// A decimal Content-Length; false on anything but digits or a value past 2^60.
bool parse_length(std::string_view s, size_t& out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = static_cast<size_t>(v);
  return true;
}

// A chunk-size line: hex digits, then optional ";extensions". false on anything else.
bool parse_chunk_size(std::string_view s, size_t& out) {
  const size_t semi = s.find(';');
  s = trim(s.substr(0, semi));
  if (s.empty() || s.size() > 15) return false;  // 15 hex digits < 2^60: no overflow
  uint64_t v = 0;
  for (char c : s) {
    const int d = hex_digit(c);
    if (d < 0) return false;
    v = v * 16 + static_cast<uint64_t>(d);
  }
  out = static_cast<size_t>(v);
  return true;
}

constexpr size_t kMaxChunkLine = 1024;

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

RequestParser::RequestParser(HttpLimits limits) : limits_(limits) {}

void RequestParser::reset() {
  state_ = State::kNeedMore;
  phase_ = Phase::kRequestLine;
  started_ = false;
  line_.clear();
  header_bytes_ = 0;
  req_ = HttpRequest{};
  chunked_ = false;
  content_length_ = 0;
  raw_body_bytes_ = 0;
  encoding_.clear();
  error_status_ = 0;
  error_message_.clear();
}

HttpRequest RequestParser::take() {
  HttpRequest r = std::move(req_);
  req_ = HttpRequest{};
  return r;
}

RequestParser::State RequestParser::fail(int status, std::string message) {
  error_status_ = status;
  error_message_ = std::move(message);
  state_ = State::kError;
  return state_;
}

// Appends bytes up to and including '\n' to line_ and returns the line once complete, without
// "\r\n". nullopt while the line goes on past `data` (all of it consumed), or when it passes
// `limit`: then the request fails with `status` and the message `too_long()` gives.
template <class Message>
std::optional<std::string> RequestParser::take_line(std::string_view data, size_t& pos,
                                                    size_t limit, int status, Message too_long) {
  const size_t nl = data.find('\n', pos);
  const size_t end = nl == std::string_view::npos ? data.size() : nl;
  if (line_.size() + (end - pos) > limit) {
    fail(status, too_long());
    return std::nullopt;
  }
  line_.append(data.substr(pos, end - pos));
  if (nl == std::string_view::npos) {
    pos = data.size();
    return std::nullopt;
  }
  pos = nl + 1;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  std::string line = std::move(line_);
  line_.clear();
  return line;
}

RequestParser::State RequestParser::parse_request_line(const std::string& line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos) {
    return fail(400, "the request line is not 'METHOD target HTTP/1.x'");
  }
  const std::string_view method(line.data(), sp1);
  const std::string_view target(line.data() + sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version(line.data() + sp2 + 1, line.size() - sp2 - 1);
  if (!is_token(method)) return fail(400, "the request method is not a token");
  if (target.empty()) return fail(400, "the request target is empty");
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return fail(400, "the request target holds a control character");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/") {
    return fail(400, "the request line does not end in an HTTP version");
  }
  if (version == "HTTP/1.1") {
    req_.version_minor = 1;
  } else if (version == "HTTP/1.0") {
    req_.version_minor = 0;
  } else {
    return fail(505, fmt::format("HTTP version '{}' is not supported (1.0 and 1.1 are)",
                                 std::string(version).substr(0, 16)));
  }
  req_.method = std::string(method);
  req_.target = std::string(target);
  const size_t q = target.find('?');
  req_.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) req_.query = std::string(target.substr(q + 1));
  req_.keep_alive = req_.version_minor == 1;
  return State::kNeedMore;
}

RequestParser::State RequestParser::parse_header_line(const std::string& line) {
  if (line.front() == ' ' || line.front() == '\t') {
    return fail(400, "folded header lines are not accepted");
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return fail(400, "a header line has no ':'");
  const std::string_view name(line.data(), colon);
  if (!is_token(name)) return fail(400, "a header name is not a token");
  const std::string_view value = trim(std::string_view(line).substr(colon + 1));
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) {
      return fail(400, fmt::format("header '{}' holds a control character", name));
    }
  }
  if (req_.headers.size() >= limits_.max_headers) {
    return fail(431, fmt::format("more than {} header lines", limits_.max_headers));
  }
  req_.headers.emplace_back(lower(name), std::string(value));
  return State::kNeedMore;
}

RequestParser::State RequestParser::headers_complete() {
  bool has_length = false, has_te = false;
  size_t length = 0;
  for (const auto& [name, value] : req_.headers) {
    if (name == "content-length") {
      size_t v;
      if (!parse_length(value, v)) return fail(400, "Content-Length is not a number");
      if (has_length && v != length) return fail(400, "two different Content-Length headers");
      has_length = true;
      length = v;
    } else if (name == "transfer-encoding") {
      bool ok = true;
      for_each_element(value, [&](const std::string& t) {
        if (t != "chunked" || chunked_) ok = false;
        chunked_ = true;
      });
      if (!ok || !chunked_) {
        return fail(501, "only 'Transfer-Encoding: chunked' is supported");
      }
      has_te = true;
    } else if (name == "content-encoding") {
      bool ok = true;
      for_each_element(value, [&](const std::string& e) {
        if (e == "identity") return;
        if ((e == "gzip" || e == "x-gzip" || e == "deflate") && encoding_.empty()) {
          encoding_ = e == "deflate" ? "deflate" : "gzip";
        } else {
          ok = false;
        }
      });
      if (!ok) return fail(415, "Content-Encoding must be gzip, deflate or identity (one)");
    } else if (name == "connection") {
      for_each_element(value, [&](const std::string& t) {
        if (t == "close") req_.keep_alive = false;
        if (t == "keep-alive" && req_.version_minor == 0) req_.keep_alive = true;
      });
    } else if (name == "expect") {
      if (lower(value) != "100-continue") {
        return fail(417, "the only expectation supported is '100-continue'");
      }
      req_.expects_continue = req_.version_minor == 1;
    }
  }
  // Both framings at once is how requests are smuggled past proxies: refuse it.
  if (has_te && has_length) return fail(400, "both Content-Length and Transfer-Encoding");
  if (has_te && req_.version_minor == 0) return fail(400, "Transfer-Encoding in HTTP/1.0");
  if (has_length && length > limits_.max_body) {
    return fail(413, fmt::format("the body of {} bytes is larger than the limit of {}", length,
                                 limits_.max_body));
  }
  if (chunked_) {
    phase_ = Phase::kChunkSize;
  } else if (length > 0) {
    content_length_ = length;
    // Not reserved up front: a Content-Length costs the sender nothing, the memory would.
    phase_ = Phase::kBody;
  } else {
    if (!encoding_.empty()) encoding_.clear();  // an empty body decodes to nothing
    return finish_body();
  }
  state_ = State::kHeadersDone;
  return state_;
}

RequestParser::State RequestParser::finish_body() {
  if (!encoding_.empty()) {
    std::string out, why;
    if (!inflate_body(req_.body, encoding_, limits_.max_body, out, why)) {
      return fail(why.find("larger") != std::string::npos ? 413 : 400,
                  fmt::format("the {} body: {}", encoding_, why));
    }
    req_.body = std::move(out);
  }
  phase_ = Phase::kComplete;
  state_ = State::kDone;
  return state_;
}

RequestParser::State RequestParser::feed(std::string_view data, size_t* consumed) {
  size_t pos = 0;
  auto done = [&](State s) {
    if (consumed) *consumed = pos;
    return s;
  };
  if (state_ == State::kDone || state_ == State::kError) return done(state_);
  state_ = State::kNeedMore;
  while (pos < data.size() || phase_ == Phase::kComplete) {
    switch (phase_) {
      case Phase::kRequestLine: {
        // Empty lines before a request are tolerated (RFC 9112 2.2).
        if (line_.empty() && (data[pos] == '\r' || data[pos] == '\n')) {
          ++pos;
          continue;
        }
        started_ = true;
        const auto line = take_line(data, pos, limits_.max_request_line, 414, [&] {
          return fmt::format("the request line is longer than {} bytes", limits_.max_request_line);
        });
        if (!line || parse_request_line(*line) == State::kError) return done(state_);
        phase_ = Phase::kHeaders;
        break;
      }
      case Phase::kHeaders:
      case Phase::kTrailers: {
        const size_t room =
            limits_.max_header_bytes - std::min(header_bytes_, limits_.max_header_bytes);
        const auto line = take_line(data, pos, room, 431, [&] {
          return fmt::format("the headers are larger than {} bytes", limits_.max_header_bytes);
        });
        if (!line) return done(state_);
        header_bytes_ += line->size() + 2;
        if (line->empty()) {
          if (phase_ == Phase::kTrailers) return done(finish_body());
          if (headers_complete() != State::kNeedMore) return done(state_);
          break;
        }
        if (phase_ == Phase::kTrailers) break;  // trailer fields are counted, then dropped
        if (parse_header_line(*line) == State::kError) return done(state_);
        break;
      }
      case Phase::kBody:
      case Phase::kChunkData: {
        const size_t n = std::min(content_length_, data.size() - pos);
        req_.body.append(data.substr(pos, n));
        pos += n;
        content_length_ -= n;
        if (content_length_ == 0) {
          if (phase_ == Phase::kBody) return done(finish_body());
          phase_ = Phase::kChunkDataEnd;
        }
        break;
      }
      case Phase::kChunkSize:
      case Phase::kChunkDataEnd: {
        const auto line = take_line(data, pos, kMaxChunkLine, 400,
                                    [] { return "a chunk-size line is too long"; });
        if (!line) return done(state_);
        if (phase_ == Phase::kChunkDataEnd) {
          if (!line->empty()) return done(fail(400, "chunk data is longer than its size"));
          phase_ = Phase::kChunkSize;
          break;
        }
        size_t size;
        if (!parse_chunk_size(*line, size)) return done(fail(400, "a chunk size is not hex"));
        if (size > limits_.max_body - std::min(raw_body_bytes_, limits_.max_body)) {
          return done(fail(413, fmt::format("the chunked body is larger than the limit of {}",
                                            limits_.max_body)));
        }
        raw_body_bytes_ += size;
        if (size == 0) {
          phase_ = Phase::kTrailers;
        } else {
          content_length_ = size;
          phase_ = Phase::kChunkData;
        }
        break;
      }
      case Phase::kComplete:
        return done(State::kDone);
    }
  }
  return done(state_);
}

bool inflate_body(std::string_view in, const std::string& encoding, size_t max_out,
                  std::string& out, std::string& why) {
  out.clear();
  // gzip: 16 + 15 accepts the gzip wrapper; deflate is meant to be zlib-wrapped, but some
  // clients send it raw: look at the first two bytes (a zlib header is a multiple of 31).
  int window = 15 + 16;
  if (encoding == "deflate") {
    const bool zlib_header =
        in.size() >= 2 && (static_cast<unsigned char>(in[0]) & 0x0f) == 8 &&
        ((static_cast<unsigned char>(in[0]) << 8) | static_cast<unsigned char>(in[1])) % 31 == 0;
    window = zlib_header ? 15 : -15;
  }
  z_stream z{};
  if (inflateInit2(&z, window) != Z_OK) {
    why = "cannot start zlib";
    return false;
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[16384];
  int rc = Z_OK;
  bool ok = true;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = sizeof buf - z.avail_out;
    if (out.size() + produced > max_out) {
      why = fmt::format("decompresses to larger than the limit of {} bytes", max_out);
      ok = false;
      break;
    }
    out.append(buf, produced);
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are one body (RFC 1952); anything else after the end is not.
      if (z.avail_in > 0 && window == 15 + 16) {
        if (inflateReset(&z) != Z_OK) {
          why = "cannot restart zlib";
          ok = false;
          break;
        }
        continue;
      }
      if (z.avail_in > 0) {
        why = "data after the end of the compressed stream";
        ok = false;
      }
      break;
    }
    if (rc != Z_OK && !(rc == Z_BUF_ERROR && produced > 0)) {
      why = rc == Z_BUF_ERROR ? "the compressed stream is truncated" : "corrupt compressed data";
      ok = false;
      break;
    }
  }
  inflateEnd(&z);
  return ok;
}

const char* http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 102:
      return "Processing";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace hearth::serve
