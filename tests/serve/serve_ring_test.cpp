// `hearth serve --workers`: the server at the head of a 3-process ring (two real `hearth
// worker` processes). Concurrent greedy streams, carried around the ring together as one
// batch per step, must equal the single-device outputs of each request alone.
#include <gtest/gtest.h>

#include <thread>

#include "serve/serve_process.h"
#include "support/scratch_dir.h"
#include "support/synth_model.h"
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

// A thread that posts `body` to `head` as a streamed chat and parses the stream into `out`
// (left empty unless the answer is 200).
std::thread stream_in_thread(ServeProc& head, json body, SseStream& out) {
  return std::thread([&head, &out, body = std::move(body)]() mutable {
    body["stream"] = true;
    auto c = head.client();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (r && r->status == 200) out = parse_sse(r->body);
  });
}

// The answers to chat(0) .. chat(n - 1) of one device serving `model` alone, one at a time.
std::vector<std::string> answers_alone(const std::string& model, int n) {
  std::vector<std::string> alone;
  ServeProc single({"-c", "512", "--prefill-chunk", "5"}, model);
  auto c = single.client();
  for (int i = 0; i < n; ++i) {
    auto r = c.Post("/v1/chat/completions", chat(i).dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    alone.push_back(
        r && r->status == 200
            ? json::parse(r->body)["choices"][0]["message"]["content"].get<std::string>()
            : std::string());
  }
  return alone;
}

TEST(ServeRing, ConcurrentGreedyStreamsEqualSingleDevice) {
  const std::string model = write_tiny_model(4);
  constexpr int kClients = 4;
  const std::vector<std::string> alone = answers_alone(model, kClients);
  ASSERT_FALSE(::testing::Test::HasFailure());
  WorkerProc w1(model), w2(model);
  // Prompts go in chunks of 5 tokens, so prefill chunks and other streams' decode rows share
  // the ring's batches.
  ServeProc head({"-c", "512", "--parallel", "4", "--prefill-chunk", "5", "--workers",
                  w1.address() + "," + w2.address(), "--plan", "2,1,1"},
                 model);
  std::vector<SseStream> got(kClients);
  {
    json long_body = chat(kClients);
    long_body["max_tokens"] = 400;
    const LongStream anchor(head.port(), long_body);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) threads.push_back(stream_in_thread(head, chat(i), got[i]));
    for (auto& t : threads) t.join();
  }  // the anchor is cancelled
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

// Speculative decoding at the head of the ring: drafts of the model itself and prompt
// lookup, verified in the ring's shared batches (prefill chunks and other streams' rows
// beside them), rolled back on every device when rejected. Every stream equals the request
// alone on one device without drafts, and the usage reports the drafts.
TEST(ServeRing, DraftedStreamsEqualSingleDevice) {
  const std::string model = write_tiny_model(4);
  constexpr int kClients = 3;
  const std::vector<std::string> alone = answers_alone(model, kClients);
  ASSERT_FALSE(::testing::Test::HasFailure());
  WorkerProc w1(model), w2(model);
  for (const std::vector<std::string>& draft :
       {std::vector<std::string>{"-md", model, "--draft-p-min", "0", "--draft-max", "3"},
        std::vector<std::string>{"--draft-lookup", "--draft-ngram-min", "1"}}) {
    std::vector<std::string> args{"-c",
                                  "512",
                                  "--parallel",
                                  "4",
                                  "--prefill-chunk",
                                  "5",
                                  "--workers",
                                  w1.address() + "," + w2.address(),
                                  "--plan",
                                  "1,1,2"};  // k = 2
    args.insert(args.end(), draft.begin(), draft.end());
    ServeProc head(args, model);
    std::vector<json> got(kClients);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        auto c = head.client();
        auto r = c.Post("/v1/chat/completions", chat(i).dump(), "application/json");
        if (r && r->status == 200) got[i] = json::parse(r->body);
      });
    }
    for (auto& t : threads) t.join();
    int64_t accepted = 0, rejected = 0;
    for (int i = 0; i < kClients; ++i) {
      ASSERT_TRUE(got[i].is_object()) << draft[0] << " " << i << " (head log " << head.log() << ")";
      EXPECT_EQ(got[i]["choices"][0]["message"]["content"], alone[i]) << draft[0] << " " << i;
      accepted +=
          got[i]["usage"]["completion_tokens_details"]["accepted_prediction_tokens"].get<int64_t>();
      rejected +=
          got[i]["usage"]["completion_tokens_details"]["rejected_prediction_tokens"].get<int64_t>();
    }
    EXPECT_GT(accepted + rejected, 0) << draft[0];
    if (draft[0] == "-md") {
      EXPECT_EQ(rejected, 0);  // the model drafting for itself
      EXPECT_GT(accepted, 0);
    }
  }
}

// A worker killed while four streams are being decoded: the head re-forms the ring without it
// and every stream finishes with the text it has alone on one device; /health then says
// "degraded" and names the lost worker, and later requests are served by the smaller ring.
// A worker started again at the lost address rejoins at the next idle moment.
TEST(ServeRing, StreamsSurviveALostWorkerThatThenRejoins) {
  const std::string model = hearth::testing::write_model(
      (hearth::testing::scratch_dir() /
       ("hearth_serve_recovery_" + std::to_string(::getpid()) + ".gguf"))
          .string(),
      {8, 512, 8, 4, 1536, 2048, "q8_0", 11});
  constexpr int kClients = 4;
  auto request = [](int i) {
    json b = chat(i);
    b["max_tokens"] = 120;
    return b;
  };
  std::vector<std::string> alone;
  {
    ServeProc single({"-c", "512", "--repack", "off"}, model);
    auto c = single.client();
    for (int i = 0; i < kClients; ++i) {
      auto r = c.Post("/v1/chat/completions", request(i).dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      alone.push_back(json::parse(r->body)["choices"][0]["message"]["content"]);
    }
  }
  hearth::testing::WorkerProcess w1({"-m", model, "--repack", "off"});
  hearth::testing::WorkerProcess w2({"-m", model, "--repack", "off"});
  ASSERT_FALSE(w1.address().empty()) << w1.log();
  ASSERT_FALSE(w2.address().empty()) << w2.log();
  ServeProc head({"-c", "512", "--parallel", "4", "--repack", "off", "--workers",
                  w1.address() + "," + w2.address(), "--plan", "2,3,3"},
                 model);
  std::vector<SseStream> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) threads.push_back(stream_in_thread(head, request(i), got[i]));
  // Once the ring has made some decode steps for the four streams, the second worker dies.
  auto c = head.client();
  auto passes = [&] {
    auto m = c.Get("/metrics");
    const std::string name = "\nhearth_forward_passes_total ";
    const size_t at = m ? m->body.find(name) : std::string::npos;
    return at == std::string::npos ? 0.0 : std::stod(m->body.substr(at + name.size()));
  };
  for (int i = 0; i < 2000 && passes() < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  w2.kill_with(SIGKILL);
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(got[i].done) << i << " (head log " << head.log() << ")";
    EXPECT_EQ(got[i].text, alone[i]) << i;
  }
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  const json health = json::parse(h->body);
  EXPECT_EQ(health["status"], "degraded") << h->body;
  EXPECT_EQ(health["ring"]["devices"], 2) << h->body;
  EXPECT_EQ(health["ring"]["devices_at_start"], 3) << h->body;
  EXPECT_EQ(health["ring"]["lost"], json::array({w2.address()})) << h->body;
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("\nhearth_ring_devices 2\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("\nhearth_ring_degraded 1\n"), std::string::npos);
  EXPECT_NE(metrics->body.find("\nhearth_ring_recoveries_total 1\n"), std::string::npos);
  // The smaller ring serves the next request as the single device does.
  auto r = c.Post("/v1/chat/completions", request(1).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], alone[1]);
  EXPECT_TRUE(w1.alive());

  hearth::testing::WorkerProcess back({"-m", model, "--repack", "off"}, w2.address());
  ASSERT_EQ(back.address(), w2.address()) << back.log();
  json now;
  for (int i = 0; i < 150; ++i) {  // the scheduler probes every 2 s when idle
    auto hh = c.Get("/health");
    if (hh) now = json::parse(hh->body);
    if (now["status"] == "ok") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(now["status"], "ok") << now.dump() << head.log();
  EXPECT_EQ(now["ring"]["devices"], 3) << now.dump();
  EXPECT_EQ(now["ring"]["rejoins"], 1) << now.dump();
  EXPECT_EQ(now["ring"]["lost"], json::array()) << now.dump();
  metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("\nhearth_ring_degraded 0\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("\nhearth_ring_joins_total 1\n"), std::string::npos);
  r = c.Post("/v1/chat/completions", request(2).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], alone[2]);
  // The rejoined worker computed: its process received the ring's work.
  EXPECT_NE(back.log().find("layers in"), std::string::npos) << back.log();
}

// --workers auto: the server starts with the one worker announcing, and a worker that starts
// announcing later joins at an idle moment (a re-plan, the ring grows); answers stay those of
// one device.
TEST(ServeRing, AWorkerAnnouncedLaterJoinsTheRing) {
  const std::string model = write_tiny_model(4);
  const std::string group = "239.255.72.72:" + std::to_string(40000 + ::getpid() % 20000);
  auto request = [](int i) {
    json b = chat(i);
    b["max_tokens"] = 12;
    return b;
  };
  std::vector<std::string> alone;
  {
    ServeProc single({"-c", "512", "--repack", "off"}, model);
    auto c = single.client();
    for (int i = 0; i < 2; ++i) {
      auto r = c.Post("/v1/chat/completions", request(i).dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      alone.push_back(json::parse(r->body)["choices"][0]["message"]["content"]);
    }
  }
  const std::vector<std::string> announce = {"-m",         model,         "--repack", "off",
                                             "--announce", "--discovery", group};
  hearth::testing::WorkerProcess first(announce);
  ASSERT_FALSE(first.address().empty()) << first.log();
  ServeProc head({"-c", "512", "--repack", "off", "--workers", "auto", "--discovery", group,
                  "--discover-time", "2"},
                 model);
  auto c = head.client();
  auto health = [&] {
    auto h = c.Get("/health");
    return h ? json::parse(h->body) : json{};
  };
  EXPECT_EQ(health()["ring"]["devices"], 2) << head.log();
  auto r = c.Post("/v1/chat/completions", request(0).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], alone[0]);

  hearth::testing::WorkerProcess later(announce);
  ASSERT_FALSE(later.address().empty()) << later.log();
  json now;
  for (int i = 0; i < 150; ++i) {  // announced every second, probed every 2 s when idle
    now = health();
    if (now["ring"]["devices"] == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(now["ring"]["devices"], 3) << now.dump() << head.log();
  EXPECT_EQ(now["status"], "ok") << now.dump();
  r = c.Post("/v1/chat/completions", request(1).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], alone[1]);
  EXPECT_NE(later.log().find("layers in"), std::string::npos) << later.log();
}

}  // namespace
}  // namespace hearth::serve::testing
