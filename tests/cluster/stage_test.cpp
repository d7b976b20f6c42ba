// One device's stage (cluster/stage.h): streaming part of the weights through the buffer gives
// bitwise the logits of reading them all from the mapping, for one round and for several, and
// reads exactly the streamed bytes each token.
#include "hearth/cluster/stage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/profiler/model_profiler.h"
#include "hearth/residency/page_ranges.h"
#include "support/scratch_dir.h"
#include "support/synth_model.h"

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;

std::string make_model() {
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_stage_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return testing::write_model((dir / "m.gguf").string(), {6, 256, 4, 2, 768, 512, "q4_k_m", 11});
}

struct StageRun {
  std::vector<std::vector<float>> logits;  // per step
  residency::DeviceTotals totals;
  StageLayout layout;
  StreamCounters stream;
};

// The head's stage over `windows` (one thread, 64 positions, the file's layout).
StageOptions head_stage(std::vector<Window> windows, ResidencyOptions ro = {}) {
  StageOptions so;
  so.windows = std::move(windows);
  so.threads = 1;
  so.n_ctx = 64;
  so.with_output = true;
  ro.repack = model::RepackMode::kOff;
  so.residency = ro;
  return so;
}

// A prompt of 5 tokens, then 6 decode steps with fixed ids, through `windows`.
StageRun run_stage(const gguf::GgufFile& file, std::vector<Window> windows, ResidencyOptions ro) {
  Stage stage(file, head_stage(std::move(windows), ro));
  const auto& hp = stage.engine().hparams();
  StageRun out;
  int64_t pos = 0;
  const std::vector<std::vector<int32_t>> steps = {
      {1, 7, 42, 99, 3}, {5}, {77}, {300}, {2}, {8}, {9}};
  for (const auto& toks : steps) {
    std::vector<float> hidden(toks.size() * hp.dim);
    stage.engine().embed(toks, hidden.data());
    const model::BatchSegment seg{0, pos, static_cast<int64_t>(toks.size())};
    for (int r = 0; r < stage.rounds(); ++r) {
      stage.run_window(r, std::span<const model::BatchSegment>(&seg, 1), hidden.data());
    }
    std::vector<float> logits(hp.vocab);
    const model::EvalItem item{0, toks, logits.data()};
    stage.logits(std::span<const model::EvalItem>(&item, 1), hidden.data());
    stage.finish_step(toks.size() == 1);
    out.logits.push_back(std::move(logits));
    pos += static_cast<int64_t>(toks.size());
  }
  out.totals = stage.totals();
  out.layout = stage.layout();
  return out;
}

TEST(Stage, StreamingGivesTheSameLogitsBitwiseAndReadsTheStreamedPart) {
  const auto path = make_model();
  const auto file = gguf::GgufFile::open(path);
  ResidencyOptions mmap;
  mmap.mode = ResidencyMode::kMmap;
  const StageRun ref = run_stage(file, {{0, 6}}, mmap);
  ASSERT_EQ(ref.layout.mode, ResidencyMode::kMmap);

  ResidencyOptions st;
  st.mode = ResidencyMode::kAuto;
  st.weight_memory = ref.layout.stream.assigned_bytes / 2;  // half of it must stream
  for (const std::vector<Window>& windows :
       {std::vector<Window>{{0, 6}}, std::vector<Window>{{0, 3}, {3, 6}},
        std::vector<Window>{{0, 2}, {2, 4}, {4, 6}}})
    for (const StreamIo io : {StreamIo::kDirect, StreamIo::kCache})
      // A device of 1 MiB reads matrices in row slices of 64 KiB (the smallest): the gate, up
      // and down matrices in parts, the attention groups whole.
      for (const uint64_t total : {uint64_t{0}, uint64_t{1} << 20}) {
        SCOPED_TRACE(::testing::Message() << windows.size() << " rounds, " << stream_io_name(io)
                                          << ", total memory " << total);
        st.stream_io = io;
        st.total_memory = total;
        const StageRun s = run_stage(file, windows, st);
        ASSERT_EQ(s.layout.mode, ResidencyMode::kStream);
        const auto& plan = s.layout.stream;
        ASSERT_FALSE(plan.fits());
        EXPECT_EQ(plan.sliced.empty(), total == 0);
        for (const auto& it : plan.items) EXPECT_LE(it.bytes, total == 0 ? UINT64_MAX : 80000u);
        EXPECT_LE(plan.resident_bytes, plan.weight_budget_bytes);
        EXPECT_EQ(plan.weight_budget_bytes + plan.buffer_bytes, st.weight_memory);
        ASSERT_EQ(s.logits.size(), ref.logits.size());
        for (size_t i = 0; i < ref.logits.size(); ++i) {
          EXPECT_EQ(s.logits[i], ref.logits[i]) << "step " << i;
        }
        // Every decode step reads the streamed groups once: the reader runs ahead by at most the
        // buffer, so the sum over the decode steps is within a buffer of steps x one pass.
        uint64_t pass = 0;
        for (const auto& it : plan.items) pass += it.bytes;
        const double steps = static_cast<double>(s.totals.decode_steps);
        ASSERT_EQ(s.totals.decode_steps, 6u);
        const double streamed = s.totals.decode_sum.stream_bytes;
        EXPECT_GE(streamed, steps * pass - static_cast<double>(plan.buffer_bytes));
        EXPECT_LE(streamed, steps * pass + static_cast<double>(plan.buffer_bytes));
        EXPECT_GT(s.totals.decode_sum.read_ms, 0.0);
        // The process's own storage reads (page faults, readahead, direct I/O) cover the streamed
        // bytes when the reads bypass the page cache; with buffered reads they may hit the cache.
        if (s.layout.direct_io && residency::process_read_bytes()) {
          EXPECT_GE(s.totals.decode_sum.disk_bytes, 0.9 * (steps * pass - plan.buffer_bytes));
        }
      }
}

// A mixture of experts whose experts do not all fit: the dense weights take memory first,
// the experts what is left; the others are read where the router picks them. Logits are
// bitwise those of a device that holds everything, each token's routed experts are counted,
// and a read takes only the expert's own bytes (whole aligned blocks: at most 1.15 x).
TEST(Stage, ExpertsThatDoNotFitAreReadWhenRouted) {
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_stage_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = testing::write_moe_model((dir / "moe.gguf").string(), 4, "q8_0", 3);
  const auto file = gguf::GgufFile::open(path);
  const model::HParams hp = model::load_hparams(file);
  ResidencyOptions all;
  all.weight_memory = uint64_t{1} << 34;
  const StageRun ref = run_stage(file, {{0, 4}}, all);
  const auto views = model::bind_weights(file, model::load_hparams(file));
  const uint64_t one = ExpertStore::expert_bytes(views.layers[0].experts[0]);
  const uint64_t experts = one * hp.n_experts * hp.n_layers;
  const uint64_t dense = ref.layout.stream.assigned_bytes - experts;
  const std::vector<int> layers = {0, 1, 2, 3};
  const uint64_t buffer = ExpertStore::buffer_bytes_for(views, layers);
  struct Case {
    std::vector<Window> windows;
    uint64_t weight_memory;
    bool streams;  // the dense weights do not fit either
  };
  for (const Case& c : {Case{{{0, 4}}, dense + buffer + experts * 3 / 10, false},
                        Case{{{0, 2}, {2, 4}}, dense + buffer + experts / 2, false},
                        Case{{{0, 4}}, dense / 2, true}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.windows.size() << " rounds, weight memory " << c.weight_memory);
    ResidencyOptions ro;
    ro.weight_memory = c.weight_memory;
    const StageRun s = run_stage(file, c.windows, ro);
    EXPECT_EQ(s.layout.mode == ResidencyMode::kStream, c.streams);
    ASSERT_EQ(s.logits.size(), ref.logits.size());
    for (size_t i = 0; i < ref.logits.size(); ++i) EXPECT_EQ(s.logits[i], ref.logits[i]) << i;
    const auto& d = s.totals.decode_sum;
    EXPECT_EQ(d.expert_uses, 6.0 * hp.n_layers * hp.n_experts_used);
    EXPECT_GT(d.expert_reads, 0.0);
    if (c.streams) {
      EXPECT_EQ(d.expert_reads, d.expert_uses);  // nothing left for resident experts
    } else {
      EXPECT_LT(d.expert_reads, d.expert_uses);
    }
    EXPECT_LE(d.expert_bytes, 1.15 * d.expert_reads * static_cast<double>(one));
    EXPECT_GE(d.expert_bytes, d.expert_reads * static_cast<double>(one));
    EXPECT_EQ(d.expert_active_bytes, d.expert_reads * static_cast<double>(one));
    EXPECT_LE(d.expert_bytes, 1.15 * d.expert_active_bytes);
  }
  // A device that holds every expert has no store: nothing read, nothing counted.
  EXPECT_EQ(ref.totals.decode_sum.expert_uses, 0.0);
}

// A streaming device reads its resident part in before it reports ready, so the first tokens
// do not fault it in while the streamer reads: right after the stage is built, with the file
// out of the page cache before, every page of the resident part is in the cache.
TEST(Stage, TheResidentPartIsInMemoryWhenTheStageIsReady) {
  // Matrices of megabytes: the kernel's read-around of the small tensors between them (norms,
  // read at start) does not reach across them.
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_stage_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path =
      testing::write_model((dir / "wide.gguf").string(), {2, 1024, 8, 8, 4096, 512, "q8_0", 5});
  const auto file = gguf::GgufFile::open(path);
  residency::MappedPages pages(file.bytes(), path);
  const std::vector<residency::ByteRange> whole = {{file.bytes().data(), file.bytes().size()}};
  ResidencyOptions mmap;
  mmap.mode = ResidencyMode::kMmap;
  const uint64_t assigned = run_stage(file, {{0, 2}}, mmap).layout.stream.assigned_bytes;
  ResidencyOptions st;
  st.weight_memory = assigned / 4 * 3;
  pages.release(whole);
  ASSERT_LT(pages.resident_bytes(whole), file.bytes().size() / 4) << "the cache kept the file";
  Stage stage(file, head_stage({{0, 2}}, st));
  ASSERT_EQ(stage.layout().mode, ResidencyMode::kStream);
  const auto resident = stage.resident_ranges(Window{0, 2});
  ASSERT_GT(pages.span_bytes(resident), uint64_t{2} << 20);  // several matrices
  EXPECT_EQ(pages.resident_bytes(resident), pages.span_bytes(resident));
}

TEST(Stage, FitsMeansNothingStreamedEvenInStreamMode) {
  const auto path = make_model();
  const auto file = gguf::GgufFile::open(path);
  ResidencyOptions st;
  st.mode = ResidencyMode::kStream;
  st.weight_memory = uint64_t{1} << 30;
  const StageRun s = run_stage(file, {{0, 6}}, st);
  EXPECT_TRUE(s.layout.stream.fits());
  EXPECT_EQ(s.totals.decode_sum.stream_bytes, 0.0);
  EXPECT_EQ(s.totals.sum.stream_buffer_bytes, 0.0);
}

TEST(Stage, HeadWithNoLayersEmbedsAndComputesLogits) {
  const auto path = make_model();
  const auto file = gguf::GgufFile::open(path);
  Stage stage(file, head_stage({Window{0, 0}}));
  EXPECT_TRUE(stage.engine().layers().empty());
  const std::vector<int32_t> toks = {4};
  std::vector<float> hidden(stage.engine().hparams().dim);
  stage.engine().embed(toks, hidden.data());
  const model::BatchSegment seg{0, 0, 1};
  stage.run_window(0, std::span<const model::BatchSegment>(&seg, 1), hidden.data());  // no-op
  std::vector<float> logits(stage.engine().hparams().vocab);
  const model::EvalItem item{0, toks, logits.data()};
  stage.logits(std::span<const model::EvalItem>(&item, 1), hidden.data());
  EXPECT_NE(logits[0], 0.0f);
}

// The plan reserves working buffers for profiler::kStageRows rows: a longer prompt's scratch is
// given back when its step ends, and the answers stay those of an engine that kept it.
TEST(Stage, ALongPromptsScratchIsGivenBackAfterItsStep) {
  const auto path = make_model();
  const auto file = gguf::GgufFile::open(path);
  ResidencyOptions mmap;
  mmap.mode = ResidencyMode::kMmap;
  Stage stage(file, head_stage({Window{0, 6}}, mmap));
  model::EngineOptions eo;
  eo.threads = 1;
  eo.n_ctx = 64;
  eo.repack = model::RepackMode::kOff;
  model::Engine plain(file, eo);
  const auto& hp = stage.engine().hparams();
  const uint64_t working = profiler::stage_working_bytes(hp);

  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + 7 * i);
  ASSERT_GT(prompt.size(), profiler::kStageRows);
  int64_t pos = 0;
  for (const std::vector<int32_t>& toks : {prompt, {5}, {77}, {300}}) {
    std::vector<float> hidden(toks.size() * hp.dim);
    stage.engine().embed(toks, hidden.data());
    const model::BatchSegment seg{0, pos, static_cast<int64_t>(toks.size())};
    stage.run_window(0, std::span<const model::BatchSegment>(&seg, 1), hidden.data());
    if (toks.size() > 1) {
      EXPECT_GT(stage.engine().scratch_bytes(), working);
    }
    std::vector<float> logits(hp.vocab), want(hp.vocab);
    const model::EvalItem item{0, toks, logits.data()};
    stage.logits(std::span<const model::EvalItem>(&item, 1), hidden.data());
    stage.finish_step(toks.size() == 1);
    EXPECT_LE(stage.engine().scratch_bytes(), working) << "after the step at position " << pos;
    plain.eval(0, toks, want.data());
    EXPECT_EQ(logits, want) << "step at position " << pos;
    pos += static_cast<int64_t>(toks.size());
  }
}

TEST(Stage, ResidencyModeParsesAndRefuses) {
  EXPECT_EQ(parse_residency_mode("auto"), ResidencyMode::kAuto);
  EXPECT_EQ(parse_residency_mode("stream"), ResidencyMode::kStream);
  EXPECT_EQ(parse_residency_mode("mmap"), ResidencyMode::kMmap);
  EXPECT_THROW(parse_residency_mode("lru"), Error);
}

}  // namespace
}  // namespace hearth::cluster
