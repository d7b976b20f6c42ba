#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hearth/cluster/prefetcher.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/hparams.h"
#include "hearth/model/synth.h"
#include "hearth/model/weights.h"
#include "support/scratch_dir.h"

namespace hearth::cluster {
namespace {

// The prefetcher advises exactly the layers of the requested window (page-rounded) and
// nothing for an empty window.
TEST(WindowPrefetcher, AdvisesTheWindowsLayers) {
  model::SynthOptions opt;
  opt.hp.arch = model::Arch::kLlama;
  opt.hp.n_layers = 4;
  opt.hp.dim = 256;
  opt.hp.n_heads = 4;
  opt.hp.n_kv_heads = 2;
  opt.hp.head_dim = 64;
  opt.hp.ffn = 512;
  opt.hp.vocab = 512;
  opt.hp.ctx_train = 256;
  opt.threads = 1;
  const auto path =
      (hearth::testing::scratch_dir() / ("hearth_prefetch_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  model::write_synthetic_model(opt, path);
  const auto file = gguf::GgufFile::open(path);
  const auto weights = model::bind_weights(file, model::load_hparams(file));
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  auto expected = [&](int b, int e) {
    uint64_t total = 0;
    for (int l = b; l < e; ++l) {
      for (const auto& [ptr, len] : weights.layers[l].spans) {
        const uint64_t off = static_cast<uint64_t>(ptr - file.bytes().data());
        total += (off + len) - (off & ~(page - 1));
      }
    }
    return total;
  };
  WindowPrefetcher p(weights, file.bytes());
  p.request(Window{1, 3});
  p.drain();
  EXPECT_EQ(p.windows_advised(), 1u);
  EXPECT_EQ(p.bytes_advised(), expected(1, 3));
  EXPECT_GT(p.bytes_advised(), 0u);
  p.request(Window{3, 3});  // empty: nothing to do
  p.drain();
  EXPECT_EQ(p.windows_advised(), 1u);
  p.request(Window{0, 4});
  p.drain();
  EXPECT_EQ(p.bytes_advised(), expected(1, 3) + expected(0, 4));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hearth::cluster
