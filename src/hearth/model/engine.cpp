#include "hearth/model/engine.h"

#include "hearth/model/router.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <thread>

#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/compute/activation.h"
#include "hearth/compute/attention.h"
#include "hearth/compute/norm.h"
#include "hearth/gguf/tensor_type.h"
#include "hearth/quant/type_traits.h"

namespace hearth::model {

namespace {

int default_threads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

compute::RopeConfig rope_config(const ModelWeights& w) {
  const HParams& hp = w.hp;
  compute::RopeConfig c;
  c.head_dim = static_cast<int>(hp.head_dim);
  c.n_rot = static_cast<int>(hp.head_dim);
  c.base = hp.rope_base;
  c.freq_scale = hp.rope_freq_scale;
  // llama.cpp rotates adjacent pairs for llama (its converter permutes Q/K to match) and
  // halves (neox order) for qwen2.
  c.order = is_qwen(hp.arch) ? compute::RopeOrder::kNeox : compute::RopeOrder::kNormal;
  if (w.rope_freqs != nullptr) c.freq_factors.assign(w.rope_freqs, w.rope_freqs + hp.head_dim / 2);
  return c;
}

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

template <typename T>
void trim(std::vector<T>& v, size_t n) {
  if (v.capacity() > n) std::vector<T>().swap(v);
}

}  // namespace

Engine::Engine(const gguf::GgufFile& file, const EngineOptions& options)
    : weights_(bind_weights(file, load_hparams(file))),
      n_ctx_(options.n_ctx > 0 ? options.n_ctx : default_n_ctx(weights_.hp)),
      kv_types_(options.kv_types),
      pool_(default_threads(options.threads)),
      rope_(rope_config(weights_)) {
  const int n_layers = static_cast<int>(weights_.hp.n_layers);
  layers_ = options.layers;
  if (layers_.empty() && !options.no_layers) {
    for (int l = 0; l < n_layers; ++l) layers_.push_back(l);
  }
  std::sort(layers_.begin(), layers_.end());
  layers_.erase(std::unique(layers_.begin(), layers_.end()), layers_.end());
  local_index_.assign(n_layers, -1);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i] < 0 || layers_[i] >= n_layers) {
      throw UsageError(
          fmt::format("layer {} does not exist (the model has {})", layers_[i], n_layers));
    }
    local_index_[layers_[i]] = static_cast<int>(i);
  }
  if (n_ctx_ <= 0) throw UsageError("context size must be positive");
  // Refuse a cache type the model's heads cannot use now, not at the first token.
  compute::kv_row_bytes(kv_types_.k, static_cast<int>(weights_.hp.head_dim));
  compute::kv_row_bytes(kv_types_.v, static_cast<int>(weights_.hp.head_dim));
  if (options.kv_block != 0) {
    if (options.kv_pool < 0) {
      throw UsageError(fmt::format("KV pool of {} positions: must be >= 0", options.kv_pool));
    }
    const int64_t block = options.kv_block;
    const int64_t max_blocks = options.kv_pool > 0
                                   ? std::max<int64_t>(1, (options.kv_pool + block - 1) / block)
                                   : int64_t{1} << 30;
    kv_pool_ = std::make_unique<compute::KvBlockPool>(
        std::max<int>(1, static_cast<int>(layers_.size())),
        static_cast<int>(weights_.hp.n_kv_heads), static_cast<int>(weights_.hp.head_dim),
        options.kv_block, max_blocks, kv_types_);
  }
  repack(options);
}

RepackMode parse_repack_mode(const std::string& text) {
  static constexpr EnumName<RepackMode> kNames[] = {
      {RepackMode::kAuto, "auto"}, {RepackMode::kOn, "on"}, {RepackMode::kOff, "off"}};
  return parse_enum(kNames, text, "--repack");
}

void Engine::repack(const EngineOptions& options) {
  const RepackMode mode = options.repack;
  const bool with_output = options.with_output;
  if (mode == RepackMode::kOff) return;
  std::vector<WeightView*> todo;
  for (int l : layers_) {
    LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    for (WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router}) {
      if (w->data != nullptr && compute::rows16_worthwhile(*w)) todo.push_back(w);
    }
    for (ExpertWeights& E : L.experts) {
      for (WeightView* w : {&E.gate, &E.up, &E.down}) {
        if (compute::rows16_worthwhile(*w)) todo.push_back(w);
      }
    }
  }
  if (with_output && compute::rows16_worthwhile(weights_.output)) todo.push_back(&weights_.output);
  // Each copy starts on a 64-byte line.
  auto padded = [](uint64_t b) { return (b + 63) & ~uint64_t{63}; };
  uint64_t bytes = 0;
  for (const WeightView* w : todo) bytes += padded(compute::rows16_bytes(*w));
  if (bytes == 0) return;
  if (mode == RepackMode::kAuto && options.memory_available > 0 &&
      bytes > options.memory_available / 2) {
    log::info(
        "engine: not repacking {} MiB of weights: {} MiB available ({}); --repack on "
        "forces it",
        bytes >> 20, options.memory_available >> 20, options.memory_source);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  repacked_ = HugeBuffer(bytes);
  uint64_t off = 0;
  for (WeightView* w : todo) {
    const uint64_t b = compute::rows16_bytes(*w);
    *w = compute::repack_rows16(pool_, *w, repacked_.data() + off);
    off += padded(b);
  }
  repacked_bytes_ = bytes;
  log::info(
      "engine: repacked {} matrices ({} MiB) into the rows16 layout in {:.0f} ms", todo.size(),
      bytes >> 20,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

void Engine::pin_small_tensors() {
  if (!pinned_.empty()) return;  // done already
  const HParams& hp = weights_.hp;
  std::vector<std::pair<const float**, int64_t>> todo;  // (pointer to repoint, floats)
  for (int l : layers_) {
    LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    todo.emplace_back(&L.attn_norm, hp.dim);
    todo.emplace_back(&L.ffn_norm, hp.dim);
    if (L.bq != nullptr) {
      todo.emplace_back(&L.bq, hp.q_dim());
      todo.emplace_back(&L.bk, hp.kv_dim());
      todo.emplace_back(&L.bv, hp.kv_dim());
    }
    if (L.q_norm != nullptr) {
      todo.emplace_back(&L.q_norm, hp.head_dim);
      todo.emplace_back(&L.k_norm, hp.head_dim);
    }
  }
  todo.emplace_back(&weights_.output_norm, hp.dim);
  int64_t total = 0;
  for (const auto& [ptr, n] : todo) total += *ptr != nullptr ? n : 0;
  pinned_.assign(static_cast<size_t>(total), 0.0f);  // allocated once: pointers stay valid
  int64_t off = 0;
  for (const auto& [ptr, n] : todo) {
    if (*ptr == nullptr) continue;
    std::copy_n(*ptr, n, pinned_.data() + off);
    *ptr = pinned_.data() + off;
    off += n;
  }
  // rope_freqs were read into the rope table at construction; nothing else reads them.
}

bool Engine::owns_layer(int layer) const {
  return layer >= 0 && layer < static_cast<int>(local_index_.size()) && local_index_[layer] >= 0;
}

void Engine::embed(std::span<const int32_t> tokens, float* hidden) const {
  const auto& e = weights_.token_embd;
  const auto& tr = quant::traits(e.type);
  const uint64_t row_bytes = *gguf::row_bytes(e.type, static_cast<uint64_t>(e.cols));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    if (id < 0 || id >= e.rows) {
      throw UsageError(
          fmt::format("token id {} is outside the vocabulary (0..{})", id, e.rows - 1));
    }
    const auto* row = static_cast<const uint8_t*>(e.data) + static_cast<uint64_t>(id) * row_bytes;
    tr.to_float(row, hidden + i * e.cols, e.cols);
  }
}

compute::KvCache& Engine::cache_for(int64_t seq) {
  auto it = caches_.find(seq);
  if (it == caches_.end()) {
    const HParams& hp = weights_.hp;
    auto cache = kv_pool_ ? std::make_unique<compute::KvCache>(*kv_pool_, n_ctx_)
                          : std::make_unique<compute::KvCache>(
                                static_cast<int>(layers_.size()), static_cast<int>(hp.n_kv_heads),
                                static_cast<int>(hp.head_dim), n_ctx_, kv_types_);
    it = caches_.emplace(seq, std::move(cache)).first;
  }
  return *it->second;
}

int64_t Engine::seq_length(int64_t seq) const {
  const auto it = caches_.find(seq);
  return it == caches_.end() ? 0 : it->second->length();
}

void Engine::truncate(int64_t seq, int64_t n_pos) {
  const auto it = caches_.find(seq);
  if (it != caches_.end()) it->second->truncate(n_pos);
}

void Engine::drop(int64_t seq) {
  caches_.erase(seq);
}

void Engine::share_prefix(int64_t src, int64_t dst, int64_t n_pos) {
  if (!kv_pool_) throw UsageError("sharing a prompt prefix needs paged KV (kv_block)");
  const auto it = caches_.find(src);
  if (it == caches_.end() || src == dst) {
    throw UsageError(fmt::format("sharing a prefix of sequence {}: no such other sequence", src));
  }
  cache_for(dst).share_prefix(*it->second, n_pos);
}

int64_t Engine::kv_blocks_owned(int64_t seq) const {
  const auto it = caches_.find(seq);
  return it == caches_.end() ? 0 : it->second->blocks_owned();
}

int64_t Engine::kv_blocks_needed(int64_t seq, int64_t n_tokens) const {
  if (!kv_pool_) return 0;
  const auto it = caches_.find(seq);
  if (it == caches_.end()) return kv_pool_->blocks_for(n_tokens);
  return it->second->blocks_needed(it->second->length(), n_tokens);
}

void Engine::project(const WeightView& w, const float* x, int64_t n, float* y) {
  if (n == 1) {
    compute::matvec(pool_, w, x, y);
  } else {
    compute::matmul(pool_, w, x, n, y);
  }
}

// Matrices that read the same input rows (Q/K/V, gate/up) share their activation
// quantization through matmul_many (for one row matvec_many: one pool dispatch, which halves
// the barriers per layer; for several the tokens prepared once for the matrices whose kernels
// read them alike). Each result is bitwise what matvec / matmul gives alone.
void Engine::project2(const WeightView& a, const WeightView& b, const float* x, int64_t n,
                      float* ya, float* yb) {
  const WeightView ws[2] = {a, b};
  float* const ys[2] = {ya, yb};
  compute::matmul_many(pool_, ws, 2, x, n, ys);
}

void Engine::project3(const WeightView& a, const WeightView& b, const WeightView& c, const float* x,
                      int64_t n, float* ya, float* yb, float* yc) {
  const WeightView ws[3] = {a, b, c};
  float* const ys[3] = {ya, yb, yc};
  compute::matmul_many(pool_, ws, 3, x, n, ys);
}

void Engine::project_group(WeightFeed* feed, int layer, MatrixGroup g, GroupViews v, const float* x,
                           int64_t n, std::initializer_list<float*> outputs) {
  float* ys[3] = {nullptr, nullptr, nullptr};
  int count = 0;
  for (float* y : outputs) ys[count++] = y;
  const std::span<const GroupPart> parts =
      feed != nullptr ? feed->parts(layer, g) : std::span<const GroupPart>{};
  if (parts.empty()) {
    if (feed != nullptr) feed->acquire(layer, g, v);
    if (count == 3) {
      project3(*v.views[0], *v.views[1], *v.views[2], x, n, ys[0], ys[1], ys[2]);
    } else if (count == 2) {
      project2(*v.views[0], *v.views[1], x, n, ys[0], ys[1]);
    } else {
      project(*v.views[0], x, n, ys[0]);
    }
    if (feed != nullptr) feed->release(layer, g);
    return;
  }
  // Part after part: rows [r0, r1) of view j give columns [r0, r1) of ys[j]'s rows.
  for (size_t i = 0; i < parts.size(); ++i) {
    const GroupPart& part = parts[i];
    const WeightView& whole = *v.views[part.view];
    if (whole.layout != compute::WeightLayout::kGguf) {
      throw UsageError("engine: a feed splits a matrix that is not in the GGUF layout");
    }
    const uint64_t row_bytes = *gguf::row_bytes(whole.type, static_cast<uint64_t>(whole.cols));
    WeightView slice = whole;
    slice.rows = part.row_end - part.row_begin;
    slice.data =
        static_cast<const uint8_t*>(whole.data) + static_cast<uint64_t>(part.row_begin) * row_bytes;
    feed->acquire_part(layer, g, static_cast<int>(i), slice);
    float* y = ys[part.view];
    if (n == 1) {
      compute::matvec(pool_, slice, x, y + part.row_begin);
    } else {
      grow(slice_out_, n * slice.rows);
      compute::matmul(pool_, slice, x, n, slice_out_.data());
      for (int64_t t = 0; t < n; ++t) {
        std::copy_n(slice_out_.data() + t * slice.rows, slice.rows,
                    y + t * whole.rows + part.row_begin);
      }
    }
    feed->release_part(layer, g, static_cast<int>(i));
  }
}

void Engine::forward_layers(int64_t seq, int layer_begin, int layer_end, float* hidden,
                            int64_t pos0, int64_t n_tokens) {
  if (n_tokens <= 0) return;
  const BatchSegment one{seq, pos0, n_tokens};
  forward_batch(std::span<const BatchSegment>(&one, 1), layer_begin, layer_end, hidden);
}

void Engine::forward_batch(std::span<const BatchSegment> segments, int layer_begin, int layer_end,
                           float* hidden, WeightFeed* feed) {
  const int64_t n = batch_rows(segments);
  for (int l = layer_begin; l < layer_end; ++l) {
    if (!owns_layer(l)) throw UsageError(fmt::format("layer {} is not assigned to this device", l));
  }
  // Check every segment before touching any cache: a refused batch changes nothing.
  for (const BatchSegment& s : segments) {
    if (s.pos0 + s.n_tokens > n_ctx_) {
      throw UsageError(
          fmt::format("context full: {} positions do not fit in the context of {} (use -c)",
                      s.pos0 + s.n_tokens, n_ctx_));
    }
    const auto it = caches_.find(s.seq);
    for (int l = layer_begin; l < layer_end; ++l) {
      const int64_t have = it == caches_.end() ? 0 : it->second->length(local_index_[l]);
      if (have != s.pos0) {
        throw UsageError(
            fmt::format("sequence {} has {} cached positions in layer {}, batch starts at {}",
                        s.seq, have, l, s.pos0));
      }
    }
  }
  if (kv_pool_) {
    int64_t need = 0;
    for (const BatchSegment& s : segments) need += kv_blocks_needed(s.seq, s.n_tokens);
    if (need > kv_pool_->available()) {
      throw compute::KvPoolFull(
          fmt::format("KV pool full: this batch needs {} blocks of {} positions, {} of {} are free",
                      need, kv_pool_->block_rows(), kv_pool_->available(), kv_pool_->capacity()));
    }
  }
  batch_caches_.clear();
  positions_.clear();
  for (const BatchSegment& s : segments) {
    batch_caches_.push_back(&cache_for(s.seq));
    for (int64_t t = 0; t < s.n_tokens; ++t) positions_.push_back(s.pos0 + t);
  }
  rope_.compute(positions_);
  for (int l = layer_begin; l < layer_end; ++l) {
    layer_forward(l, feed, segments, batch_caches_, hidden, n);
  }
}

namespace {

// A layer's matrices as this pass reads them: the engine's views, or where a feed points
// them.
struct LayerMatrices {
  WeightView wq, wk, wv, wo, w_gate, w_up, w_down;

  explicit LayerMatrices(const LayerWeights& L)
      : wq(L.wq), wk(L.wk), wv(L.wv), wo(L.wo), w_gate(L.w_gate), w_up(L.w_up), w_down(L.w_down) {}
  GroupViews group(MatrixGroup g) {
    switch (g) {
      case MatrixGroup::kQkv:
        return GroupViews{{&wq, &wk, &wv}, 3};
      case MatrixGroup::kOut:
        return GroupViews{{&wo, nullptr, nullptr}, 1};
      case MatrixGroup::kGateUp:
        return GroupViews{{&w_gate, &w_up, nullptr}, 2};
      case MatrixGroup::kDown:
        break;
    }
    return GroupViews{{&w_down, nullptr, nullptr}, 1};
  }
};

}  // namespace

void Engine::layer_forward(int layer, WeightFeed* feed, std::span<const BatchSegment> segments,
                           std::span<compute::KvCache* const> caches, float* x, int64_t n) {
  const LayerWeights& L = weights_.layers[static_cast<size_t>(layer)];
  const int local = local_index_[layer];
  LayerMatrices M(L);
  const HParams& hp = weights_.hp;
  const int64_t dim = hp.dim, q_dim = hp.q_dim(), kv_dim = hp.kv_dim(), ffn = hp.ffn;
  const auto bufs = scratch();
  for (size_t i = 0; i < kLayerScratch; ++i) {
    grow(*bufs[i].buf, static_cast<size_t>(n) * bufs[i].per_row);
  }

  // Attention block. Norms, projections and rope work row by row over all sequences' rows.
  compute::rmsnorm(x, L.attn_norm, xn_.data(), n, dim, hp.rms_eps);
  project_group(feed, layer, MatrixGroup::kQkv, M.group(MatrixGroup::kQkv), xn_.data(), n,
                {q_.data(), k_.data(), v_.data()});
  if (L.bq != nullptr) {
    for (int64_t t = 0; t < n; ++t) {
      compute::add(q_.data() + t * q_dim, L.bq, q_.data() + t * q_dim, q_dim);
      compute::add(k_.data() + t * kv_dim, L.bk, k_.data() + t * kv_dim, kv_dim);
      compute::add(v_.data() + t * kv_dim, L.bv, v_.data() + t * kv_dim, kv_dim);
    }
  }
  if (L.q_norm != nullptr) {  // qwen3: every head of q and k is a row of head_dim
    compute::rmsnorm(q_.data(), L.q_norm, q_.data(), n * hp.n_heads, hp.head_dim, hp.rms_eps);
    compute::rmsnorm(k_.data(), L.k_norm, k_.data(), n * hp.n_kv_heads, hp.head_dim, hp.rms_eps);
  }
  compute::rope(q_.data(), 0, n, static_cast<int>(hp.n_heads), q_dim, rope_);
  compute::rope(k_.data(), 0, n, static_cast<int>(hp.n_kv_heads), kv_dim, rope_);
  // K/V and attention per sequence, each against its own cache.
  int64_t row = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    caches[i]->store(local, segments[i].pos0, segments[i].n_tokens, k_.data() + row * kv_dim,
                     v_.data() + row * kv_dim);
    row += segments[i].n_tokens;
  }
  const compute::AttentionShape shape{static_cast<int>(hp.n_heads), static_cast<int>(hp.n_kv_heads),
                                      static_cast<int>(hp.head_dim), 0.0f};
  // One pool dispatch for all sequences: part i takes its heads of every sequence.
  pool_.run([&](int part, int parts) {
    const auto r = compute::attention_split(shape, parts, part);
    if (r.begin >= r.end) return;
    int64_t row0 = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
      const BatchSegment& s = segments[i];
      compute::attention(shape, caches[i]->view(local), q_.data() + row0 * q_dim, q_dim,
                         attn_.data() + row0 * q_dim, q_dim, s.pos0, s.n_tokens, r.begin, r.end);
      row0 += s.n_tokens;
    }
  });
  project_group(feed, layer, MatrixGroup::kOut, M.group(MatrixGroup::kOut), attn_.data(), n,
                {proj_.data()});
  compute::add(x, proj_.data(), x, n * dim);

  // Feed-forward block (SwiGLU). silu_mul row by row so that a row's elements meet the same
  // vector/tail split whatever the number of rows.
  compute::rmsnorm(x, L.ffn_norm, xn_.data(), n, dim, hp.rms_eps);
  if (hp.is_moe()) {
    experts_forward(layer, xn_.data(), n, proj_.data());
    compute::add(x, proj_.data(), x, n * dim);
    return;
  }
  project_group(feed, layer, MatrixGroup::kGateUp, M.group(MatrixGroup::kGateUp), xn_.data(), n,
                {gate_.data(), up_.data()});
  for (int64_t t = 0; t < n; ++t) {
    compute::silu_mul(gate_.data() + t * ffn, up_.data() + t * ffn, gate_.data() + t * ffn, ffn);
  }
  project_group(feed, layer, MatrixGroup::kDown, M.group(MatrixGroup::kDown), gate_.data(), n,
                {proj_.data()});
  compute::add(x, proj_.data(), x, n * dim);
}

// A mixture-of-experts block over xn (n, dim) -> out (n, dim). Each row's result is the sum,
// in the router's order, of its k experts' outputs times their weights; every expert's product
// of a row is bitwise the same whichever other rows share the expert (matmul's contract), so a
// row's result does not depend on the batch it is in. The experts' matrices are read through
// the mapping (or their rows16 copies), never through a feed: which ones a token needs is known
// only here, after its router.
void Engine::experts_forward(int layer, const float* xn, int64_t n, float* out) {
  const LayerWeights& L = weights_.layers[static_cast<size_t>(layer)];
  const HParams& hp = weights_.hp;
  const int64_t dim = hp.dim, ffn = hp.ffn_expert;
  const int n_exp = static_cast<int>(hp.n_experts), k = static_cast<int>(hp.n_experts_used);
  project(L.router, xn, n, router_.data());
  moe_sel_.resize(static_cast<size_t>(n * k));
  for (int64_t t = 0; t < n; ++t) {
    route_token(router_.data() + t * n_exp, n_exp, k, moe_sel_.data() + t * k,
                moe_w_.data() + t * k);
  }
  if (n == 1) {
    // Decode: the k experts' gate and up projections in one dispatch (they read the same row),
    // then their k down projections in another.
    thread_local std::vector<WeightView> ws;
    thread_local std::vector<float*> ys;
    thread_local std::vector<const float*> xs;
    thread_local std::vector<ExpertWeights> views;
    views.clear();
    for (int j = 0; j < k; ++j) views.push_back(L.experts[static_cast<size_t>(moe_sel_[j])]);
    if (expert_feed_ != nullptr) {
      expert_feed_->acquire_experts(layer, std::span<const int32_t>(moe_sel_.data(), k), views);
    }
    ws.clear();
    ys.clear();
    for (int j = 0; j < k; ++j) {
      const ExpertWeights& E = views[static_cast<size_t>(j)];
      ws.push_back(E.gate);
      ws.push_back(E.up);
      ys.push_back(gate_.data() + j * ffn);
      ys.push_back(up_.data() + j * ffn);
    }
    compute::matvec_many(pool_, ws.data(), 2 * k, xn, ys.data());
    ws.clear();
    ys.clear();
    xs.clear();
    for (int j = 0; j < k; ++j) {
      float* g = gate_.data() + j * ffn;
      compute::silu_mul(g, up_.data() + j * ffn, g, ffn);
      ws.push_back(views[static_cast<size_t>(j)].down);
      xs.push_back(g);
      ys.push_back(moe_out_.data() + j * dim);
    }
    compute::matvec_each(pool_, ws.data(), k, xs.data(), ys.data());
  } else {
    // Prefill and batches: each chosen expert once, over the rows routed to it.
    thread_local std::vector<int64_t> slots;  // (row * k + j) of the rows routed to expert e
    for (int e = 0; e < n_exp; ++e) {
      slots.clear();
      for (int64_t i = 0; i < n * k; ++i) {
        if (moe_sel_[i] == e) slots.push_back(i);
      }
      if (slots.empty()) continue;
      const auto m = static_cast<int64_t>(slots.size());
      for (int64_t r = 0; r < m; ++r) {
        std::copy_n(xn + (slots[r] / k) * dim, dim, moe_x_.data() + r * dim);
      }
      ExpertWeights E = L.experts[static_cast<size_t>(e)];
      if (expert_feed_ != nullptr) {
        const int32_t id = e;
        expert_feed_->acquire_experts(layer, std::span<const int32_t>(&id, 1),
                                      std::span<ExpertWeights>(&E, 1));
      }
      project2(E.gate, E.up, moe_x_.data(), m, gate_.data(), up_.data());
      for (int64_t r = 0; r < m; ++r) {
        compute::silu_mul(gate_.data() + r * ffn, up_.data() + r * ffn, gate_.data() + r * ffn,
                          ffn);
      }
      project(E.down, gate_.data(), m, moe_x_.data());
      for (int64_t r = 0; r < m; ++r) {
        std::copy_n(moe_x_.data() + r * dim, dim, moe_out_.data() + slots[r] * dim);
      }
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * dim;
    const float* y = moe_out_.data() + t * k * dim;
    const float* w = moe_w_.data() + t * k;
    for (int64_t c = 0; c < dim; ++c) o[c] = w[0] * y[c];
    for (int j = 1; j < k; ++j) {
      for (int64_t c = 0; c < dim; ++c) o[c] += w[j] * y[j * dim + c];
    }
  }
}

void Engine::logits(const float* hidden_row, float* logits_out) {
  logits_rows(hidden_row, 1, logits_out);
}

void Engine::logits_rows(const float* rows, int64_t n_rows, float* logits_out) {
  if (n_rows <= 0) return;
  const HParams& hp = weights_.hp;
  grow(last_rows_, n_rows * hp.dim);
  compute::rmsnorm(rows, weights_.output_norm, last_rows_.data(), n_rows, hp.dim, hp.rms_eps);
  project(weights_.output, last_rows_.data(), n_rows, logits_out);
}

void Engine::eval(int64_t seq, std::span<const int32_t> tokens, float* logits_out) {
  if (tokens.empty()) return;
  const EvalItem one{seq, tokens, logits_out};
  eval_batch(std::span<const EvalItem>(&one, 1));
}

void Engine::eval_batch(std::span<const EvalItem> items) {
  if (layers_.size() != weights_.hp.n_layers) {
    throw UsageError(
        "eval() needs an engine that owns every layer; use forward_layers() on a stage");
  }
  const int64_t dim = weights_.hp.dim;
  std::vector<BatchSegment> segments;
  for (const EvalItem& it : items) {
    segments.push_back(
        BatchSegment{it.seq, seq_length(it.seq), static_cast<int64_t>(it.tokens.size())});
  }
  const int64_t n = batch_rows(segments);
  grow(hidden_, n * dim);
  int64_t row = 0;
  for (const EvalItem& it : items) {  // every id is checked before any cache changes
    embed(it.tokens, hidden_.data() + row * dim);
    row += static_cast<int64_t>(it.tokens.size());
  }
  forward_batch(segments, layers_.front(), layers_.back() + 1, hidden_.data());
  batch_logits(items, hidden_.data());
}

void Engine::batch_logits(std::span<const EvalItem> items, const float* hidden) {
  const int64_t dim = weights_.hp.dim, vocab = weights_.hp.vocab;
  // The rows that want logits (each item's last, or all of an all_logits item's), stacked:
  // (n_want, dim), and where each row's logits go.
  std::vector<float*> want;
  std::vector<float> rows;
  int64_t row = 0;
  for (const EvalItem& it : items) {
    const auto n = static_cast<int64_t>(it.tokens.size());
    row += n;
    if (it.logits == nullptr) continue;
    const int64_t first = it.all_logits ? row - n : row - 1;
    for (int64_t r = first; r < row; ++r) {
      want.push_back(it.logits + (r - first) * vocab);
      rows.insert(rows.end(), hidden + r * dim, hidden + (r + 1) * dim);
    }
  }
  if (want.size() == 1) {
    logits_rows(rows.data(), 1, want[0]);
  } else if (!want.empty()) {
    const auto k = static_cast<int64_t>(want.size());
    grow(logits_tmp_, k * vocab);  // (k, vocab)
    logits_rows(rows.data(), k, logits_tmp_.data());
    for (int64_t i = 0; i < k; ++i) {
      std::copy_n(logits_tmp_.begin() + i * vocab, vocab, want[i]);
    }
  }
}

std::array<Engine::ScratchBuffer, 16> Engine::scratch() const {
  const HParams& hp = weights_.hp;
  const size_t dim = hp.dim, q_dim = hp.q_dim(), kv_dim = hp.kv_dim();
  // A mixture-of-experts row has k experts' intermediates (decode computes them side by side).
  const size_t k = hp.n_experts_used;
  const size_t ffn = hp.is_moe() ? k * hp.ffn_expert : hp.ffn;
  // const: the engine lends its own buffers out to grow, trim and measure them.
  auto* self = const_cast<Engine*>(this);
  return {{{&self->xn_, dim},
           {&self->q_, q_dim},
           {&self->k_, kv_dim},
           {&self->v_, kv_dim},
           {&self->attn_, q_dim},
           {&self->proj_, dim},
           {&self->gate_, ffn},
           {&self->up_, ffn},
           {&self->router_, hp.n_experts},
           {&self->moe_w_, k},
           {&self->moe_x_, hp.is_moe() ? dim : 0},
           {&self->moe_out_, k * dim},
           {&self->hidden_, dim},
           {&self->last_rows_, dim},
           {&self->logits_tmp_, hp.vocab},
           {&self->slice_out_, std::max(dim, ffn)}}};
}

void Engine::trim_scratch(int64_t rows) {
  const auto r = static_cast<size_t>(std::max<int64_t>(rows, 1));
  for (const auto& [buf, per_row] : scratch()) trim(*buf, r * per_row);
  trim(positions_, r);
  trim(moe_sel_, r * weights_.hp.n_experts_used);
}

uint64_t Engine::scratch_bytes() const {
  uint64_t b = positions_.capacity() * sizeof(int64_t) + moe_sel_.capacity() * sizeof(int32_t);
  for (const auto& [buf, per_row] : scratch()) b += buf->capacity() * sizeof(float);
  return b;
}

}  // namespace hearth::model
