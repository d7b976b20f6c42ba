// The browser side of `hearth serve`: the embedded pages, their headers, the key they do not
// need, the cross-origin policy, and the /cluster feed (also at the head of a 3-process ring).
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "hearth/base/error.h"
#include "hearth/serve/web_api.h"
#include "hearth/serve/web_assets.h"
#include "serve/serve_process.h"
#include "support/subprocess.h"
#include "support/worker_process.h"

namespace hearth::serve::testing {
namespace {

using nlohmann::json;

TEST(WebApi, CorsOriginsParseAndCheck) {
  EXPECT_EQ(parse_cors_origins("http://a.example:8000, https://b.example/"),
            (std::vector<std::string>{"http://a.example:8000", "https://b.example"}));
  EXPECT_EQ(parse_cors_origins("*"), std::vector<std::string>{"*"});
  for (const char* bad : {"a.example", "http://", "ftp://x", "http://x/path", "", "http://a,"}) {
    EXPECT_THROW(parse_cors_origins(bad), UsageError) << bad;
  }
  const std::string host = "127.0.0.1:8080", same = "http://127.0.0.1:8080",
                    other = "http://evil.example", allowed = "http://a.example";
  const std::vector<std::string> list = {allowed};
  EXPECT_EQ(check_origin(nullptr, &host, list), OriginCheck::kNone);
  EXPECT_EQ(check_origin(&same, &host, list), OriginCheck::kSame);
  EXPECT_EQ(check_origin(&other, &host, list), OriginCheck::kRefused);
  EXPECT_EQ(check_origin(&allowed, &host, list), OriginCheck::kAllowed);
  EXPECT_EQ(check_origin(&other, &host, {"*"}), OriginCheck::kAllowed);
  EXPECT_EQ(check_origin(&same, nullptr, list), OriginCheck::kRefused);
}

TEST(WebApi, EveryPageIsEmbeddedAndNothingElseIsServed) {
  WebPage p;
  ASSERT_TRUE(find_web_page("/", p));
  EXPECT_EQ(p.content_type, "text/html; charset=utf-8");
  EXPECT_NE(p.body.find("/web/chat.js"), std::string_view::npos);
  ASSERT_TRUE(find_web_page("/cluster", p));
  EXPECT_NE(p.body.find("/web/cluster.js"), std::string_view::npos);
  for (const char* f : {"/web/api.js", "/web/chat.js", "/web/cluster.js", "/web/hearth.css"}) {
    ASSERT_TRUE(find_web_page(f, p)) << f;
    EXPECT_GT(p.body.size(), 500u) << f;
  }
  for (const char* f : {"/web/", "/web/../CMakeLists.txt", "/web/x/chat.js", "/index.html",
                        "/web/nope.js", "/cluster/"}) {
    EXPECT_FALSE(find_web_page(f, p)) << f;
  }
  // The pages load nothing from elsewhere: no URL with a scheme in any of them.
  for (const auto& f : web_files()) {
    EXPECT_EQ(f.body.find("src=\"http"), std::string_view::npos) << f.name;
    EXPECT_EQ(f.body.find("href=\"http"), std::string_view::npos) << f.name;
    EXPECT_EQ(f.body.find("@import"), std::string_view::npos) << f.name;
  }
}

// A GET with optional extra headers, over a raw socket (to send any Origin and Host).
std::string raw_request(int port, const std::string& method, const std::string& path,
                        const std::string& headers, const std::string& body = {}) {
  const int fd = connect_to(port);
  EXPECT_GE(fd, 0);
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                    "\r\nConnection: close\r\n" + headers;
  if (!body.empty()) {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  send_all(fd, req);
  std::string out = read_until_close(fd, 5000);
  close(fd);
  return out;
}

TEST(WebPages, PagesNeedNoKeyAndCarryTheirPolicy) {
  ServeProc server({"--api-key", "k1"});
  const int port = server.port();
  std::string r = raw_request(port, "GET", "/", "");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r.substr(0, 300);
  EXPECT_NE(r.find("Content-Security-Policy: default-src 'self'"), std::string::npos);
  EXPECT_NE(r.find("X-Content-Type-Options: nosniff"), std::string::npos);
  EXPECT_NE(r.find("<title>hearth</title>"), std::string::npos);
  r = raw_request(port, "GET", "/web/chat.js", "");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_NE(r.find("Content-Type: text/javascript"), std::string::npos);
  // The data behind the pages needs the key like the rest of the API.
  r = raw_request(port, "GET", "/v1/cluster", "");
  EXPECT_EQ(r.rfind("HTTP/1.1 401", 0), 0u) << r.substr(0, 300);
  r = raw_request(port, "GET", "/v1/cluster", "Authorization: Bearer k1\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r.substr(0, 300);
  r = raw_request(port, "POST", "/", "");
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r.substr(0, 300);
}

TEST(WebPages, OtherOriginsAreRefusedUnlessAllowed) {
  ServeProc server({"--cors", "http://allowed.example"});
  const int port = server.port();
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})";
  // A page elsewhere may not drive the model (even with a "simple" request no preflight
  // guards).
  std::string r =
      raw_request(port, "POST", "/v1/chat/completions", "Origin: http://evil.example\r\n", body);
  EXPECT_EQ(r.rfind("HTTP/1.1 403", 0), 0u) << r.substr(0, 400);
  EXPECT_NE(r.find("cross_origin_refused"), std::string::npos);
  EXPECT_EQ(r.find("Access-Control-Allow-Origin"), std::string::npos);
  r = raw_request(port, "OPTIONS", "/v1/chat/completions",
                  "Origin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 403", 0), 0u) << r.substr(0, 400);
  // The server's own pages (Origin = this host) and --cors origins may.
  r = raw_request(port, "POST", "/v1/chat/completions",
                  "Origin: http://127.0.0.1:" + std::to_string(port) + "\r\n", body);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r.substr(0, 400);
  r = raw_request(port, "OPTIONS", "/v1/chat/completions",
                  "Origin: http://allowed.example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 204", 0), 0u) << r.substr(0, 400);
  EXPECT_NE(r.find("Access-Control-Allow-Origin: http://allowed.example"), std::string::npos);
  EXPECT_NE(r.find("Access-Control-Allow-Headers: Authorization, Content-Type"), std::string::npos);
  r = raw_request(port, "POST", "/v1/chat/completions", "Origin: http://allowed.example\r\n", body);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r.substr(0, 400);
  EXPECT_NE(r.find("Access-Control-Allow-Origin: http://allowed.example"), std::string::npos);
  // Clients that are not browsers send no Origin and are unaffected.
  r = raw_request(port, "POST", "/v1/chat/completions", "", body);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r.substr(0, 400);
}

TEST(WebPages, BadCorsFlagIsAUsageError) {
  const auto r = hearth::testing::run_hearth("serve -m " + tiny_model() + " --cors evil.example");
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.all().find("--cors: 'evil.example' is not an origin"), std::string::npos) << r.all();
}

// The snapshots of /v1/cluster/events while a request runs: the ring's devices, and numbers
// that move.
TEST(WebPages, ClusterFeedShowsEveryDeviceOfARingAndMoves) {
  const std::string model = write_tiny_model(4);
  hearth::testing::WorkerProcess w1({"-m", model}), w2({"-m", model});
  ASSERT_FALSE(w1.address().empty()) << w1.log();
  ASSERT_FALSE(w2.address().empty()) << w2.log();
  ServeProc head({"-c", "2048", "--workers", w1.address() + "," + w2.address(), "--plan", "2,1,1"},
                 model);
  std::thread load([&] {
    auto c = head.client();
    c.set_read_timeout(60, 0);
    (void)c.Post("/v1/chat/completions",
                 json{{"messages", {{{"role", "user"}, {"content", "go"}}}},
                      {"max_tokens", 1500},
                      {"ignore_eos", true}}
                     .dump(),
                 "application/json");
  });
  const int fd = connect_to(head.port());
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /v1/cluster/events HTTP/1.1\r\nHost: x\r\n\r\n");
  // Read for about 4.5 s: the scheduler samples devices every 2 s.
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(4500);
  char buf[8192];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  load.join();
  std::vector<json> snaps;
  for (size_t at = got.find("data: "); at != std::string::npos; at = got.find("data: ", at + 1)) {
    const size_t end = got.find("\n\n", at);
    if (end == std::string::npos) break;
    snaps.push_back(json::parse(got.substr(at + 6, end - at - 6)));
  }
  ASSERT_GE(snaps.size(), 3u) << got.substr(0, 2000);
  const json& last = snaps.back();
  EXPECT_TRUE(last["ring"].get<bool>());
  ASSERT_EQ(last["devices"].size(), 3u) << last;
  EXPECT_EQ(last["rounds"], 1);
  EXPECT_EQ(last["devices"][1]["address"], w1.address());
  EXPECT_EQ(last["devices"][0]["windows"], json::parse("[[0, 2]]")) << last;
  EXPECT_EQ(last["devices"][2]["windows"], json::parse("[[3, 4]]")) << last;
  EXPECT_GT(last["tokens_generated"].get<int64_t>(),
            snaps.front()["tokens_generated"].get<int64_t>());
  bool rate = false, steps = false, tpot = false;
  for (const auto& s : snaps) {
    rate = rate || s["tokens_per_s"].get<double>() > 0;
    tpot = tpot || (s["tpot_ms"].is_number() && s["tpot_ms"].get<double>() > 0);
    steps = steps || s["devices"][2]["steps"] != snaps.front()["devices"][2]["steps"];
  }
  EXPECT_TRUE(rate);
  EXPECT_TRUE(tpot) << "no time per token while a request ran";
  EXPECT_TRUE(steps) << "the devices' step counts did not move";
  EXPECT_GT(last["devices"][1]["compute_ms"].get<double>(), 0) << last;
}

}  // namespace
}  // namespace hearth::serve::testing
