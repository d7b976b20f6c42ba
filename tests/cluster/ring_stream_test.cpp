// Greedy ids across residency modes on a real ring: a head and two `hearth worker` processes
// that stream part of their weights (--weight-memory below their share) give the ids of one
// device reading everything from the mapping, at k = 1 and k = 2, and with a head that holds
// no layers. Every device runs the GGUF layout (--repack off); one device on a repacked copy
// gives the same ids too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "support/scratch_dir.h"
#include "support/subprocess.h"
#include "support/synth_model.h"
#include "support/worker_process.h"

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;
using testing::last_json_line;
using testing::run_hearth;

TEST(RingStream, StreamingDevicesGiveTheIdsOfOneDevice) {
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_ring_stream_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model =
      testing::write_model((dir / "m.gguf").string(), {8, 256, 4, 2, 768, 512, "q4_k_m", 5});
  const std::string gen = " -p hello -n 8 -t 1 -c 64 --temp 0 --ignore-eos --json --repack off";
  const auto ref = run_hearth("run -m " + model + gen + " --residency mmap");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto ids = last_json_line(ref.out)["ids"];
  ASSERT_EQ(ids.size(), 8u);
  // The GGUF kernels take rows16's float steps (TypeTraits::gguf_rows16_bits): one device
  // reading a repacked copy gives the same ids as the streaming ring below.
  const auto packed = run_hearth("run -m " + model +
                                 " -p hello -n 8 -t 1 -c 64 --temp 0 --ignore-eos --json"
                                 " --repack on --residency mmap");
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  EXPECT_EQ(last_json_line(packed.out)["ids"], ids);

  // 0.5 MiB of weight memory per device: well below each one's share of the ~3 MiB model.
  const std::vector<std::string> wflags = {"-m",          model,    "--repack",        "off",
                                           "--residency", "stream", "--weight-memory", "0.5"};
  hearth::testing::WorkerProcess w1(wflags), w2(wflags);
  ASSERT_FALSE(w1.address().empty());
  ASSERT_FALSE(w2.address().empty());
  const std::string workers = " --workers " + w1.address() + "," + w2.address();
  for (const std::string plan : {"3,3,2", "1,2,1", "0,4,4", "0,2,2"}) {
    SCOPED_TRACE(plan);
    const auto r = run_hearth("run -m " + model + gen + workers + " --plan " + plan +
                              " --residency stream --weight-memory 0.5");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = last_json_line(r.out);
    EXPECT_EQ(j["ids"], ids);
    ASSERT_EQ(j["devices"].size(), 3u);
    // Hops per decoded token: each device sends once per round it computes in; a head without
    // layers sends once per token (the last worker hands the next round straight to the first).
    const int k = plan == "0,4,4" || plan == "3,3,2" ? 1 : 2;
    const int head_sends = plan[0] == '0' ? 1 : k;
    EXPECT_EQ(j["devices"][0]["sends_per_token"].get<double>(), head_sends) << j.dump();
    EXPECT_EQ(j["devices"][1]["sends_per_token"].get<double>(), k) << j.dump();
    EXPECT_EQ(j["devices"][2]["sends_per_token"].get<double>(), k) << j.dump();
    for (size_t m = 0; m < 3; ++m) {
      const auto& d = j["devices"][m];
      if (m == 0 && plan[0] == '0') continue;  // a head with no layers streams nothing
      EXPECT_GT(d["stream_bytes_per_token"].get<double>(), 0.0) << d.dump();
      EXPECT_GT(d["stream_buffer_bytes"].get<double>(), 0.0) << d.dump();
      EXPECT_EQ(d["decode_steps"].get<int>(), 7) << d.dump();
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// A mixture of experts on devices whose memory holds few of their experts: the others are
// read when routed, and the ids are those of one device holding everything.
TEST(RingStream, ExpertsReadWhenRoutedGiveTheIdsOfOneDevice) {
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_ring_moe_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = testing::write_moe_model((dir / "moe.gguf").string(), 4, "q4_k_m", 9);
  const std::string gen = " -p hello -n 8 -t 1 -c 64 --temp 0 --ignore-eos --json --repack off";
  const auto ref = run_hearth("run -m " + model + gen + " --residency mmap");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto ids = last_json_line(ref.out)["ids"];
  ASSERT_EQ(ids.size(), 8u);
  // The GGUF kernels take rows16's float steps (TypeTraits::gguf_rows16_bits): one device
  // reading a repacked copy gives the same ids as the streaming ring below.
  const auto packed = run_hearth("run -m " + model +
                                 " -p hello -n 8 -t 1 -c 64 --temp 0 --ignore-eos --json"
                                 " --repack on --residency mmap");
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  EXPECT_EQ(last_json_line(packed.out)["ids"], ids);
  // 1 MiB of weight memory per device, of 1.8 MiB of experts per layer.
  const std::vector<std::string> wflags = {"-m", model, "--repack", "off", "--weight-memory", "1"};
  hearth::testing::WorkerProcess w1(wflags), w2(wflags);
  ASSERT_FALSE(w1.address().empty());
  const std::string workers = " --workers " + w1.address() + "," + w2.address();
  for (const std::string plan : {"0,2,2", "1,1,2"}) {
    SCOPED_TRACE(plan);
    const auto r =
        run_hearth("run -m " + model + gen + workers + " --plan " + plan + " --weight-memory 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = last_json_line(r.out);
    EXPECT_EQ(j["ids"], ids);
    for (size_t m = 1; m < 3; ++m) {
      const auto& d = j["devices"][m];
      EXPECT_GT(d["expert_reads_per_token"].get<double>(), 0.0) << d.dump();
      EXPECT_GT(d["expert_bytes_per_token"].get<double>(), 0.0) << d.dump();
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(RingStream, BadResidencyFlagsAreUsageErrors) {
  for (const std::string args :
       {"run -m x.gguf -p hi --residency lru", "run -m x.gguf -p hi --weight-memory -5",
        "run -m x.gguf -p hi --stream-buffer lots", "run -m x.gguf -p hi --stream-io mmap",
        "run -m x.gguf -p hi --plan auto --rounds 0", "serve -m x.gguf --rounds -2",
        "serve -m x.gguf --stream-io fast", "run -m x.gguf -p hi --recover -1",
        "serve -m x.gguf --recover 100",
        "worker --listen tcp://127.0.0.1:0 -m x.gguf "
        "--residency sometimes"}) {
    SCOPED_TRACE(args);
    const auto r = run_hearth(args);
    EXPECT_EQ(r.exit_code, 2) << r.all();
    const auto flag =
        args.substr(args.rfind("--"), args.find(' ', args.rfind("--")) - args.rfind("--"));
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  }
  // A head window below zero is refused before anything is loaded.
  const auto r = run_hearth("run -m x.gguf -p hi --plan -1,2 --workers tcp://127.0.0.1:1");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace hearth::cluster
