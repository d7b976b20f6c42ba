// `hearth serve` with paged KV (the default, --kv-block 128): requests that share a system
// prompt point at one copy of it; a pool too small for every request at once makes requests
// wait or sets the newest back, and every greedy answer stays what a server with one
// contiguous cache per request gives; a request waiting past --queue-timeout gets a 503 with
// Retry-After, streamed or not.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "serve/serve_process.h"
#include "support/subprocess.h"

namespace hearth::serve::testing {
namespace {

using nlohmann::json;

// The requests' bodies posted at once; each answer's parsed JSON (null when not a 200).
std::vector<json> post_all(ServeProc& server, const std::vector<json>& bodies) {
  std::vector<json> got(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i) {
    threads.emplace_back([&, i] {
      auto c = server.client();
      c.set_read_timeout(120);
      auto r = c.Post("/v1/chat/completions", bodies[i].dump(), "application/json");
      if (r && r->status == 200) got[i] = json::parse(r->body);
    });
  }
  for (auto& t : threads) t.join();
  return got;
}

// A system prompt of a few hundred tokens, as chat front ends send with every request.
std::string long_system_prompt() {
  std::string s = "You are the assistant of one home. ";
  for (int i = 0; i < 24; ++i) s += "Rule " + std::to_string(i) + ": answer plainly and briefly. ";
  return s;
}

json chat(const std::string& system, const std::string& user, int max_tokens) {
  return {{"messages",
           {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

// Four requests with one long system prompt, posted at once: the first computes the prompt,
// the others wait for it and point at its blocks (or find it cached if they come later).
TEST(ServePaged, RequestsShareTheSystemPromptAndAnswerAsAlone) {
  ServeProc paged({"--parallel", "4", "-c", "1024", "--kv-block", "16"});
  ServeProc flat({"--parallel", "4", "-c", "1024", "--kv-block", "0", "--no-prompt-cache"});
  const std::string system = long_system_prompt();
  std::vector<json> bodies;
  for (int i = 0; i < 4; ++i) {
    bodies.push_back(chat(system, "question number " + std::to_string(i), 8 + i));
  }
  const auto want = post_all(flat, bodies);
  const auto got = post_all(paged, bodies);
  double shared = 0, prompt = 0;
  for (size_t i = 0; i < bodies.size(); ++i) {
    ASSERT_TRUE(got[i].is_object() && want[i].is_object()) << i << paged.log();
    EXPECT_EQ(got[i]["choices"][0]["message"], want[i]["choices"][0]["message"]) << i;
    shared += got[i]["usage"]["prompt_tokens_details"]["cached_tokens"].get<double>();
    prompt = got[i]["usage"]["prompt_tokens"].get<double>();
  }
  // Three of the four found at least the system prompt (over 300 tokens) cached.
  EXPECT_GT(prompt, 300);
  EXPECT_GE(shared, 3 * (prompt - 20)) << "shared " << shared << " of prompts of " << prompt;
  EXPECT_EQ(paged.metric("hearth_prompt_tokens_cached_total"), shared);
  EXPECT_EQ(paged.metric("hearth_kv_block_positions"), 16);
  EXPECT_GT(paged.metric("hearth_kv_blocks_total"), 0);
  EXPECT_EQ(flat.metric("hearth_kv_blocks_total"), -1);  // not paged: no such gauge
}

// Six requests of up to 110 positions each against a pool of 160 positions (ten blocks of
// 16): they cannot all run at once, so they wait for blocks or are set back and computed
// again, and still answer as with unbounded contiguous caches.
TEST(ServePaged, ASmallPoolQueuesRequestsAndKeepsTheirAnswers) {
  ServeProc small({"--parallel", "4", "-c", "256", "--kv-block", "16", "--kv-pool", "160"});
  ServeProc flat({"--parallel", "4", "-c", "256", "--kv-block", "0"});
  std::vector<json> bodies;
  for (int i = 0; i < 6; ++i) {
    bodies.push_back(chat("be brief", "tell me story " + std::to_string(i), 60 + 8 * i));
  }
  const auto want = post_all(flat, bodies);
  const auto got = post_all(small, bodies);
  for (size_t i = 0; i < bodies.size(); ++i) {
    ASSERT_TRUE(got[i].is_object() && want[i].is_object()) << i << small.log();
    EXPECT_EQ(got[i]["choices"][0]["message"], want[i]["choices"][0]["message"]) << i;
    EXPECT_EQ(got[i]["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(got[i]["usage"]["completion_tokens"], 60 + 8 * static_cast<int>(i));
  }
  EXPECT_EQ(small.metric("hearth_kv_blocks_total"), 10);
  EXPECT_LE(small.metric("hearth_kv_blocks_in_use"), 10);
  // Present (-1 when missing); how many were set back depends on when the requests arrived,
  // the answers above must not.
  EXPECT_GE(small.metric("hearth_requests_set_back_total"), 0);
  // A request the pool can never hold fails clearly, and the server goes on.
  const json huge = chat("be brief", "hi", 240);
  auto c = small.client();
  auto r = c.Post("/v1/chat/completions", huge.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->body;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");  // the pool is its context
  EXPECT_LE(j["usage"]["total_tokens"].get<int>(), 161);
  const auto again = post_all(small, {bodies[0]});
  ASSERT_TRUE(again[0].is_object());
  EXPECT_EQ(again[0]["choices"][0]["message"], want[0]["choices"][0]["message"]);
}

// One slot, busy with a long reply: requests behind it wait past --queue-timeout and get a
// 503 with Retry-After, plain and streamed (the stream has not started, so it can).
TEST(ServePaged, WaitingPastTheQueueTimeoutGives503) {
  ServeProc server({"--parallel", "1", "-c", "8192", "--queue-timeout", "0.05"});
  std::string long_status;
  std::thread busy([&] {
    auto c = server.client();
    c.set_read_timeout(120);
    auto r =
        c.Post("/v1/chat/completions", chat("be brief", "count", 6000).dump(), "application/json");
    long_status = r ? std::to_string(r->status) : "none";
  });
  // Until the long request holds the slot.
  for (int i = 0; i < 200 && server.metric("hearth_active_sequences") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (bool stream : {false, true}) {
    json body = chat("be brief", "me too", 4);
    body["stream"] = stream;
    auto c = server.client();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "10");
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
    EXPECT_EQ(j["error"]["code"], "server_busy");
    EXPECT_NE(j["error"]["message"].get<std::string>().find("--queue-timeout"), std::string::npos);
  }
  busy.join();
  EXPECT_EQ(long_status, "200");
}

// Bad paged-KV flags are usage errors that name the flag, before any port is opened.
TEST(ServePaged, BadFlagsAreUsageErrors) {
  for (const char* flags :
       {"--kv-block 24", "--kv-block 8", "--kv-pool abc", "--kv-pool 0", "--queue-timeout -1"}) {
    const auto r = hearth::testing::run_hearth("serve -m " + tiny_model() + " --port 0 " + flags);
    EXPECT_NE(r.exit_code, 0) << flags;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find(' '));
    EXPECT_NE(r.err.find(flag), std::string::npos) << flags << ": " << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << flags;
  }
}

}  // namespace
}  // namespace hearth::serve::testing
