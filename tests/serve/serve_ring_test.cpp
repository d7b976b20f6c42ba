// `hearth serve --workers`: the server at the head of a 3-process ring (two real `hearth
// worker` processes). Concurrent greedy streams must equal the single-device outputs.
#include <gtest/gtest.h>

#include <thread>

#include "serve/serve_process.h"

namespace hearth::serve::testing {
namespace {

using nlohmann::json;

// A `hearth worker` child; its first stdout line names the bound address.
class WorkerProc {
 public:
  explicit WorkerProc(const std::string& model) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    const std::string log =
        (test_dir() / ("worker_" + std::to_string(counter_++) + ".log")).string();
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv_s = {
        HEARTH_BIN_PATH, "worker", "--listen", "tcp://127.0.0.1:0", "-m", model, "-t", "1"};
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, HEARTH_BIN_PATH, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (rc != 0) throw std::runtime_error("spawn worker");
    FILE* f = fdopen(out[0], "r");
    char line[256] = {};
    if (f && fgets(line, sizeof line, f)) {
      const std::string s(line), prefix = "listening on ";
      if (s.rfind(prefix, 0) == 0) address_ = s.substr(prefix.size(), s.find('\n') - prefix.size());
    }
    if (f) fclose(f);
    if (address_.empty()) throw std::runtime_error("worker did not start (log " + log + ")");
  }
  ~WorkerProc() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  const std::string& address() const { return address_; }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  std::string address_;
};

json chat(int i) {
  return {{"messages", {{{"role", "user"}, {"content", "ring question " + std::to_string(i)}}}},
          {"max_tokens", 10 + i},
          {"temperature", 0},
          {"ignore_eos", true}};
}

TEST(ServeRing, ConcurrentGreedyStreamsEqualSingleDevice) {
  const std::string model = write_tiny_model(4);
  constexpr int kClients = 4;
  std::vector<std::string> alone;
  {
    ServeProc single({"-c", "512"}, model);
    auto c = single.client();
    for (int i = 0; i < kClients; ++i) {
      auto r = c.Post("/v1/chat/completions", chat(i).dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      alone.push_back(json::parse(r->body)["choices"][0]["message"]["content"]);
    }
  }
  WorkerProc w1(model), w2(model);
  ServeProc head({"-c", "512", "--parallel", "4", "--workers", w1.address() + "," + w2.address(),
                  "--plan", "2,1,1"},
                 model);
  std::vector<SseStream> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      json b = chat(i);
      b["stream"] = true;
      auto c = head.client();
      auto r = c.Post("/v1/chat/completions", b.dump(), "application/json");
      if (r && r->status == 200) got[i] = parse_sse(r->body);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(got[i].done) << i << " (head log " << head.log() << ")";
    EXPECT_EQ(got[i].text, alone[i]) << i;
  }
}

}  // namespace
}  // namespace hearth::serve::testing
