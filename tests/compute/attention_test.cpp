// KvCache and attention: every ISA against a naive float attention written here (cache
// dequantized to float, explicit scores and softmax), for GQA ratios 1, 2, 4, 8, decode
// and prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/base/half.h"
#include "hearth/compute/attention.h"
#include "hearth/compute/kv_cache.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {
namespace {

class AttentionTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not on this CPU";
  }
};

// Element d of an f16 row.
uint16_t half_bits(const uint8_t* row, int d) {
  uint16_t h;
  std::memcpy(&h, row + 2 * d, 2);
  return h;
}
float half_at(const uint8_t* row, int d) {
  return half_to_float(half_bits(row, d));
}

// Position p's K row of head h in its GGUF layout, gathered from the cache's K tile.
std::vector<uint8_t> k_row(const KvLayerView& view, int h, int64_t p) {
  std::vector<uint8_t> row(static_cast<size_t>(view.k_row_bytes));
  view.copy_k_row(h, p, row.data());
  return row;
}
// The same for V.
std::vector<uint8_t> v_row(const KvLayerView& view, int h, int64_t p) {
  std::vector<uint8_t> row(static_cast<size_t>(view.v_row_bytes));
  view.copy_v_row(h, p, row.data());
  return row;
}

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Naive attention for one layer. q: (n_tokens, n_heads, hd); returns the same shape.
std::vector<float> naive_attention(const KvCache& cache, int layer, int n_heads,
                                   const std::vector<float>& q, int64_t pos0, int64_t n_tokens) {
  const KvLayerView kv = cache.view(layer);
  const int hd = kv.head_dim;
  const int group = n_heads / kv.n_kv_heads;
  std::vector<float> out(n_tokens * n_heads * hd);
  // (n_kv_heads, positions, hd) the cache's rows as f32
  const int64_t n_all = pos0 + n_tokens;
  std::vector<float> k_all(kv.n_kv_heads * n_all * hd), v_all(k_all.size());
  for (int kvh = 0; kvh < kv.n_kv_heads; ++kvh) {
    for (int64_t p = 0; p < n_all; ++p) {
      kv_row_to_float(kv.k_type, k_row(kv, kvh, p).data(), hd, &k_all[(kvh * n_all + p) * hd]);
      kv_row_to_float(kv.v_type, v_row(kv, kvh, p).data(), hd, &v_all[(kvh * n_all + p) * hd]);
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t n = pos0 + t + 1;
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / group;
      const float* k = &k_all[kvh * n_all * hd];  // (n, hd)
      const float* v = &v_all[kvh * n_all * hd];
      const float* qh = &q[(t * n_heads + h) * hd];
      std::vector<float> rounded(qh, qh + hd);  // K of a block type meets the query rounded
      if (kv.k_type == KvType::kQ8_0 || kv.k_type == KvType::kQ4_0) {
        int16_t q16[32];
        for (int b = 0; b < hd / 32; ++b) {
          const float d = detail::quantize_query_block(qh + b * 32, q16);
          for (int i = 0; i < 32; ++i) rounded[b * 32 + i] = d * q16[i];
        }
        qh = rounded.data();
      }
      std::vector<float> score(n);
      float max = -INFINITY;
      for (int64_t p = 0; p < n; ++p) {
        float dot = 0;
        for (int d = 0; d < hd; ++d) dot += qh[d] * k[p * hd + d];
        score[p] = dot / std::sqrt(static_cast<float>(hd));
        max = std::max(max, score[p]);
      }
      float sum = 0;
      for (auto& s : score) sum += (s = std::exp(s - max));
      for (int d = 0; d < hd; ++d) {
        float acc = 0;
        for (int64_t p = 0; p < n; ++p) acc += score[p] / sum * v[p * hd + d];
        out[(t * n_heads + h) * hd + d] = acc;
      }
    }
  }
  return out;
}

// Fills positions [0, n) of every layer with random K/V rows.
void fill_cache(KvCache& cache, int64_t n, uint32_t seed) {
  const int64_t row = int64_t{cache.n_kv_heads()} * cache.head_dim();
  for (int l = 0; l < cache.n_layers(); ++l) {
    const auto k = random_vector(n * row, seed + 2 * l);
    const auto v = random_vector(n * row, seed + 2 * l + 1);
    cache.store(l, 0, n, k.data(), v.data());
  }
}

// Tolerance 2e-5 absolute (V entries and q in [-1, 1]): an output is a convex combination
// of V rows, so it moves by at most the largest relative error of a weight. Scores are
// float dot products of <= 128 terms with |q k| <= 1 (error < 128 * 2^-24 = 7.6e-6 before
// the 1/sqrt(hd) scale), exp adds 2e-7, and the naive float sums over <= 400 positions add
// a few e-6: together well under 2e-5, while a wrong position, head or scale is off by
// ~1e-2 or more.
constexpr float kTol = 2e-5f;

// One decoded token at each position of `positions` (query seeded by pos + seed) against the
// naive attention over layer `layer` of the cache.
void expect_decode_matches_naive(const AttentionShape& shape, const KvCache& cache, int layer,
                                 std::initializer_list<int64_t> positions, uint32_t seed,
                                 const std::string& where, Isa isa) {
  const int row = shape.n_heads * shape.head_dim;
  for (int64_t pos : positions) {
    const auto q = random_vector(row, static_cast<uint32_t>(pos) + seed);
    std::vector<float> out(row);
    attention(shape, cache.view(layer), q.data(), out.data(), pos, 1, isa);
    const auto expect = naive_attention(cache, layer, shape.n_heads, q, pos, 1);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], expect[i], kTol) << where << " decode pos " << pos << " i " << i;
    }
  }
}

TEST_P(AttentionTest, MatchesNaiveForGqaRatiosDecodeAndPrefill) {
  for (int ratio : {1, 2, 4, 8}) {
    for (int hd : {64, 128, 40}) {
      const int n_kv = 2, n_heads = n_kv * ratio;
      const AttentionShape shape{n_heads, n_kv, hd, 0.0f};
      KvCache cache(2, n_kv, hd, 512);
      fill_cache(cache, 300, 100 + ratio + hd);
      const std::string where = "ratio " + std::to_string(ratio) + " hd " + std::to_string(hd);

      // Decode: one token at several positions (chunk edges at 128, 256).
      expect_decode_matches_naive(shape, cache, 1, {0, 1, 5, 127, 128, 129, 299}, 7, where,
                                  GetParam());
      // Prefill: blocks at the start and over earlier positions, crossing chunk edges.
      for (auto [pos0, n_tokens] : {std::pair<int64_t, int64_t>{0, 9}, {100, 33}, {250, 50}}) {
        const auto q = random_vector(n_tokens * n_heads * hd, pos0 + 3);
        std::vector<float> out(n_tokens * n_heads * hd);
        attention(shape, cache.view(0), q.data(), out.data(), pos0, n_tokens, GetParam());
        const auto expect = naive_attention(cache, 0, n_heads, q, pos0, n_tokens);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], expect[i], kTol) << where << " prefill pos0 " << pos0 << " i " << i;
        }
      }
    }
  }
}

// Prefill must equal token-by-token decode exactly: the kernels tile several tokens per
// call, and positions past a row's causal length must contribute exact zeros, so greedy
// output cannot depend on the batching. Cases cross the 128-position chunk edges inside a
// tile and use a head_dim with a vector tail.
TEST_P(AttentionTest, PrefillEqualsDecodeBitForBit) {
  struct Case {
    int n_heads, n_kv, hd;
    int64_t pos0, n_tokens;
  };
  const Case cases[] = {{4, 4, 64, 0, 40},    {8, 2, 64, 120, 20}, {16, 2, 40, 250, 12},
                        {8, 1, 128, 100, 60}, {6, 3, 32, 3, 30},   {4, 4, 72, 124, 9}};
  for (const Case& c : cases) {
    const AttentionShape shape{c.n_heads, c.n_kv, c.hd, 0.0f};
    KvCache cache(1, c.n_kv, c.hd, 320);
    fill_cache(cache, c.pos0 + c.n_tokens, 9 + c.hd);
    const int64_t row = int64_t{c.n_heads} * c.hd;
    const auto q = random_vector(c.n_tokens * row, 10);
    std::vector<float> block(c.n_tokens * row), single(row);
    attention(shape, cache.view(0), q.data(), block.data(), c.pos0, c.n_tokens, GetParam());
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      attention(shape, cache.view(0), q.data() + t * row, single.data(), c.pos0 + t, 1, GetParam());
      ASSERT_EQ(std::memcmp(single.data(), block.data() + t * row, row * sizeof(float)), 0)
          << "heads " << c.n_heads << "/" << c.n_kv << " hd " << c.hd << " token " << t;
    }
  }
}

constexpr KvType kAllKvTypes[] = {KvType::kF32, KvType::kF16, KvType::kQ8_0, KvType::kQ4_0};

// Every pair of K and V types against the naive attention over the cache's own rows (as the
// cache holds them: rounded or quantized), decode across chunk edges and prefill, GQA 4;
// and prefill equal to token-by-token decode bit for bit, as for f16.
TEST_P(AttentionTest, EveryKvTypeMatchesNaive) {
  for (KvType kt : kAllKvTypes) {
    for (KvType vt : kAllKvTypes) {
      for (int hd : {64, 96}) {
        const int n_kv = 2, n_heads = 8;
        const AttentionShape shape{n_heads, n_kv, hd, 0.0f};
        KvCache cache(1, n_kv, hd, 320, {kt, vt});
        fill_cache(cache, 300, 5 + hd);
        const std::string where =
            std::string(kv_type_name(kt)) + "/" + kv_type_name(vt) + " hd " + std::to_string(hd);
        expect_decode_matches_naive(shape, cache, 0, {0, 127, 128, 299}, 11, where, GetParam());
        const int64_t pos0 = 120, n_tokens = 17, row = int64_t{n_heads} * hd;
        const auto q = random_vector(n_tokens * row, 12);
        std::vector<float> block(n_tokens * row), single(row);
        attention(shape, cache.view(0), q.data(), block.data(), pos0, n_tokens, GetParam());
        const auto expect = naive_attention(cache, 0, n_heads, q, pos0, n_tokens);
        for (size_t i = 0; i < block.size(); ++i) {
          ASSERT_NEAR(block[i], expect[i], kTol) << where << " prefill i " << i;
        }
        for (int64_t t = 0; t < n_tokens; ++t) {
          attention(shape, cache.view(0), q.data() + t * row, single.data(), pos0 + t, 1,
                    GetParam());
          ASSERT_EQ(std::memcmp(single.data(), block.data() + t * row, row * sizeof(float)), 0)
              << where << " token " << t;
        }
      }
    }
  }
}

// The kernels read whole tiles, so the slots of the last tile past the cache's length hold
// whatever was there (a truncated sequence's rows, or never-written bytes): filled here with
// all-ones bytes (NaN scales and values for the float types), they change no output bit.
TEST_P(AttentionTest, BytesPastTheCacheAreIgnored) {
  const int n_kv = 2, n_heads = 8, hd = 64, n = 300;  // 300 = 18 tiles and 12 slots
  const AttentionShape shape{n_heads, n_kv, hd, 0.0f};
  for (KvType kt : kAllKvTypes) {
    for (KvType vt : kAllKvTypes) {
      KvCache clean(1, n_kv, hd, 320, {kt, vt}), poisoned(1, n_kv, hd, 320, {kt, vt});
      fill_cache(clean, n, 21);
      fill_cache(poisoned, n, 21);
      const KvLayerView view = poisoned.view(0);
      const std::vector<uint8_t> k_ones(view.k_row_bytes, 0xff), v_ones(view.v_row_bytes, 0xff);
      for (int h = 0; h < n_kv; ++h) {
        for (int64_t p = n; p % kKTileRows != 0; ++p) {
          const int slot = static_cast<int>(p % kKTileRows);
          k_tile_put(kt, hd, k_ones.data(), const_cast<uint8_t*>(view.k_tile(h, p)), slot);
          v_tile_put(vt, hd, v_ones.data(), const_cast<uint8_t*>(view.v_tile(h, p)), slot);
        }
      }
      const std::string where = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      const auto q = random_vector(2 * n_heads * hd, 22);
      std::vector<float> want(q.size()), got(q.size());
      attention(shape, clean.view(0), q.data(), want.data(), n - 2, 2, GetParam());
      attention(shape, poisoned.view(0), q.data(), got.data(), n - 2, 2, GetParam());
      for (float x : got) ASSERT_TRUE(std::isfinite(x)) << where;
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << where;
    }
  }
}

// Threads calling attention on disjoint head ranges at the same time (no shared state)
// produce the single-threaded bytes.
TEST_P(AttentionTest, ConcurrentPartsMatchSingleThread) {
  const AttentionShape shape{16, 4, 64, 0.0f};
  KvCache cache(1, 4, 64, 300);
  fill_cache(cache, 300, 77);
  const int64_t pos0 = 260, n_tokens = 40, row = 16 * 64;
  const auto q = random_vector(n_tokens * row, 78);
  std::vector<float> whole(n_tokens * row), parts(n_tokens * row);
  attention(shape, cache.view(0), q.data(), whole.data(), pos0, n_tokens, GetParam());
  std::vector<std::thread> threads;
  const Isa isa = GetParam();
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      const HeadRange r = attention_split(shape, 3, i);
      attention(shape, cache.view(0), q.data(), 0, parts.data(), 0, pos0, n_tokens, r.begin, r.end,
                isa);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)), 0);
}

// Splitting heads across parts (threads) must give the very same bytes as one call, and a
// part writes only its own heads. Rows are computed independently of how they are grouped.
TEST_P(AttentionTest, HeadSplitsAreExactAndDisjoint) {
  const AttentionShape shape{12, 4, 32, 0.0f};
  KvCache cache(1, 4, 32, 64);
  fill_cache(cache, 40, 21);
  const int64_t n_tokens = 3, pos0 = 37, row = 12 * 32;
  // q and out inside wider rows, as in a fused qkv buffer.
  const int64_t q_stride = row + 16, out_stride = row + 8;
  const auto q = random_vector(n_tokens * q_stride, 22);
  std::vector<float> whole(n_tokens * out_stride, -7.0f);
  attention(shape, cache.view(0), q.data(), q_stride, whole.data(), out_stride, pos0, n_tokens, 0,
            12, GetParam());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = row; i < out_stride; ++i) ASSERT_EQ(whole[t * out_stride + i], -7.0f);
  }
  for (int n_parts : {1, 2, 3, 4, 5, 7, 12, 16}) {
    std::vector<float> split(n_tokens * out_stride, -7.0f);
    int covered = 0;
    for (int part = 0; part < n_parts; ++part) {
      const HeadRange r = attention_split(shape, n_parts, part);
      ASSERT_EQ(r.begin, covered) << "parts " << n_parts;
      covered = r.end;
      if (n_parts <= 4) {
        EXPECT_EQ(r.begin % 3, 0) << "ranges follow GQA groups";
      }
      attention(shape, cache.view(0), q.data(), q_stride, split.data(), out_stride, pos0, n_tokens,
                r.begin, r.end, GetParam());
    }
    ASSERT_EQ(covered, 12);
    ASSERT_EQ(std::memcmp(split.data(), whole.data(), split.size() * sizeof(float)), 0)
        << "parts " << n_parts;
  }
  std::vector<float> partial(n_tokens * out_stride, -7.0f);
  attention(shape, cache.view(0), q.data(), q_stride, partial.data(), out_stride, pos0, n_tokens, 4,
            7, GetParam());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < out_stride; ++i) {
      const bool mine = i >= 4 * 32 && i < 7 * 32;
      if (!mine) {
        ASSERT_EQ(partial[t * out_stride + i], -7.0f) << "head outside range written";
      }
    }
  }
}

TEST_P(AttentionTest, RejectsMismatchesAndUnstoredPositions) {
  KvCache cache(1, 2, 64, 32);
  fill_cache(cache, 10, 1);
  const std::vector<float> q(4 * 64 * 2);
  std::vector<float> out(q.size());
  const AttentionShape shape{4, 2, 64, 0.0f};
  EXPECT_THROW(attention(shape, cache.view(0), q.data(), out.data(), 10, 1, GetParam()),
               UsageError);  // position 10 not stored
  EXPECT_THROW(attention(shape, cache.view(0), q.data(), out.data(), 9, 2, GetParam()), UsageError);
  EXPECT_NO_THROW(attention(shape, cache.view(0), q.data(), out.data(), 8, 2, GetParam()));
  EXPECT_THROW(attention({3, 2, 64, 0.0f}, cache.view(0), q.data(), out.data(), 0, 1, GetParam()),
               UsageError);  // 3 heads not a multiple of 2
  EXPECT_THROW(attention({4, 2, 32, 0.0f}, cache.view(0), q.data(), out.data(), 0, 1, GetParam()),
               UsageError);  // head_dim differs from the cache
  EXPECT_THROW(attention(shape, cache.view(0), q.data(), 0, out.data(), 0, 0, 1, 2, 5, GetParam()),
               UsageError);  // head range past n_heads
  KvLayerView bad = cache.view(0);
  bad.n_pos = bad.n_ctx + 1;
  EXPECT_THROW(attention(shape, bad, q.data(), out.data(), 0, 1, GetParam()), UsageError);
  EXPECT_THROW(attention(shape, KvLayerView{}, q.data(), out.data(), 0, 1, GetParam()), UsageError);
}

// f32 -> f16 in the cache is bit-exact with the scalar float_to_half on every ISA,
// including halfway cases, subnormals, overflow to inf and signed zero.
TEST_P(AttentionTest, KvStoreRoundsLikeScalarHalf) {
  const int hd = 37;  // not a multiple of any vector width: tail path
  KvCache cache(1, 3, hd, 8);
  std::vector<float> k = random_vector(2 * 3 * hd, 5), v = random_vector(2 * 3 * hd, 6);
  const float special[] = {0.0f,
                           -0.0f,
                           65504.0f,
                           65520.0f,
                           1e6f,
                           -1e6f,
                           6e-8f,
                           3e-8f,
                           1e-5f,
                           -2.5e-6f,
                           1.0009765625f + 0.00048828125f,
                           INFINITY,
                           1e-40f};
  for (size_t i = 0; i < std::size(special); ++i) k[i * 5] = v[i * 3 + 1] = special[i];
  cache.store(0, 0, 2, k.data(), v.data(), 0, GetParam());
  const KvLayerView view = cache.view(0);
  for (int64_t t = 0; t < 2; ++t) {
    for (int h = 0; h < 3; ++h) {
      for (int d = 0; d < hd; ++d) {
        const int64_t src = (t * 3 + h) * hd + d;
        ASSERT_EQ(half_bits(k_row(view, h, t).data(), d), float_to_half(k[src])) << "k " << k[src];
        ASSERT_EQ(half_bits(v_row(view, h, t).data(), d), float_to_half(v[src])) << "v " << v[src];
      }
    }
  }
}

// The double-precision reference against the naive float one (the ISA kernels are checked
// against the naive one above; this keeps ref::attention honest too).
TEST(AttentionReference, MatchesNaive) {
  for (int ratio : {1, 4}) {
    const int n_kv = 2, n_heads = n_kv * ratio, hd = 64;
    KvCache cache(1, n_kv, hd, 200);
    fill_cache(cache, 150, 40 + ratio);
    const int64_t pos0 = 130, n_tokens = 20;
    const auto q = random_vector(n_tokens * n_heads * hd, 41);
    std::vector<float> out(q.size());
    ref::attention({n_heads, n_kv, hd, 0.0f}, cache.view(0), q.data(), n_heads * hd, out.data(),
                   n_heads * hd, pos0, n_tokens, 0, n_heads);
    const auto expect = naive_attention(cache, 0, n_heads, q, pos0, n_tokens);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], expect[i], kTol) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionTest, testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(KvCache, LengthsTruncationAndOverwrite) {
  KvCache cache(2, 1, 4, 16);
  EXPECT_EQ(cache.bytes(), 2u * 2 * 16 * 4 * sizeof(uint16_t));
  const std::vector<float> ones(10 * 4, 1.0f), twos(10 * 4, 2.0f);
  cache.store(0, 0, 10, ones.data(), ones.data());
  EXPECT_EQ(cache.length(0), 10);
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_EQ(cache.length(), 0);  // layer 1 not written yet
  cache.store(1, 0, 10, ones.data(), ones.data());
  EXPECT_EQ(cache.length(), 10);

  cache.truncate(6);  // e.g. speculative draft rejected after position 5
  EXPECT_EQ(cache.length(0), 6);
  EXPECT_EQ(cache.length(1), 6);
  EXPECT_EQ(cache.view(0).n_pos, 6);
  EXPECT_THROW(cache.store(0, 7, 1, twos.data(), twos.data()), UsageError);  // gap at 6
  cache.store(0, 6, 2, twos.data(), twos.data());
  EXPECT_EQ(cache.length(0), 8);
  EXPECT_EQ(half_at(k_row(cache.view(0), 0, 5).data(), 0), 1.0f);
  EXPECT_EQ(half_at(k_row(cache.view(0), 0, 6).data(), 0), 2.0f);
  // Writing at 3 overwrites from there and drops later positions of that layer.
  cache.store(0, 3, 1, twos.data(), twos.data());
  EXPECT_EQ(cache.length(0), 4);
  EXPECT_EQ(half_at(v_row(cache.view(0), 0, 3).data(), 3), 2.0f);
  cache.truncate(100);  // beyond the length: no change
  EXPECT_EQ(cache.length(0), 4);
  cache.clear();
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_THROW(cache.truncate(-1), UsageError);
}

TEST(KvCache, ContextFullIsAClearError) {
  KvCache cache(1, 2, 8, 16);
  const std::vector<float> rows(17 * 16, 0.5f);
  cache.store(0, 0, 15, rows.data(), rows.data());
  try {
    cache.store(0, 15, 2, rows.data(), rows.data());
    FAIL() << "no error for position 16 >= n_ctx 16";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("context full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(0), 15);  // the failed store changed nothing
  cache.store(0, 15, 1, rows.data(), rows.data());
  EXPECT_EQ(cache.length(0), 16);
  EXPECT_THROW(cache.store(0, 16, 1, rows.data(), rows.data()), UsageError);
  EXPECT_THROW(cache.store(1, 0, 1, rows.data(), rows.data()), UsageError);  // no layer 1
  EXPECT_THROW(KvCache(1, 2, 8, 0), UsageError);
  EXPECT_THROW(KvCache(1, 1 << 30, 1 << 30, int64_t{1} << 40), UsageError);  // overflows
}

TEST(KvCache, BytesForPlanning) {
  // Llama 3 8B at -c 8192: 32 layers x 8 kv heads x 128 dims, K and V in f16 = 1 GiB.
  EXPECT_EQ(KvCache::bytes_for(32, 8, 128, 8192), uint64_t{1} << 30);
  const KvCache small(3, 2, 16, 50);
  EXPECT_EQ(small.bytes(), KvCache::bytes_for(3, 2, 16, 50));
  EXPECT_THROW(KvCache::bytes_for(32, 8, 128, 0), UsageError);
  EXPECT_THROW(KvCache::bytes_for(1 << 30, 1 << 30, 1 << 30, int64_t{1} << 40), UsageError);
}

// A quantized cache row holds exactly the GGUF blocks the type's quantizer makes of the input
// row (what llama.cpp stores for -ctk q8_0 / q4_0), and f32 rows hold the input itself.
TEST(KvCache, RowsHoldTheTypesBlocks) {
  const int n_kv = 2, hd = 64, n = 5;
  for (KvType t : kAllKvTypes) {
    KvCache cache(2, n_kv, hd, 8, {t, KvType::kF16});
    EXPECT_EQ(cache.bytes(), KvCache::bytes_for(2, n_kv, hd, 8, {t, KvType::kF16}));
    const auto k = random_vector(n * n_kv * hd, 31), v = random_vector(n * n_kv * hd, 32);
    cache.store(1, 0, n, k.data(), v.data());
    const KvLayerView view = cache.view(1);
    EXPECT_EQ(view.k_row_bytes, static_cast<int64_t>(kv_row_bytes(t, hd)));
    std::vector<float> got(hd), expect(hd);
    std::vector<uint8_t> blocks(kv_row_bytes(t, hd));
    for (int64_t p = 0; p < n; ++p) {
      for (int h = 0; h < n_kv; ++h) {
        const float* src = &k[(p * n_kv + h) * hd];
        kv_row_to_float(t, k_row(view, h, p).data(), hd, got.data());
        switch (t) {
          case KvType::kF32:
            std::copy(src, src + hd, expect.begin());
            break;
          case KvType::kF16:
            for (int d = 0; d < hd; ++d) expect[d] = half_to_float(float_to_half(src[d]));
            break;
          default: {
            const auto& tr = quant::traits(t == KvType::kQ8_0 ? gguf::TensorType::kQ8_0
                                                              : gguf::TensorType::kQ4_0);
            tr.quantize(src, blocks.data(), hd);
            EXPECT_EQ(std::memcmp(blocks.data(), k_row(view, h, p).data(), blocks.size()), 0)
                << kv_type_name(t) << " pos " << p << " head " << h;
            tr.to_float(blocks.data(), expect.data(), hd);
          }
        }
        for (int d = 0; d < hd; ++d) ASSERT_EQ(got[d], expect[d]) << kv_type_name(t) << " " << d;
      }
    }
  }
}

TEST(KvCache, TypesParseAndFitTheHeads) {
  EXPECT_EQ(parse_kv_type("q8_0"), KvType::kQ8_0);
  EXPECT_EQ(parse_kv_type("Q4_0"), KvType::kQ4_0);
  EXPECT_EQ(parse_kv_type("f32"), KvType::kF32);
  try {
    parse_kv_type("q5_1", "--cache-type-k");
    FAIL() << "q5_1 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--cache-type-k"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  // Block types need whole blocks of 32 per head row.
  EXPECT_THROW(KvCache(1, 1, 40, 8, {KvType::kQ8_0, KvType::kF16}), UsageError);
  EXPECT_THROW(KvCache::bytes_for(1, 1, 40, 8, {KvType::kF16, KvType::kQ4_0}), UsageError);
  EXPECT_NO_THROW(KvCache(1, 1, 40, 8, {KvType::kF32, KvType::kF16}));
  // Llama 3 8B per position and layer: 8 kv heads x 128 dims.
  EXPECT_EQ((KvTypes{}.bytes_per_token(8, 128)), 4096u);
  EXPECT_EQ((KvTypes{KvType::kQ8_0, KvType::kQ8_0}.bytes_per_token(8, 128)), 2u * 8 * 4 * 34);
  EXPECT_EQ((KvTypes{KvType::kQ4_0, KvType::kF32}.bytes_per_token(8, 128)), 8u * (4 * 18 + 512));
}

TEST(KvCache, SequencesAreIndependent) {
  // Continuous batching keeps one cache per sequence; writes to one never show in another.
  KvCache a(1, 1, 8, 8), b(1, 1, 8, 8);
  const std::vector<float> x(8, 0.25f), y(8, -0.5f);
  a.store(0, 0, 1, x.data(), x.data());
  b.store(0, 0, 1, y.data(), y.data());
  b.store(0, 1, 1, y.data(), y.data());
  EXPECT_EQ(a.length(), 1);
  EXPECT_EQ(b.length(), 2);
  EXPECT_EQ(half_at(k_row(a.view(0), 0, 0).data(), 7), 0.25f);
  EXPECT_EQ(half_at(k_row(b.view(0), 0, 0).data(), 7), -0.5f);
}

// 16 random rows of hd values in the GGUF layout of t; put into a tile's slots in a scrambled
// order by `put` and read back by `get`, each must come back byte for byte. Returns the tile
// (its bytes start as `fill`) and the rows.
using TilePut = void (*)(KvType, int, const uint8_t*, uint8_t*, int);
using TileGet = void (*)(KvType, int, const uint8_t*, int, uint8_t*);
std::pair<std::vector<uint8_t>, std::vector<std::vector<uint8_t>>> round_trip_tile(
    KvType t, int hd, uint32_t seed, uint8_t fill, TilePut put, TileGet get) {
  const size_t row_bytes = kv_row_bytes(t, hd);
  const auto& tr = quant::traits(t == KvType::kF32    ? gguf::TensorType::kF32
                                 : t == KvType::kF16  ? gguf::TensorType::kF16
                                 : t == KvType::kQ8_0 ? gguf::TensorType::kQ8_0
                                                      : gguf::TensorType::kQ4_0);
  std::vector<std::vector<uint8_t>> rows(kKTileRows, std::vector<uint8_t>(row_bytes));
  std::vector<uint8_t> tile(kKTileRows * row_bytes, fill), back(row_bytes);
  for (int i = 0; i < kKTileRows; ++i) {
    tr.quantize(random_vector(hd, seed + i).data(), rows[i].data(), hd);
  }
  for (int i : {5, 0, 15, 8, 7, 1, 2, 3, 4, 6, 9, 10, 11, 12, 13, 14}) {
    put(t, hd, rows[i].data(), tile.data(), i);
  }
  for (int i = 0; i < kKTileRows; ++i) {
    get(t, hd, tile.data(), i, back.data());
    EXPECT_EQ(back, rows[i]) << kv_type_name(t) << " slot " << i;
  }
  return {tile, rows};
}

// A K tile holds 16 rows' bytes transposed (kv_cache.h "K tiles"): every row put into a slot
// comes back byte for byte, a slot's writes leave the other slots alone, and values sit where
// the score kernels read them.
TEST(KvCache, KTilesHoldRowsTransposed) {
  const int hd = 64;
  for (KvType t : kAllKvTypes) {
    const auto [tile, rows] = round_trip_tile(t, hd, 700, 0xa5, k_tile_put, k_tile_get);
    // Where the kernels look: value d = 33 of slot 9.
    const int d = 33, i = 9;
    switch (t) {
      case KvType::kF32:
        EXPECT_EQ(std::memcmp(&tile[(d * 16 + i) * 4], &rows[i][d * 4], 4), 0);
        break;
      case KvType::kF16:
        EXPECT_EQ(std::memcmp(&tile[(d * 16 + i) * 2], &rows[i][d * 2], 2), 0);
        break;
      case KvType::kQ8_0:  // block 1: scale at halfword 16 + i; pair 16's run, place 2i + 1
        EXPECT_EQ(std::memcmp(&tile[(16 + i) * 2], &rows[i][34], 2), 0);
        EXPECT_EQ(tile[hd + 16 * 32 + 2 * i + 1], rows[i][34 + 2 + 1]);
        break;
      case KvType::kQ4_0:  // value 1 of block 1 (low nibble of byte 1); place 19: a high nibble
        EXPECT_EQ(std::memcmp(&tile[(16 + i) * 2], &rows[i][18], 2), 0);
        EXPECT_EQ(tile[hd + 16 * 16 + (2 * i + 1) % 16] >> 4, rows[i][18 + 2 + 1] & 0x0f);
        break;
    }
  }
}

// A V tile holds 16 rows' bytes (kv_cache.h "V tiles"): every row comes back byte for byte,
// and the block types' values sit where the weighted-sum kernel reads them.
TEST(KvCache, VTilesHoldRowsInPairs) {
  const int hd = 64;
  for (KvType t : kAllKvTypes) {
    const size_t row_bytes = kv_row_bytes(t, hd);
    const auto [tile, rows] = round_trip_tile(t, hd, 800, 0x5a, v_tile_put, v_tile_get);
    // Where the kernel looks: value d = 33 (block 1, e = 1) of slot 9 (pair 4, second).
    const int i = 9;
    switch (t) {
      case KvType::kF32:
      case KvType::kF16:
        EXPECT_EQ(std::memcmp(&tile[i * row_bytes], rows[i].data(), row_bytes), 0);
        break;
      case KvType::kQ8_0:  // scale at halfword 16 + i; value at 512 + 4 * 64 + 1 * 2 + 1
        EXPECT_EQ(std::memcmp(&tile[(16 + i) * 2], &rows[i][34], 2), 0);
        EXPECT_EQ(tile[hd + 512 + 4 * 64 + 2 + 1], rows[i][34 + 2 + 1]);
        break;
      case KvType::kQ4_0:  // place j = 1 * 2 + 1 = 3 of the first half: low nibble of byte 3
        EXPECT_EQ(std::memcmp(&tile[(16 + i) * 2], &rows[i][18], 2), 0);
        EXPECT_EQ(tile[hd + 256 + 4 * 32 + 3] & 0x0f, rows[i][18 + 2 + 1] & 0x0f);
        break;
    }
  }
}

// The query of a block-type K is rounded to int16 per block of 32: to the nearest step of
// max|x| / 32767, the largest value to +-32767, zeros to zeros, a non-finite value to NaN.
TEST(AttentionQuery, RoundsEachBlockToInt16) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto x = random_vector(32, 900 + seed);
    for (auto& v : x) v *= static_cast<float>(1 + seed * seed);  // scales 1 .. 2402
    int16_t q[32];
    const float d = detail::quantize_query_block(x.data(), q);
    float amax = 0.0f;
    int qmax = 0;
    for (int i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(x[i]));
      qmax = std::max(qmax, std::abs(int{q[i]}));
      // Half a step, plus the float rounding of x * (32767 / max|x|).
      EXPECT_LE(std::fabs(double{x[i]} - double{d} * q[i]), d * 0.5 + 1e-6 * std::fabs(x[i]))
          << "seed " << seed << " i " << i;
    }
    EXPECT_FLOAT_EQ(d, amax / 32767.0f);
    EXPECT_EQ(qmax, 32767) << "seed " << seed;
  }
  float zeros[32] = {};
  int16_t q[32];
  EXPECT_EQ(detail::quantize_query_block(zeros, q), 0.0f);
  for (int16_t v : q) EXPECT_EQ(v, 0);
  zeros[7] = INFINITY;
  EXPECT_TRUE(std::isnan(detail::quantize_query_block(zeros, q)));
}

TEST(KvCache, RowStrideReadsFromFusedBuffer) {
  KvCache cache(1, 2, 4, 4);
  // Two tokens in rows of 12 floats: k at [0, 8), padding [8, 12).
  std::vector<float> fused(2 * 12);
  for (size_t i = 0; i < fused.size(); ++i) fused[i] = static_cast<float>(i);
  cache.store(0, 0, 2, fused.data(), fused.data(), 12);
  const KvLayerView view = cache.view(0);
  EXPECT_EQ(half_at(k_row(view, 1, 0).data(), 2), 6.0f);   // token 0, head 1, dim 2
  EXPECT_EQ(half_at(k_row(view, 0, 1).data(), 1), 13.0f);  // token 1, head 0, dim 1
  EXPECT_THROW(cache.store(0, 0, 1, fused.data(), fused.data(), 7), UsageError);
}

}  // namespace
}  // namespace hearth::compute
