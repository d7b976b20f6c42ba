// The ring end to end: real `hearth worker` processes on 127.0.0.1 and `hearth run
// --workers` as the head, on a small synthetic model. Greedy ids must equal the single-device
// run for every ring shape (the hidden state crosses the wire as exact f32 and the engine is
// deterministic), and failures must be named, bounded in time, and survivable for workers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hearth/model/synth.h"
#include "hearth/net/transport.h"
#include "support/cluster_key.h"
#include "support/profile_file.h"
#include "support/scratch_dir.h"
#include "support/subprocess.h"
#include "support/worker_process.h"

extern char** environ;

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;

fs::path test_dir() {
  return hearth::testing::scratch_subdir("hearth_ring_test");
}

// 8 layers so plans with k = 1, 2, 4 rounds and a partial last round all fit.
std::string make_model(const std::string& file, const std::string& name,
                       model::Arch arch = model::Arch::kLlama, int layers = 8) {
  model::SynthOptions opt;
  opt.hp.arch = arch;
  opt.hp.qkv_bias = arch == model::Arch::kQwen2;
  const bool qwen3 = arch == model::Arch::kQwen3 || arch == model::Arch::kQwen3Moe;
  opt.hp.qk_norm = qwen3;
  opt.hp.n_layers = static_cast<uint32_t>(layers);
  opt.hp.dim = 256;
  opt.hp.n_heads = 4;
  opt.hp.n_kv_heads = 2;
  opt.hp.head_dim = qwen3 ? 128 : 64;
  if (arch == model::Arch::kQwen3Moe) {
    opt.hp.n_experts = 16;
    opt.hp.n_experts_used = 4;
    opt.hp.ffn_expert = 256;
  }
  opt.hp.ffn = 512;
  opt.hp.vocab = 512;
  opt.hp.ctx_train = 16384;
  opt.types = model::parse_type_recipe("q8_0");
  opt.seed = 7;
  opt.name = name;
  opt.threads = 1;
  const std::string path = (test_dir() / file).string();
  model::write_synthetic_model(opt, path);
  return path;
}

// A worker serving `model`.
class WorkerProc : public hearth::testing::WorkerProcess {
 public:
  // --repack off on every device and the single-device baseline: k = 1 devices would repack
  // (auto) and k > 1 devices never do, and the rows16 kernels sum in another order, so ids
  // could only be compared up to near-ties otherwise (repacking itself: engine_test.cpp).
  explicit WorkerProc(const std::string& model) : WorkerProcess({"-m", model, "--repack", "off"}) {}
};

struct RunResult {
  int status = -1;
  std::string out, err;
  nlohmann::json summary;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run_head(const std::string& model, const std::string& extra, int n_predict = 12,
                   const std::string& prompt = "the fire in the hearth") {
  const std::string err = (test_dir() / "head.err").string();
  const std::string cmd = std::string(HEARTH_BIN_PATH) + " run -m " + model + " -p '" + prompt +
                          "' -t 1 --temp 0 --ignore-eos --json "
                          "--repack off -n " +
                          std::to_string(n_predict) + " " + extra + " 2>" + err;
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  r.status = pclose(p);
  r.err = slurp(err);
  // The summary is the last line of stdout.
  const size_t end = r.out.find_last_not_of('\n');
  const size_t start = end == std::string::npos ? 0 : r.out.rfind('\n', end);
  if (r.status == 0 && end != std::string::npos) {
    r.summary = nlohmann::json::parse(r.out.substr(start == std::string::npos ? 0 : start + 1),
                                      nullptr, false);
  }
  return r;
}

class Ring : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(make_model("ring.gguf", "hearth-ring-test"));
    const auto base = run_head(*model_, "");
    ASSERT_EQ(base.status, 0) << base.err;
    baseline_ = new std::vector<int>(base.summary["ids"].get<std::vector<int>>());
    ASSERT_EQ(baseline_->size(), 12u);
  }
  static void TearDownTestSuite() {
    fs::remove_all(test_dir());
    delete model_;
    delete baseline_;
  }
  static std::string* model_;
  static std::vector<int>* baseline_;
};
std::string* Ring::model_ = nullptr;
std::vector<int>* Ring::baseline_ = nullptr;

// 1 (baseline), 2 and 3 devices; k = 1, 2, 4 rounds and partial last rounds, some ending
// on the head and one ending inside a worker's window. The same workers serve every head in
// turn (each goes back to waiting when the previous head leaves).
TEST_F(Ring, GreedyIdsEqualSingleDeviceForEveryPlan) {
  WorkerProc w1(*model_), w2(*model_);
  ASSERT_FALSE(w1.address().empty()) << w1.log();
  ASSERT_FALSE(w2.address().empty()) << w2.log();
  struct Case {
    std::vector<const WorkerProc*> workers;
    std::string plan;
    int k;
  };
  const std::vector<Case> cases = {
      {{&w1}, "even", 1},
      {{&w1}, "3,5", 1},
      {{&w1}, "2,2", 2},
      {{&w1}, "1,1", 4},
      {{&w1}, "2,1", 3},  // W = 3: partial last round on the head
      {{&w1, &w2}, "even", 1},
      {{&w1, &w2}, "1,1,2", 2},
      {{&w1, &w2}, "1,1,1", 3},  // partial last round ends inside device 1's window
      {{&w2, &w1}, "2,1,3", 2},  // workers in the other order, ends on device 1
      {{&w1, &w2}, "1,1,1 --prefetch off", 3},
      {{&w1}, "1,1 --prefetch off", 4},
  };
  for (const auto& c : cases) {
    std::string addrs;
    for (const auto* w : c.workers) addrs += (addrs.empty() ? "" : ",") + w->address();
    const auto r = run_head(*model_, "--workers " + addrs + " --plan " + c.plan);
    ASSERT_EQ(r.status, 0) << c.plan << "\n" << r.err << "\n" << w1.log() << w2.log();
    EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), *baseline_) << "plan " << c.plan;
    EXPECT_EQ(r.summary["plan"]["k"].get<int>(), c.k) << "plan " << c.plan;
    EXPECT_EQ(r.summary["plan"]["devices"].size(), c.workers.size() + 1);
    EXPECT_NE(r.err.find("layers per round"), std::string::npos) << r.err;
    // With k > 1 and prefetch on, the head advised its next windows.
    const bool prefetch = c.plan.find("off") == std::string::npos;
    EXPECT_EQ(r.summary["prefetch"]["head_bytes"].get<uint64_t>() > 0, prefetch && c.k > 1)
        << c.plan;
  }
  EXPECT_TRUE(w1.alive());
  EXPECT_TRUE(w2.alive());
}

// Pipelined prefill: the prompt goes around the ring in chunks that follow each other; the
// ids are the single device's for k = 1, k = 2 (chunks meet later rounds at the head), a head
// without layers (the last worker sends each round straight to the first), and chunks that
// do not divide the prompt.
TEST_F(Ring, PipelinedPrefillGivesThePlainIds) {
  WorkerProc w1(*model_), w2(*model_);
  const std::string addrs = w1.address() + "," + w2.address();
  std::string prompt;
  for (int i = 0; i < 8; ++i) prompt += "the fire in the hearth and the smoke in the sky ";
  const auto base = run_head(*model_, "", 8, prompt);
  ASSERT_EQ(base.status, 0) << base.err;
  const auto want = base.summary["ids"].get<std::vector<int>>();
  const int n_prompt = base.summary["prompt_tokens"].get<int>();
  ASSERT_GT(n_prompt, 40);
  for (const char* plan : {"even", "1,1,2", "0,2,2"}) {
    for (int chunk : {0, 7, 16}) {
      const std::string flags = std::string("--workers ") + addrs + " --plan " + plan +
                                " --pipeline-chunk " + std::to_string(chunk);
      const auto r = run_head(*model_, flags, 8, prompt);
      ASSERT_EQ(r.status, 0) << flags << "\n" << r.err << w1.log() << w2.log();
      EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), want) << flags;
      const int expect_chunk = chunk == 0 ? n_prompt : chunk;
      EXPECT_EQ(r.summary["prefill"]["chunk"].get<int>(), expect_chunk) << flags;
      EXPECT_EQ(r.summary["prefill"]["chunks"].get<int>(),
                (n_prompt + expect_chunk - 1) / expect_chunk)
          << flags;
    }
  }
  // Chunks one after another (the baseline pipelining is measured against).
  const auto serial =
      run_head(*model_, "--workers " + addrs + " --plan 1,1,2 --pipeline-chunk 7 --prefill-serial",
               8, prompt);
  ASSERT_EQ(serial.status, 0) << serial.err;
  EXPECT_EQ(serial.summary["ids"].get<std::vector<int>>(), want);
  EXPECT_FALSE(serial.summary["prefill"]["pipelined"].get<bool>());
  // Pipelined prefill and drafts verified in chunks of fewer tokens than a trip carries.
  const auto r = run_head(*model_,
                          "--workers " + addrs + " --plan 1,1,2 --pipeline-chunk 3 -md " + *model_ +
                              " --draft-p-min 0 --draft-max 6",
                          8, prompt);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), want);
  EXPECT_EQ(r.summary["accepted"], r.summary["drafted"]);
  EXPECT_TRUE(w1.alive());
  EXPECT_TRUE(w2.alive());
  EXPECT_NE(run_head(*model_, "--workers " + addrs + " --pipeline-chunk some", 8, prompt).status,
            0);
}

// Speculative decoding on a 3-process ring at k = 1 and k = 2: a draft model on the head (the
// target itself, so every draft passes, and a 2-layer one whose drafts mostly fail) and prompt
// lookup; rejected drafts are rolled back on every device, so the ids stay the plain ones.
TEST_F(Ring, DraftingGivesThePlainIdsOnEveryDevice) {
  const std::string small =
      make_model("ring-small.gguf", "hearth-ring-small", model::Arch::kLlama, 2);
  WorkerProc w1(*model_), w2(*model_);
  const std::string addrs = w1.address() + "," + w2.address();
  const std::string repeat = "the fire in the hearth the fire in the hearth the fire in the";
  const auto base = run_head(*model_, "", 24, repeat);
  ASSERT_EQ(base.status, 0) << base.err;
  const auto want = base.summary["ids"].get<std::vector<int>>();
  for (const char* plan : {"even", "1,1,2"}) {
    for (const std::string& draft : {"-md " + *model_ + " --draft-p-min 0 --draft-max 4",
                                     "-md " + small + " --draft-p-min 0 --draft-max 3",
                                     std::string("--draft-lookup --draft-ngram-min 1")}) {
      const auto r =
          run_head(*model_, "--workers " + addrs + " --plan " + plan + " " + draft, 24, repeat);
      ASSERT_EQ(r.status, 0) << plan << " " << draft << "\n" << r.err << w1.log() << w2.log();
      EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), want) << plan << " " << draft;
      const auto drafted = r.summary["drafted"].get<int64_t>();
      const auto accepted = r.summary["accepted"].get<int64_t>();
      EXPECT_GT(drafted, 0) << plan << " " << draft;
      EXPECT_EQ(accepted + r.summary["trips"].get<int64_t>(), 23) << plan << " " << draft;
      if (draft.find(*model_) != std::string::npos) {
        EXPECT_EQ(accepted, drafted) << plan;
        EXPECT_EQ(r.summary["trips"].get<int64_t>(), 5) << plan;  // 23 tokens, 5 a trip
      } else {
        EXPECT_LT(accepted, drafted) << plan << " " << draft;  // rejections were rolled back
      }
    }
  }
  EXPECT_TRUE(w1.alive());
  EXPECT_TRUE(w2.alive());
}

// Under --plan auto a draft model's memory is kept off the head before Halda plans: a head
// that holds the whole model alone (8 MiB) leaves its layers to a worker once a draft model
// of the same size must fit beside them; the ids stay the same.
TEST_F(Ring, PlanAutoKeepsTheDraftModelsMemoryOnTheHead) {
  const auto profile = [](const std::string& name, double gib) {
    return hearth::testing::write_profile_file((test_dir() / (name + ".json")).string(), name, gib);
  };
  hearth::testing::WorkerProcess w1(
      {"-m", *model_, "--repack", "off", "--name", "w1", "--profile", profile("w1", 0.02)});
  hearth::testing::WorkerProcess w2(
      {"-m", *model_, "--repack", "off", "--name", "w2", "--profile", profile("w2", 0.02)});
  const std::string flags = "--workers " + w1.address() + "," + w2.address() +
                            " --plan auto --profile " + profile("head", 0.008);
  const auto plain = run_head(*model_, flags);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const auto drafted = run_head(*model_, flags + " -md " + *model_ + " --draft-p-min 0");
  ASSERT_EQ(drafted.status, 0) << drafted.err;
  EXPECT_NE(drafted.err.find("kept for the draft model"), std::string::npos) << drafted.err;
  const int head_plain = plain.summary["plan"]["devices"][0]["w"].get<int>();
  const int head_drafted = drafted.summary["plan"]["devices"][0]["w"].get<int>();
  EXPECT_GT(head_plain, 0);
  EXPECT_LT(head_drafted, head_plain);
  EXPECT_EQ(drafted.summary["ids"], plain.summary["ids"]);
  EXPECT_EQ(drafted.summary["ids"].get<std::vector<int>>(), *baseline_);
}

// A Qwen family on four devices: k = 1, k = 2, and a partial last round.
void four_devices_give_the_single_device_ids(model::Arch arch) {
  const std::string name = model::arch_name(arch);
  const std::string qwen = make_model("ring-" + name + ".gguf", "hearth-ring-" + name, arch);
  const auto base = run_head(qwen, "");
  ASSERT_EQ(base.status, 0) << base.err;
  const auto want = base.summary["ids"].get<std::vector<int>>();
  WorkerProc w1(qwen), w2(qwen), w3(qwen);
  const std::string addrs = w1.address() + "," + w2.address() + "," + w3.address();
  for (const auto& [plan, k] : std::vector<std::pair<std::string, int>>{
           {"even", 1}, {"1,1,1,1", 2}, {"2,1,1,1", 2}, {"1,1,1,1 --prefetch off", 2}}) {
    const auto r = run_head(qwen, "--workers " + addrs + " --plan " + plan);
    ASSERT_EQ(r.status, 0) << plan << "\n" << r.err << "\n" << w1.log() << w2.log() << w3.log();
    EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), want) << "plan " << plan;
    EXPECT_EQ(r.summary["plan"]["k"].get<int>(), k) << "plan " << plan;
    EXPECT_EQ(r.summary["plan"]["devices"].size(), 4u);
  }
}

// qwen2: neox rope, q/k/v biases.
TEST(RingQwen2, FourDevicesGiveTheSingleDeviceIds) {
  four_devices_give_the_single_device_ids(model::Arch::kQwen2);
}

// qwen3: per-head q/k norms, attention wider than the stream.
TEST(RingQwen3, FourDevicesGiveTheSingleDeviceIds) {
  four_devices_give_the_single_device_ids(model::Arch::kQwen3);
}

// qwen3moe: a mixture of experts in every window, routed on each device.
TEST(RingQwen3Moe, FourDevicesGiveTheSingleDeviceIds) {
  four_devices_give_the_single_device_ids(model::Arch::kQwen3Moe);
}

// The head's KV cache types reach every worker (Assign.kv_type_*): a ring with quantized
// caches gives the ids of one device with the same caches, which differ from the f16 ids.
TEST_F(Ring, WorkersUseTheHeadsKvCacheTypes) {
  const std::string types = "-ctk q4_0 -ctv q4_0";
  const auto local = run_head(*model_, types, 24);
  ASSERT_EQ(local.status, 0) << local.err;
  const auto want = local.summary["ids"].get<std::vector<int>>();
  const auto f16 = run_head(*model_, "", 24);
  ASSERT_EQ(f16.status, 0) << f16.err;
  // Otherwise this test could not tell whether the workers quantize.
  ASSERT_NE(f16.summary["ids"].get<std::vector<int>>(), want);
  WorkerProc w1(*model_), w2(*model_);
  for (const std::string plan : {"1,1,2", "1,1,1"}) {
    const auto r = run_head(
        *model_, types + " --workers " + w1.address() + "," + w2.address() + " --plan " + plan, 24);
    ASSERT_EQ(r.status, 0) << plan << "\n" << r.err << "\n" << w1.log() << w2.log();
    EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), want) << "plan " << plan;
  }
}

TEST_F(Ring, WorkerWithAnotherModelIsRefused) {
  const std::string other = make_model("other.gguf", "some-other-model");
  WorkerProc w(other);
  const auto r = run_head(*model_, "--workers " + w.address());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(w.address()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("different model"), std::string::npos) << r.err;
  EXPECT_TRUE(w.alive());
}

TEST_F(Ring, BadPlanIsAUsageError) {
  WorkerProc w(*model_);
  const auto r = run_head(*model_, "--workers " + w.address() + " --plan 1,2,3");
  EXPECT_EQ(WEXITSTATUS(r.status), 2) << r.err;
  EXPECT_NE(r.err.find("--plan"), std::string::npos) << r.err;
}

TEST_F(Ring, DeadWorkerAddressIsNamed) {
  // Nobody listens there: the handshake times out and names the address.
  const auto r = run_head(*model_, "--workers tcp://127.0.0.1:1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("tcp://127.0.0.1:1"), std::string::npos) << r.err;
}

// Garbage and out-of-session messages to a worker are dropped; it still serves a head.
TEST_F(Ring, GarbageFromAPeerDoesNotKillTheWorker) {
  WorkerProc w(*model_);
  {
    auto c = net::connect(w.address(), hearth::testing::keyed());
    std::mt19937 rng(3);
    for (int i = 0; i < 20; ++i) {
      std::vector<uint8_t> junk(1 + rng() % 200);
      for (auto& b : junk) b = static_cast<uint8_t>(rng());
      if (i % 2 == 0 && junk.size() >= 4) std::copy_n("HRTH", 4, junk.begin());
      c->send_raw(junk);
    }
    c->send(net::Stop{"not in a session"});
    c->send(net::Activations{0, 0, false, 1, {{0, 0, 1}}, {1.0f}});
    c->send(net::Ping{1, 2});
    EXPECT_TRUE(std::holds_alternative<net::Pong>(c->recv(net::Millis{5000}, "Pong").body));
  }
  ASSERT_TRUE(w.alive());
  const auto r = run_head(*model_, "--workers " + w.address() + " --plan 5,3");
  ASSERT_EQ(r.status, 0) << r.err << w.log();
  EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), *baseline_);
  EXPECT_NE(w.log().find("dropped"), std::string::npos) << w.log();
}

// A worker that dies (SIGKILL) or freezes (SIGSTOP: its link stays up but ZMTP heartbeats
// stop) mid-generation, with recovery off (--recover 0): the head exits non-zero naming it,
// within a few seconds (RingRecovery.* covers the default, which re-forms the ring).
void expect_head_stops_naming(const std::string& model, int sig, double limit_s) {
  WorkerProc w1(model), w2(model);
  const std::string err = (test_dir() / ("failed_" + std::to_string(sig) + ".err")).string();
  const std::string cmd = std::string(HEARTH_BIN_PATH) + " run -m " + model +
                          " -p hello -t 1 --temp 0 --ignore-eos -n 15000 -c 16384 --workers " +
                          w1.address() + "," + w2.address() +
                          " --plan 1,1,1 --recover 0 >/dev/null 2>" + err;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Let generation get going (the head's stderr shows the plan once the ring is up).
  for (int i = 0; i < 100 && slurp(err).find("layers per round") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  if (sig == SIGKILL) {
    w2.kill_with(SIGKILL);
  } else {
    w2.signal(sig);
  }
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sig == SIGSTOP) w2.signal(SIGCONT);
  if (done == 0) {
    ::kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "head still running " << secs << " s after the worker failed";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  const std::string e = slurp(err);
  EXPECT_NE(e.find(w2.address()), std::string::npos) << e;
  EXPECT_LT(secs, limit_s) << e;
  std::printf("head stopped %.2f s after signal %d to the worker\n", secs, sig);
}

TEST_F(Ring, KilledWorkerStopsTheHeadWithItsName) {
  expect_head_stops_naming(*model_, SIGKILL, 5.0);
}

// `hearth keygen` writes a private key file and will not overwrite one; with --key-file on
// worker and head the ring is encrypted and gives the single-device ids, and a head holding
// another key, or none, cannot even say Hello, is told why, and leaves the worker serving.
TEST_F(Ring, KeyFileEncryptsTheRingAndShutsOutOtherKeys) {
  const std::string bin = HEARTH_BIN_PATH;
  const std::string a = (test_dir() / "a.key").string(), b = (test_dir() / "b.key").string();
  ASSERT_EQ(std::system((bin + " keygen " + a + " >/dev/null").c_str()), 0);
  ASSERT_EQ(std::system((bin + " keygen " + b + " >/dev/null").c_str()), 0);
  EXPECT_EQ(fs::status(a).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const std::string before = slurp(a);
  EXPECT_NE(std::system((bin + " keygen " + a + " 2>/dev/null").c_str()), 0);
  EXPECT_EQ(slurp(a), before);  // the key the devices hold is not replaced
  EXPECT_NE(slurp(b), before);

  hearth::testing::WorkerProcess w({"-m", *model_, "--repack", "off", "--key-file", a});
  ASSERT_FALSE(w.address().empty()) << w.log();
  const auto wrong = run_head(*model_, "--workers " + w.address() + " --key-file " + b, 4);
  EXPECT_NE(wrong.status, 0);
  EXPECT_NE(wrong.err.find("cluster key"), std::string::npos) << wrong.err;
  const auto plain = run_head(*model_, "--workers " + w.address() + " --insecure", 4);
  EXPECT_NE(plain.status, 0);
  EXPECT_NE(plain.err.find("--key-file"), std::string::npos) << plain.err;
  const auto default_key = run_head(*model_, "--workers " + w.address(), 4);  // HEARTH_KEY_FILE
  EXPECT_NE(default_key.status, 0);
  EXPECT_TRUE(w.alive());
  const auto r = run_head(*model_, "--workers " + w.address() + " --key-file " + a);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.summary["ids"].get<std::vector<int>>(), *baseline_);

  // The same key typed from a pairing code on a device the file was not copied to.
  const auto code = hearth::testing::run_hearth("keygen --show-code " + a);
  ASSERT_EQ(code.exit_code, 0) << code.err;
  EXPECT_EQ(slurp(a), before);  // showing the code does not touch the file
  const std::string c = (test_dir() / "c.key").string();
  std::string typed = code.out.substr(0, code.out.find('\n'));
  const auto made = hearth::testing::run_hearth("keygen --from-code " + typed + " " + c);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto coded = run_head(*model_, "--workers " + w.address() + " --key-file " + c);
  ASSERT_EQ(coded.status, 0) << coded.err;
  EXPECT_EQ(coded.summary["ids"].get<std::vector<int>>(), *baseline_);
  typed[3] = typed[3] == 'A' ? 'B' : 'A';
  const auto typo = hearth::testing::run_hearth("keygen --from-code " + typed + " " + c + "2");
  EXPECT_EQ(typo.exit_code, 2) << typo.err;
  EXPECT_NE(typo.err.find("mistyped"), std::string::npos) << typo.err;
  EXPECT_FALSE(fs::exists(c + "2"));
}

// Links are private by default: a device that must open links and finds no key at the default
// path refuses to start and says how to get one; a head alone needs none; --insecure runs
// plain TCP with a warning, and a plain device and an encrypted one cannot talk.
TEST_F(Ring, NoKeyRefusesToStartUnlessInsecure) {
  const std::string bin = HEARTH_BIN_PATH;
  const std::string missing = (test_dir() / "no-such.key").string();
  const std::string no_key = "HEARTH_KEY_FILE=" + missing + " " + bin;
  const auto npos = std::string::npos;
  auto r =
      hearth::testing::run_command(no_key + " worker --listen tcp://127.0.0.1:0 -m " + *model_);
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.err.find("no cluster key at " + missing), npos) << r.err;
  EXPECT_NE(r.err.find("hearth keygen"), npos) << r.err;
  EXPECT_NE(r.err.find("--insecure"), npos) << r.err;
  const std::string gen = " -m " + *model_ + " -p hi -n 2 -t 1 --temp 0";
  r = hearth::testing::run_command(no_key + " run" + gen + " --workers tcp://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.err.find("no cluster key"), npos) << r.err;
  r = hearth::testing::run_command(no_key + " run" + gen);
  EXPECT_EQ(r.exit_code, 0) << r.all();
  r = hearth::testing::run_command(bin + " worker --listen tcp://127.0.0.1:0 -m " + *model_ +
                                   " --insecure --key-file " + missing);
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.err.find("contradict"), npos) << r.err;

  hearth::testing::WorkerProcess w({"-m", *model_, "--repack", "off", "--insecure"});
  ASSERT_FALSE(w.address().empty()) << w.log();
  EXPECT_NE(w.log().find("plain TCP"), npos) << w.log();
  const auto encrypted = run_head(*model_, "--workers " + w.address(), 4);
  EXPECT_NE(encrypted.status, 0);
  EXPECT_TRUE(w.alive());
  const auto plain = run_head(*model_, "--workers " + w.address() + " --insecure");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.summary["ids"].get<std::vector<int>>(), *baseline_);
  EXPECT_NE(plain.err.find("plain TCP"), npos) << plain.err;
}

// Frozen peers are caught by the 2.5 s heartbeat timeout of the transport.
TEST_F(Ring, FrozenWorkerStopsTheHeadWithItsName) {
  expect_head_stops_naming(*model_, SIGSTOP, 9.0);
}

}  // namespace
}  // namespace hearth::cluster
