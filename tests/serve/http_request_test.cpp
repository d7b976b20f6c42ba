// The HTTP request parser on its own: framing, limits and decoding, fed whole and byte by byte.
#include "hearth/serve/http_request.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace hearth::serve {
namespace {

using State = RequestParser::State;

// Feeds `data` in pieces of `step` bytes (0: whole); returns the final state and, through
// `rest`, the bytes not consumed.
State feed_all(RequestParser& p, const std::string& data, size_t step,
               std::string* rest = nullptr) {
  size_t pos = 0;
  State st = State::kNeedMore;
  while (true) {
    const size_t n = step == 0 ? data.size() - pos : std::min(step, data.size() - pos);
    size_t used = 0;
    st = p.feed(std::string_view(data).substr(pos, n), &used);
    EXPECT_LE(used, n);
    pos += used;
    if (st == State::kDone || st == State::kError) break;
    if (st == State::kHeadersDone) continue;
    if (pos >= data.size()) break;
  }
  if (rest) *rest = data.substr(pos);
  return st;
}

std::string gzip(const std::string& in, int window = 15 + 16) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 1, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string post(const std::string& body, const std::string& extra = {}) {
  return "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(HttpRequest, SameRequestWholeOrByteByByte) {
  const std::string raw = post("{\"prompt\":\"hi\"}", "X-Thing:  spaced value \t\r\n");
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    RequestParser p;
    ASSERT_EQ(feed_all(p, raw, step), State::kDone) << step;
    const HttpRequest r = p.take();
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.path, "/v1/completions");
    EXPECT_EQ(r.query, "x=1");
    EXPECT_EQ(r.body, "{\"prompt\":\"hi\"}");
    ASSERT_NE(r.header("x-thing"), nullptr);
    EXPECT_EQ(*r.header("x-thing"), "spaced value");
    EXPECT_TRUE(r.keep_alive);
  }
}

TEST(HttpRequest, PipelinedRequestsLeaveTheNextUnconsumed) {
  const std::string second = "GET /health HTTP/1.1\r\n\r\n";
  RequestParser p;
  std::string rest;
  ASSERT_EQ(feed_all(p, post("abc") + second, 0, &rest), State::kDone);
  EXPECT_EQ(p.take().body, "abc");
  EXPECT_EQ(rest, second);
  p.reset();
  ASSERT_EQ(feed_all(p, rest, 0), State::kDone);
  EXPECT_EQ(p.take().path, "/health");
}

TEST(HttpRequest, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string raw =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{3}}) {
    RequestParser p;
    ASSERT_EQ(feed_all(p, raw, step), State::kDone) << p.error_message();
    EXPECT_EQ(p.take().body, "hello world");
  }
}

TEST(HttpRequest, LimitsGiveTheirStatusBeforeBuffering) {
  HttpLimits lim;
  lim.max_request_line = 100;
  lim.max_header_bytes = 200;
  lim.max_headers = 3;
  lim.max_body = 50;
  struct Case {
    std::string raw;
    int status;
  };
  const std::vector<Case> cases = {
      {"GET /" + std::string(200, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"GET / HTTP/1.1\r\nA: " + std::string(300, 'b') + "\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431},
      {post(std::string(51, 'x')), 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + std::string(32, 'x') +
           "\r\n20\r\n",
       413},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx", 415},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417},
      {"GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: x\x01y\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
  };
  for (const auto& c : cases) {
    RequestParser p(lim);
    EXPECT_EQ(feed_all(p, c.raw, 0), State::kError) << c.raw;
    EXPECT_EQ(p.error_status(), c.status) << c.raw << " -> " << p.error_message();
    EXPECT_FALSE(p.error_message().empty());
  }
  // Without a newline the request line is refused once it passes its limit, however much
  // more arrives: the parser never holds more than the limit.
  RequestParser p(lim);
  size_t used = 0;
  EXPECT_EQ(p.feed(std::string(100, 'G'), &used), State::kNeedMore);
  EXPECT_LE(p.buffered_bytes(), 100u);
  EXPECT_EQ(p.feed("G", &used), State::kError);
  EXPECT_EQ(p.error_status(), 414);
}

TEST(HttpRequest, ContentLengthAloneReservesNothing) {
  RequestParser p;  // 4 MiB body limit
  size_t used = 0;
  EXPECT_EQ(p.feed("POST / HTTP/1.1\r\nContent-Length: 4000000\r\n\r\nab", &used),
            State::kHeadersDone);
  EXPECT_TRUE(p.in_body());
  EXPECT_EQ(p.feed("ab", &used), State::kNeedMore);
  EXPECT_LE(p.buffered_bytes(), 2u);
}

TEST(HttpRequest, GzipAndDeflateBodiesAreDecodedWithinTheLimit) {
  const std::string body = R"({"prompt":"hello hello hello hello"})";
  for (const auto& [name, window] :
       std::vector<std::pair<std::string, int>>{{"gzip", 31}, {"deflate", 15}, {"deflate", -15}}) {
    RequestParser p;
    ASSERT_EQ(feed_all(p, post(gzip(body, window), "Content-Encoding: " + name + "\r\n"), 5),
              State::kDone)
        << name << window << ": " << p.error_message();
    EXPECT_EQ(p.take().body, body);
  }
  // Two gzip members are one body.
  {
    RequestParser p;
    ASSERT_EQ(feed_all(p, post(gzip("ab") + gzip("cd"), "Content-Encoding: gzip\r\n"), 0),
              State::kDone);
    EXPECT_EQ(p.take().body, "abcd");
  }
  // A bomb: 64 MiB of zeros in about 64 KiB stops at the 4 MiB limit with 413.
  {
    const std::string bomb = gzip(std::string(64 << 20, '\0'));
    ASSERT_LT(bomb.size(), 1u << 20);
    RequestParser p;
    EXPECT_EQ(feed_all(p, post(bomb, "Content-Encoding: gzip\r\n"), 0), State::kError);
    EXPECT_EQ(p.error_status(), 413);
  }
  // Corrupt and truncated streams are 400.
  for (std::string bad : {std::string("not gzip at all"), gzip(body).substr(0, 12)}) {
    RequestParser p;
    EXPECT_EQ(feed_all(p, post(bad, "Content-Encoding: gzip\r\n"), 0), State::kError);
    EXPECT_EQ(p.error_status(), 400) << p.error_message();
  }
}

TEST(HttpRequest, KeepAliveAndExpectContinue) {
  {
    RequestParser p;
    ASSERT_EQ(feed_all(p, "GET / HTTP/1.0\r\n\r\n", 0), State::kDone);
    EXPECT_FALSE(p.take().keep_alive);
  }
  {
    RequestParser p;
    ASSERT_EQ(feed_all(p, "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 0), State::kDone);
    EXPECT_TRUE(p.take().keep_alive);
  }
  {
    RequestParser p;
    ASSERT_EQ(feed_all(p, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 0), State::kDone);
    EXPECT_FALSE(p.take().keep_alive);
  }
  RequestParser p;
  size_t used = 0;
  EXPECT_EQ(p.feed("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n", &used),
            State::kHeadersDone);
  EXPECT_TRUE(p.expects_continue());
  EXPECT_EQ(p.feed("ok", &used), State::kDone);
  EXPECT_EQ(p.take().body, "ok");
}

TEST(HttpRequest, LeadingBlankLinesAreSkipped) {
  RequestParser p;
  ASSERT_EQ(feed_all(p, "\r\n\r\nGET /health HTTP/1.1\r\n\r\n", 1), State::kDone);
  EXPECT_EQ(p.take().path, "/health");
}

}  // namespace
}  // namespace hearth::serve
