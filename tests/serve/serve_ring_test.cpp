// `hearth serve --workers`: the server at the head of a 3-process ring (two real `hearth
// worker` processes). Concurrent greedy streams must equal the single-device outputs.
#include <gtest/gtest.h>

#include <thread>

#include "serve/serve_process.h"
#include "support/worker_process.h"

namespace hearth::serve::testing {
namespace {

using nlohmann::json;

// A worker serving `model`; throws when it does not start.
class WorkerProc : public hearth::testing::WorkerProcess {
 public:
  explicit WorkerProc(const std::string& model) : WorkerProcess({"-m", model}) {
    if (address().empty()) throw std::runtime_error("worker did not start:\n" + log());
  }
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
