// Paged KV caches (compute/kv_block_pool.h): attention over blocks gives the bits of a
// contiguous cache holding the same rows, on every ISA and KV type; shared prefixes are copied
// before either cache writes into them; blocks go back to the pool when cut or dropped; a full
// pool is a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/compute/attention.h"
#include "hearth/compute/kv_block_pool.h"
#include "hearth/compute/kv_cache.h"

namespace hearth::compute {
namespace {

constexpr KvType kTypes[] = {KvType::kF32, KvType::kF16, KvType::kQ8_0, KvType::kQ4_0};

std::vector<float> random_rows(int64_t n, int64_t row, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n * row));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Stores positions [pos, pos + n) of every layer, rows seeded by (seed, layer).
void store_rows(KvCache& cache, int64_t pos, int64_t n, uint32_t seed) {
  const int64_t row = int64_t{cache.n_kv_heads()} * cache.head_dim();
  for (int l = 0; l < cache.n_layers(); ++l) {
    const auto k = random_rows(n, row, seed + 2 * l), v = random_rows(n, row, seed + 2 * l + 1);
    cache.store(l, pos, n, k.data(), v.data());
  }
}

// Attention of `n_tokens` queries ending at the cache's length, all heads.
std::vector<float> attend(const KvCache& cache, int layer, int n_heads, int64_t n_tokens,
                          uint32_t seed, Isa isa) {
  const AttentionShape shape{n_heads, cache.n_kv_heads(), cache.head_dim(), 0.0f};
  const int64_t row = int64_t{n_heads} * cache.head_dim();
  const auto q = random_rows(n_tokens, row, seed);
  std::vector<float> out(static_cast<size_t>(n_tokens * row));
  attention(shape, cache.view(layer), q.data(), out.data(), cache.length() - n_tokens, n_tokens,
            isa);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class PagedAttention : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not on this CPU";
  }
};

// Blocks of 16 and 128 positions against one contiguous region: decode at positions on both
// sides of block edges and a prefill tile crossing several, for every pair of K/V types.
TEST_P(PagedAttention, EqualsContiguousBitwise) {
  const int n_kv = 2, hd = 64, n_heads = 8, n_layers = 2;
  for (KvType kt : kTypes) {
    for (KvType vt : kTypes) {
      for (int block : {16, 128}) {
        KvBlockPool pool(n_layers, n_kv, hd, block, 64, {kt, vt});
        KvCache paged(pool, 400), flat(n_layers, n_kv, hd, 400, {kt, vt});
        const std::string where = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt) +
                                  " block " + std::to_string(block);
        int64_t len = 0;
        for (int64_t n : {1, 15, 1, 17, 100, 130, 33}) {  // lands on and beside block edges
          store_rows(paged, len, n, 7 + static_cast<uint32_t>(len));
          store_rows(flat, len, n, 7 + static_cast<uint32_t>(len));
          len += n;
          for (int l = 0; l < n_layers; ++l) {
            const int64_t tokens = n < 20 ? n : 20;
            EXPECT_TRUE(same_bits(attend(paged, l, n_heads, tokens, 3, GetParam()),
                                  attend(flat, l, n_heads, tokens, 3, GetParam())))
                << where << " layer " << l << " length " << len;
          }
        }
        EXPECT_EQ(pool.in_use(), pool.blocks_for(len)) << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, PagedAttention, testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(KvBlockPool, SharedPrefixIsCopiedBeforeEitherWrites) {
  const int n_kv = 2, hd = 32, n_heads = 4;
  KvBlockPool pool(1, n_kv, hd, 16, 16, {KvType::kF16, KvType::kQ8_0});
  KvCache a(pool, 128), b(pool, 128), want_a(1, n_kv, hd, 128, pool.types()),
      want_b(1, n_kv, hd, 128, pool.types());
  store_rows(a, 0, 40, 1);  // blocks 0, 1 and half of 2
  store_rows(want_a, 0, 40, 1);
  store_rows(want_b, 0, 40, 1);
  EXPECT_EQ(pool.in_use(), 3);
  b.share_prefix(a, 37);  // all three blocks, the last one partly
  EXPECT_EQ(b.length(), 37);
  EXPECT_EQ(pool.in_use(), 3);
  EXPECT_EQ(b.blocks_needed(37, 3), 1);   // block 2 is shared: copied before the write
  EXPECT_EQ(b.blocks_needed(37, 12), 2);  // and block 3 is new
  want_b.truncate(37);
  store_rows(b, 37, 5, 99);
  store_rows(want_b, 37, 5, 99);
  EXPECT_EQ(pool.in_use(), 4);  // b's own copy of block 2
  // Each reads its own rows: a's positions 37..39 were not overwritten by b's.
  EXPECT_TRUE(same_bits(attend(a, 0, n_heads, 4, 5, active_isa()),
                        attend(want_a, 0, n_heads, 4, 5, active_isa())));
  EXPECT_TRUE(same_bits(attend(b, 0, n_heads, 6, 5, active_isa()),
                        attend(want_b, 0, n_heads, 6, 5, active_isa())));
  // a writes into block 1, still shared with b: a copies it, b keeps the old rows.
  a.truncate(20);
  want_a.truncate(20);
  EXPECT_EQ(a.blocks_needed(20, 1), 1);
  store_rows(a, 20, 1, 7);
  store_rows(want_a, 20, 1, 7);
  EXPECT_TRUE(same_bits(attend(a, 0, n_heads, 1, 6, active_isa()),
                        attend(want_a, 0, n_heads, 1, 6, active_isa())));
  EXPECT_TRUE(same_bits(attend(b, 0, n_heads, 6, 5, active_isa()),
                        attend(want_b, 0, n_heads, 6, 5, active_isa())));
  EXPECT_THROW(a.share_prefix(b, 43), UsageError);  // b holds 42
  KvCache flat(1, n_kv, hd, 128, pool.types());
  EXPECT_THROW(flat.share_prefix(a, 1), UsageError);
}

TEST(KvBlockPool, BlocksGoBackWhenCutOrDropped) {
  KvBlockPool pool(3, 2, 32, 16, 8);
  {
    KvCache a(pool, 128);
    store_rows(a, 0, 50, 1);
    EXPECT_EQ(pool.in_use(), 4);
    EXPECT_EQ(a.bytes(), 4 * pool.block_bytes());
    a.truncate(33);  // positions 0..32: blocks 0, 1, 2
    EXPECT_EQ(pool.in_use(), 3);
    a.truncate(32);
    EXPECT_EQ(pool.in_use(), 2);
    {
      KvCache b(pool, 128);
      b.share_prefix(a, 32);
      EXPECT_EQ(pool.in_use(), 2);
    }
    EXPECT_EQ(pool.in_use(), 2);
    a.clear();
    EXPECT_EQ(pool.in_use(), 0);
    store_rows(a, 0, 16, 2);
    EXPECT_EQ(pool.in_use(), 1);
  }
  EXPECT_EQ(pool.in_use(), 0);
}

TEST(KvBlockPool, FullPoolIsAClearError) {
  KvBlockPool pool(1, 2, 32, 16, 2);
  KvCache a(pool, 128), b(pool, 128);
  store_rows(a, 0, 20, 1);
  EXPECT_EQ(pool.available(), 0);
  EXPECT_EQ(b.blocks_needed(0, 1), 1);
  try {
    store_rows(b, 0, 1, 2);
    FAIL() << "a store into a full pool succeeded";
  } catch (const KvPoolFull& e) {
    EXPECT_NE(std::string(e.what()).find("KV pool full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.length(), 0);
  a.truncate(10);
  store_rows(b, 0, 1, 2);
  EXPECT_EQ(b.length(), 1);
  EXPECT_THROW(KvBlockPool(1, 2, 32, 24, 4), UsageError);  // not a power of two
  EXPECT_THROW(KvBlockPool(1, 2, 32, 8, 4), UsageError);   // under 16
  EXPECT_THROW(KvBlockPool(1, 2, 32, 16, 0), UsageError);
  EXPECT_THROW(KvBlockPool(1, 2, 48, 16, 4, {KvType::kQ8_0, KvType::kF16}), UsageError);
}

}  // namespace
}  // namespace hearth::compute
