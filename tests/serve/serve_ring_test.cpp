// `hearth serve --workers`: the server at the head of a 3-process ring (two real `hearth
// worker` processes). Concurrent greedy streams, carried around the ring together as one
// batch per step, must equal the single-device outputs of each request alone.
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
    ServeProc single({"-c", "512", "--prefill-chunk", "5"}, model);
    auto c = single.client();
    for (int i = 0; i < kClients; ++i) {
      auto r = c.Post("/v1/chat/completions", chat(i).dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      alone.push_back(json::parse(r->body)["choices"][0]["message"]["content"]);
    }
  }
  WorkerProc w1(model), w2(model);
  // Prompts go in chunks of 5 tokens, so prefill chunks and other streams' decode rows share
  // the ring's batches.
  ServeProc head({"-c", "512", "--parallel", "4", "--prefill-chunk", "5", "--workers",
                  w1.address() + "," + w2.address(), "--plan", "2,1,1"},
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
  // Steps carried several sequences around the ring at once.
  auto c = head.client();
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  auto value = [&](const std::string& name) {
    const size_t at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
  };
  EXPECT_GT(value("hearth_forward_passes_total"), 0);
  EXPECT_GT(value("hearth_batch_sequences_total"), value("hearth_forward_passes_total"));
  // Memory pressure is reported for every device of the ring.
  for (int d = 0; d < 3; ++d) {
    EXPECT_NE(m->body.find("hearth_device_memory_pressure{device=\"" + std::to_string(d)),
              std::string::npos)
        << d << ": " << m->body;
  }
}

}  // namespace
}  // namespace hearth::serve::testing
