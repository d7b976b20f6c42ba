// A real `hearth serve` child process on a free port, a tiny synthetic model for it, and
// small HTTP helpers shared by the serve integration tests.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hearth/model/synth.h"
#include "hearth/serve/http_lib.h"
#include "support/scratch_dir.h"

extern char** environ;

namespace hearth::serve::testing {

namespace fs = std::filesystem;

inline fs::path test_dir() {
  return hearth::testing::scratch_subdir("hearth_serve_test");
}

// dim 128, vocab 512: fast enough under ASan, big enough for a chat template. 2 layers for
// one device, 4 for a ring of three.
inline std::string write_tiny_model(int n_layers) {
  model::SynthOptions opt;
  opt.hp.arch = model::Arch::kLlama;
  opt.hp.n_layers = n_layers;
  opt.hp.dim = 128;
  opt.hp.n_heads = 4;
  opt.hp.n_kv_heads = 2;
  opt.hp.head_dim = 32;
  opt.hp.ffn = 256;
  opt.hp.vocab = 512;
  opt.hp.ctx_train = 4096;
  opt.types = model::parse_type_recipe("q8_0");
  opt.seed = 11;
  opt.name = "serve-tiny";
  opt.threads = 1;
  const std::string p = (test_dir() / (n_layers == 2 ? "serve_tiny.gguf"
                                                     : fmt::format("serve_tiny{}.gguf", n_layers)))
                            .string();
  model::write_synthetic_model(opt, p);
  return p;
}

inline std::string tiny_model() {
  static const std::string path = write_tiny_model(2);
  return path;
}

class ServeProc {
 public:
  explicit ServeProc(std::vector<std::string> extra = {}, std::string model = {}) {
    if (model.empty()) model = tiny_model();
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    log_ = (test_dir() / ("serve_" + std::to_string(counter_++) + ".log")).string();
    posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv_s = {HEARTH_BIN_PATH, "serve", "-m", model,
                                       "--port",        "0",     "-t", "1"};
    argv_s.insert(argv_s.end(), extra.begin(), extra.end());
    if (std::find(extra.begin(), extra.end(), "-c") == extra.end()) {
      argv_s.insert(argv_s.end(), {"-c", "256"});
    }
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, HEARTH_BIN_PATH, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (rc != 0) throw std::runtime_error("spawn hearth serve");
    FILE* f = fdopen(out[0], "r");
    char line[512] = {};
    if (f && fgets(line, sizeof line, f)) first_line_ = line;
    if (f) fclose(f);
    const auto colon = first_line_.rfind(':');
    if (first_line_.find("listening on http://") == std::string::npos ||
        colon == std::string::npos) {
      throw std::runtime_error("hearth serve did not start: " + first_line_ + " (log " + log_ +
                               ")");
    }
    port_ = std::stoi(first_line_.substr(colon + 1));
  }
  ~ServeProc() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  ServeProc(const ServeProc&) = delete;
  ServeProc& operator=(const ServeProc&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Resident memory of the server process now, in bytes (VmRSS).
  size_t rss_bytes() const {
    FILE* f = std::fopen(fmt::format("/proc/{}/status", pid_).c_str(), "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "VmRSS: %zu kB", &kb) == 1) break;
    }
    std::fclose(f);
    return kb * 1024;
  }
  const std::string& first_line() const { return first_line_; }
  const std::string& log() const { return log_; }
  // Stops with SIGTERM; returns the exit status (for the clean-shutdown test).
  int terminate() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  // An unlabelled sample of /metrics (a counter or gauge); -1 when the server does not
  // report it or does not answer.
  double metric(const std::string& name) const {
    auto c = client();
    auto r = c.Get("/metrics");
    const std::string key = "\n" + name + " ";
    const size_t at = r ? r->body.find(key) : std::string::npos;
    return at == std::string::npos ? -1.0 : std::stod(r->body.substr(at + key.size()));
  }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string first_line_, log_;
};

// POST whose response body arrives piece by piece in `on_data` (httplib 0.11's Post has no
// receiver overload). Returns the status, 0 when the request failed.
template <typename F>
int post_streaming(httplib::Client& c, const std::string& path, const httplib::Headers& headers,
                   const std::string& body, F on_data) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.set_header("Content-Type", "application/json");
  req.body = body;
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) { return on_data(d, n); };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  return c.send(req, res, err) ? res.status : 0;
}

// A raw TCP connection to 127.0.0.1:port, -1 on failure.
inline int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends all of `s` (blocking); false when the connection refused it.
inline bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

inline std::string http_post(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Everything the server sends until it closes the connection or `timeout_ms` pass quietly.
inline std::string read_until_close(int fd, int timeout_ms) {
  std::string out;
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// One whole response (interim 1xx answers skipped): by Content-Length, by chunked framing, or
// until the server closes. Empty when nothing complete came within `timeout_ms` of quiet.
inline std::string read_response(int fd, int timeout_ms) {
  std::string r;
  char buf[16384];
  auto more = [&] {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    r.append(buf, static_cast<size_t>(n));
    return true;
  };
  size_t start = 0;
  while (true) {
    size_t he;
    while ((he = r.find("\r\n\r\n", start)) == std::string::npos) {
      if (!more()) return {};
    }
    if (r.compare(start, 10, "HTTP/1.1 1") == 0) {  // interim: the final answer follows
      start = he + 4;
      continue;
    }
    const std::string head = r.substr(start, he - start);
    const size_t cl = head.find("Content-Length: ");
    if (cl != std::string::npos) {
      const size_t need = he + 4 + std::stoul(head.substr(cl + 16));
      while (r.size() < need) {
        if (!more()) return {};
      }
      return r.substr(start, need - start);
    }
    if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
      while (r.find("\r\n0\r\n\r\n", he) == std::string::npos) {
        if (!more()) return r.substr(start);
      }
      return r.substr(start);
    }
    while (more()) {
    }
    return r.substr(start);
  }
}

// A streamed chat request far longer than a test's other requests, generating while they run,
// so that tests of batching do not hang on clients' connections overlapping by chance (on a
// loaded machine short requests can each finish before the next one arrives). It is drained,
// so the server never takes it for a slow client, and cancelled by closing its socket.
class LongStream {
 public:
  LongStream(int port, const nlohmann::json& chat_body) {
    fd_ = connect_to(port);
    if (fd_ < 0) throw std::runtime_error("LongStream: cannot connect");
    nlohmann::json b = chat_body;
    b["stream"] = true;
    char first[256];
    if (!send_all(fd_, http_post("/v1/chat/completions", b.dump())) ||
        recv(fd_, first, sizeof first, 0) <= 0) {
      close(fd_);
      throw std::runtime_error("LongStream: the stream did not start");
    }
    drain_ = std::thread([this] {
      char buf[4096];
      pollfd p{fd_, POLLIN, 0};
      while (!stop_ && poll(&p, 1, 50) >= 0) {
        if ((p.revents & POLLIN) && recv(fd_, buf, sizeof buf, 0) <= 0) break;
      }
    });
  }
  LongStream(const LongStream&) = delete;
  LongStream& operator=(const LongStream&) = delete;
  ~LongStream() {
    stop_ = true;
    drain_.join();
    close(fd_);
  }

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread drain_;
};

// One parsed SSE stream: the JSON payloads in order and whether it ended with [DONE].
struct SseStream {
  std::vector<nlohmann::json> events;
  bool done = false;
  std::string text;  // concatenated delta content (chat) or text (completions)
  std::string finish_reason;
  nlohmann::json usage;
};

inline SseStream parse_sse(const std::string& body) {
  SseStream s;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) continue;
    const std::string data = ev.substr(6);
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    auto j = nlohmann::json::parse(data);
    for (const auto& c : j.value("choices", nlohmann::json::array())) {
      if (c.contains("delta") && c["delta"].contains("content")) {
        s.text += c["delta"]["content"].get<std::string>();
      }
      if (c.contains("text")) s.text += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) s.finish_reason = c["finish_reason"];
    }
    if (j.contains("usage")) s.usage = j["usage"];
    s.events.push_back(std::move(j));
  }
  return s;
}

}  // namespace hearth::serve::testing
