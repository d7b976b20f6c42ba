// Q4_K, Q5_K and Q6_K row-interleaved matmul on AMX tiles (Intel AMX-INT8), for
// Rows16::dot_pair.
//
// The VNNI pair kernels scale each sub-block's sums by its row's scale, in vectors, per token:
// on CPUs whose 512-bit instructions share two ports with vpdpbusd, that work is what bounds
// them (docs/kernels.md, "Two 512-bit ports"). Here the scales go into the weights instead,
// once per block column and call, so that a tile product over the whole 256-element
// super-block gives a token's scaled integer sum at once. A scaled quant does not fit in a
// byte, so it is split over two byte planes, hi and lo, with S = (T_hi << kShift) + T_lo for
// the tile products T with each:
// - Q4_K, Q5_K: sc = 8 (sc >> 3) + (sc & 7); hi = quant * (sc >> 3), lo = quant * (sc & 7),
//   each at most 7 x 31, kShift 3. The mins part, S2 = sum_j m[j] * bsum[j], is 4 vpdpwssd
//   per token with the float steps.
// - Q6_K: the 16-bit product sc * (q - 32) (the layout's offset folded in, so no correction
//   is left), hi its signed high byte (tdpbssd), lo its low byte, kShift 8.
// Every sum is the exact integer the scalar kernel forms, and the float steps per (row, token)
// are its steps, so the bits are dot's (rows16_kernels.h).
//
// On an Intel Xeon Emerald Rapids a tile load took about as long as a tile product, so the
// products' rate is bound by their operands' loads: a step loads 16 tokens' activations per
// 64 elements and both groups' two planes, 5 loads for 4 products (docs/kernels.md, "AMX
// tiles").
//
// A call takes up to kRows16MaxCallTokens tokens: the planes of a block column are built once
// and serve every tile of 16 tokens of the call (longer calls ran faster: docs/kernels.md); what is
// left below 16 tokens goes to the AVX-512 pair kernel (same bits).
//
// As in rows16_q8_0_amx.cpp, the tile instructions sit behind a policy, so that tests run the
// same loop on a software model of them on every AVX-512 machine.
#include "hearth/quant/amx_tile_config.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

constexpr int kTileTokens = 16;
// Tiles of 16 tokens whose sums a call keeps at once (as many as a matmul call brings:
// Rows16::call_tokens, which the registry sets to kRows16MaxCallTokens with these kernels).
constexpr int kBatchTiles = kRows16MaxCallTokens / kTileTokens;
static_assert(kRows16MaxCallTokens % kTileTokens == 0);

// One group's block column as the tiles take it: per chunk c of 64 elements, 16 lines of 64
// bytes, line k holding elements 64c + 4k .. 64c + 4k + 3 of each of the 16 rows (tdpbsud's
// B layout).
struct alignas(64) Planes {
  uint8_t hi[4][16][64];
  uint8_t lo[4][16][64];
};

// The two planes' sums of a super-block for 16 tokens (rows: tokens, 16 int32 lanes: rows).
struct alignas(64) Sums {
  int32_t hi[kTileTokens * kRows16];
  int32_t lo[kTileTokens * kRows16];
};

// The tile configuration: every tile 16 rows of 64 bytes. Tile 0 holds the activations of a
// chunk, 1-3 the planes (B, taken in turn so that a load need not wait for the product before
// it), 4-7 the sums (two groups, two planes).
AmxTileConfig k_quants_tile_config() {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  return c;
}

// kHiSigned: the hi plane holds signed bytes (Q6_K).
template <bool kHiSigned>
struct AmxTiles {
  static void begin() {
    static const AmxTileConfig config = k_quants_tile_config();
    _tile_loadconfig(&config);
  }
  static void end() { _tile_release(); }
  // s[k] = the super-block's products for 16 tokens: activation quants a (token t's 256 at
  // a + t * a_stride) by group k's planes w[k]. Each activation tile serves both groups' two
  // planes.
  static void super_block(const uint8_t* a, size_t a_stride, const Planes (&w)[2], Sums (&s)[2]) {
    const auto stride = static_cast<long>(a_stride);
    // The tile intrinsics paste their register numbers into the instruction text, so the
    // chunks' rotation of the three B registers is written out by macros.
#define HEARTH_K_QUANTS_CHUNK(DP_HI, C, B0, B1, B2, B3) \
  _tile_loadd(0, a + 64 * (C), stride);                 \
  _tile_loadd(B0, w[0].hi[C], 64);                      \
  DP_HI(4, 0, B0);                                      \
  _tile_loadd(B1, w[0].lo[C], 64);                      \
  _tile_dpbsud(5, 0, B1);                               \
  _tile_loadd(B2, w[1].hi[C], 64);                      \
  DP_HI(6, 0, B2);                                      \
  _tile_loadd(B3, w[1].lo[C], 64);                      \
  _tile_dpbsud(7, 0, B3)
#define HEARTH_K_QUANTS_SUPER_BLOCK(DP_HI)     \
  HEARTH_K_QUANTS_CHUNK(DP_HI, 0, 1, 2, 3, 1); \
  HEARTH_K_QUANTS_CHUNK(DP_HI, 1, 2, 3, 1, 2); \
  HEARTH_K_QUANTS_CHUNK(DP_HI, 2, 3, 1, 2, 3); \
  HEARTH_K_QUANTS_CHUNK(DP_HI, 3, 1, 2, 3, 1)
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    if constexpr (kHiSigned) {
      HEARTH_K_QUANTS_SUPER_BLOCK(_tile_dpbssd);
    } else {
      HEARTH_K_QUANTS_SUPER_BLOCK(_tile_dpbsud);
    }
#undef HEARTH_K_QUANTS_SUPER_BLOCK
#undef HEARTH_K_QUANTS_CHUNK
    _tile_stored(4, s[0].hi, 64);
    _tile_stored(5, s[0].lo, 64);
    _tile_stored(6, s[1].hi, 64);
    _tile_stored(7, s[1].lo, 64);
  }
};

// What AmxTiles::super_block computes, in plain code, to check the arrangement without AMX.
template <bool kHiSigned>
struct AmxModel {
  static void begin() {}
  static void end() {}
  static void super_block(const uint8_t* a, size_t a_stride, const Planes (&w)[2], Sums (&s)[2]) {
    for (int k = 0; k < 2; ++k) {
      for (int t = 0; t < kTileTokens; ++t) {
        const auto* at = reinterpret_cast<const int8_t*>(a + static_cast<size_t>(t) * a_stride);
        for (int r = 0; r < kRows16; ++r) {
          int32_t hi = 0, lo = 0;
          for (int c = 0; c < 4; ++c) {
            for (int e = 0; e < 64; ++e) {
              const int line = e / 4, at_line = 4 * r + e % 4;
              const uint8_t h = w[k].hi[c][line][at_line];
              hi += at[64 * c + e] * (kHiSigned ? static_cast<int8_t>(h) : h);
              lo += at[64 * c + e] * w[k].lo[c][line][at_line];
            }
          }
          s[k].hi[kRows16 * t + r] = hi;
          s[k].lo[kRows16 * t + r] = lo;
        }
      }
    }
  }
};

// Each 32-bit lane (a row) holding x, as its low 16 bits in both of its 16-bit halves.
[[gnu::always_inline]] inline __m512i rows_in_words(__m512i x) {
  return _mm512_ternarylogic_epi32(_mm512_set1_epi32(0xffff), x, _mm512_slli_epi32(x, 16), 0xEA);
}

// Q4_K (kHighBits < 0) and Q5_K: where the layout keeps its quants and high bits
// (rows16_kernels.h).
template <typename Layout, int kQuants, int kHighBits>
struct Q4_KPlanes {
  using L = Layout;
  static constexpr bool kHiSigned = false;
  static constexpr int kActQuants = 32;  // where a prepared activation block holds its quants

  // Chunk c's lines of the planes of block column g: sub-blocks 2c (lines 0-7) and 2c + 1
  // (lines 8-15). vpmullw on 16-bit lanes holding two quants gives both products at once, the
  // low one never carrying into the high byte (at most 7 x 31 < 256).
  [[gnu::always_inline]] static void build(const uint8_t* g, int c, Planes& w) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i low3 = _mm512_set1_epi32(0x07);
    const auto scales = [&](int j) {
      return _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 16 * j)));
    };
    const __m512i sc_lo = scales(2 * c), sc_hi = scales(2 * c + 1);
    const __m512i a8_lo = rows_in_words(_mm512_srli_epi32(sc_lo, 3));
    const __m512i a1_lo = rows_in_words(_mm512_and_si512(sc_lo, low3));
    const __m512i a8_hi = rows_in_words(_mm512_srli_epi32(sc_hi, 3));
    const __m512i a1_hi = rows_in_words(_mm512_and_si512(sc_hi, low3));
    __m512i h = _mm512_setzero_si512();  // Q5_K: the high bits of slices 4(s/4) .. +3
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m512i v = _mm512_loadu_si512(g + kQuants + 512 * c + 64 * s);
      __m512i lo, hi;
      if constexpr (kHighBits >= 0) {
        if (s % 4 == 0) h = _mm512_loadu_si512(g + kHighBits + 128 * c + 16 * s);
        rows16_q5_k_decode_pair(v, h, s, lo, hi);
      } else {
        lo = _mm512_and_si512(v, low4);
        hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
      _mm512_store_si512(w.hi[c][s], _mm512_mullo_epi16(lo, a8_lo));
      _mm512_store_si512(w.lo[c][s], _mm512_mullo_epi16(lo, a1_lo));
      _mm512_store_si512(w.hi[c][8 + s], _mm512_mullo_epi16(hi, a8_hi));
      _mm512_store_si512(w.lo[c][8 + s], _mm512_mullo_epi16(hi, a1_hi));
    }
  }

  // The float steps of block column g for the tile of 16 tokens from a (act_stride apart),
  // from its plane sums s, into acc (16 tokens x 16 rows): S1 = 8 T_hi + T_lo,
  // S2 = sum_j m[j] * bsum[j] (vpdpwssd on the mins, as u16 pairs, and the token's sub-block
  // sum pairs), then the scalar kernel's two fma.
  [[gnu::always_inline]] static void scale(const uint8_t* g, const uint8_t* a, size_t a_stride,
                                           const Sums& s, float* acc) {
    const __m512 dw = Rows16Lanes::f16(g, 0);
    const __m512 dm = Rows16Lanes::f16(g + 32, 0);
    __m512i m16[4];
    for (int p = 0; p < 4; ++p) {
      m16[p] = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 192 + 32 * p)));
    }
    for (int t = 0; t < kTileTokens; ++t) {
      const uint8_t* at = a + static_cast<size_t>(t) * a_stride;
      const float da = rows16_load_f32(at);
      const __m512i s1 =
          _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(s.hi + kRows16 * t), 3),
                           _mm512_load_si512(s.lo + kRows16 * t));
      __m512i s2 = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        s2 = _mm512_dpwssd_epi32(s2, m16[p], _mm512_set1_epi32(rows16_load_i32(at + 16 + 4 * p)));
      }
      float* out = acc + kRows16 * t;
      __m512 v = Rows16Lanes::fma_scaled(dw, da, s1, _mm512_load_ps(out));
      v = Rows16Lanes::fnma_scaled(dm, da, s2, v);
      _mm512_store_ps(out, v);
    }
  }
};

struct Q6_KPlanes {
  using L = Rows16Q6_K;
  static constexpr bool kHiSigned = true;
  static constexpr int kActQuants = 80;

  // Chunk c's lines of the planes of block column g: groups 4c .. 4c + 3, four lines each.
  // Per 16-bit lane the even and the odd byte's products sc * (q - 32) (at most 128 x 32 in
  // magnitude) are formed apart; lo takes their low bytes, hi their high bytes, in place.
  [[gnu::always_inline]] static void build(const uint8_t* g, int c, Planes& w) {
    const __m512i low_byte = _mm512_set1_epi16(0x00ff);
    const __m512i high_byte = _mm512_set1_epi16(static_cast<short>(0xff00));
    const __m512i off = _mm512_set1_epi16(32);
    for (int j = 0; j < 4; ++j) {
      const int grp = 4 * c + j;
      const uint8_t* v = g + 288 + 192 * grp;
      __m512i q[4];
      rows16_q6_k_decode(_mm512_loadu_si512(v), _mm512_loadu_si512(v + 64),
                         _mm512_loadu_si512(v + 128), q);
      const __m512i sc = rows_in_words(_mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 32 + 16 * grp))));
      for (int k = 0; k < 4; ++k) {
        const __m512i even =
            _mm512_mullo_epi16(_mm512_sub_epi16(_mm512_and_si512(q[k], low_byte), off), sc);
        const __m512i odd =
            _mm512_mullo_epi16(_mm512_sub_epi16(_mm512_srli_epi16(q[k], 8), off), sc);
        // (mask & a) | b: truth table 0xEA
        _mm512_store_si512(
            w.lo[c][4 * j + k],
            _mm512_ternarylogic_epi32(low_byte, even, _mm512_slli_epi16(odd, 8), 0xEA));
        _mm512_store_si512(
            w.hi[c][4 * j + k],
            _mm512_ternarylogic_epi32(high_byte, odd, _mm512_srli_epi16(even, 8), 0xEA));
      }
    }
  }

  // The float steps (arguments as Q4_KPlanes::scale): S = 256 T_hi + T_lo, then the scalar
  // kernel's fma.
  [[gnu::always_inline]] static void scale(const uint8_t* g, const uint8_t* a, size_t a_stride,
                                           const Sums& s, float* acc) {
    const __m512 dw = Rows16Lanes::f16(g, 0);
    for (int t = 0; t < kTileTokens; ++t) {
      const float da = rows16_load_f32(a + static_cast<size_t>(t) * a_stride);
      const __m512i sum =
          _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(s.hi + kRows16 * t), 8),
                           _mm512_load_si512(s.lo + kRows16 * t));
      float* out = acc + kRows16 * t;
      _mm512_store_ps(out, Rows16Lanes::fma_scaled(dw, da, sum, _mm512_load_ps(out)));
    }
  }
};

// Rows16::dot_pair for n_tiles (<= kBatchTiles) whole tiles of tokens from acts. The steps
// (a tile's super-block, both groups) run in turn on the tiles; while the tiles work on one,
// the vectors scale the last one's sums and build a share of the next block column's planes,
// so the tiles rarely wait for either.
template <typename Tiles, typename K>
void pair_tiles(int64_t cols, const uint8_t* g0, const uint8_t* acts, size_t act_stride,
                int n_tiles, float* out, size_t out_stride, Rows16Ahead ahead) {
  using L = typename K::L;
  const size_t group_bytes = rows16_group_bytes<L>(cols);
  // acc[i][k]: group k's sums for tile i, token-major (16 floats per token).
  alignas(64) float acc[kBatchTiles][2][kTileTokens * kRows16] = {};
  // planes[b % 2]: the groups' for block column b, built while the tiles work on b - 1.
  Planes planes[2][2];
  Sums sums[2][2];  // [step % 2][group]
  const int64_t n_blocks = cols / L::kBlockCols;
  Rows16FetchAhead fetch(ahead, n_blocks);
  for (int u = 0; u < 8; ++u) K::build(g0 + (u / 4) * group_bytes, u % 4, planes[0][u / 4]);
  // The last step issued: its block column and tile.
  int64_t last_b = 0;
  int last_tile = 0;
  const auto tile_acts = [&](int i, int64_t b) {
    return acts + static_cast<size_t>(kTileTokens * i) * act_stride +
           static_cast<size_t>(b) * L::kActBlockBytes;
  };
  const auto scale_last = [&](const Sums(&s)[2]) {
    const uint8_t* a = tile_acts(last_tile, last_b);
    const size_t at = static_cast<size_t>(last_b) * L::kBlockBytes;
    for (int k = 0; k < 2; ++k) {
      K::scale(g0 + k * group_bytes + at, a, act_stride, s[k], acc[last_tile][k]);
    }
  };
  int n = 0;  // steps issued
  for (int64_t b = 0; b < n_blocks; ++b) {
    const size_t next_at = static_cast<size_t>(b + 1) * L::kBlockBytes;
    fetch.block(b);
    for (int i = 0; i < n_tiles; ++i, ++n) {
      Tiles::super_block(tile_acts(i, b) + K::kActQuants, act_stride, planes[b % 2], sums[n % 2]);
      if (n > 0) scale_last(sums[(n - 1) % 2]);
      last_b = b;
      last_tile = i;
      // This step's share of the next block column's eight (group, chunk) plane builds.
      if (b + 1 < n_blocks) {
        for (int u = 8 * i / n_tiles; u < 8 * (i + 1) / n_tiles; ++u) {
          K::build(g0 + (u / 4) * group_bytes + next_at, u % 4, planes[(b + 1) % 2][u / 4]);
        }
      }
    }
  }
  scale_last(sums[(n - 1) % 2]);
  for (int i = 0; i < n_tiles; ++i) {
    for (int t = 0; t < kTileTokens; ++t) {
      float* o = out + static_cast<size_t>(kTileTokens * i + t) * out_stride;
      _mm512_storeu_ps(o, _mm512_load_ps(acc[i][0] + kRows16 * t));
      _mm512_storeu_ps(o + kRows16, _mm512_load_ps(acc[i][1] + kRows16 * t));
    }
  }
}

// Rows16::dot_pair: whole tiles of 16 tokens, kBatchTiles at a time, the rest on the AVX-512
// pair kernel `rest` (same bits). The lines of next_bytes at next are dealt out over the
// batches and that rest.
template <template <bool> class Tiles, typename K, Rows16PairKernel* const* kRest>
void dot_pair_tiles(int64_t cols, const void* groups, const void* acts, size_t act_stride,
                    int n_tokens, float* out, size_t out_stride, const void* next,
                    size_t next_bytes) {
  using T = Tiles<K::kHiSigned>;
  const auto* g = static_cast<const uint8_t*>(groups);
  const auto* a = static_cast<const uint8_t*>(acts);
  const Rows16Ahead ahead = Rows16Ahead::of(next, next_bytes);
  const int tiles = n_tokens / kTileTokens;
  const int batches = (tiles + kBatchTiles - 1) / kBatchTiles;
  const int steps = batches + (n_tokens % kTileTokens != 0 ? 1 : 0);
  int t = 0;
  if (tiles > 0) {
    T::begin();
    for (int i = 0; i < batches; ++i) {
      const int n = std::min(kBatchTiles, tiles - kBatchTiles * i);
      pair_tiles<T, K>(cols, g, a + static_cast<size_t>(t) * act_stride, act_stride, n,
                       out + static_cast<size_t>(t) * out_stride, out_stride, ahead.part(i, steps));
      t += kTileTokens * n;
    }
    T::end();
  }
  if (t < n_tokens) {
    const Rows16Ahead rest = ahead.part(batches, steps);
    (*kRest)(cols, groups, a + static_cast<size_t>(t) * act_stride, act_stride, n_tokens - t,
             out + static_cast<size_t>(t) * out_stride, out_stride, rest.at,
             static_cast<size_t>(rest.lines) * 64);
  }
}

using Q4_K = Q4_KPlanes<Rows16Q4_K, kRows16Q4_KQuants, -1>;
using Q5_K = Q4_KPlanes<Rows16Q5_K, kRows16Q5_KQuants, kRows16Q5_KHighBits>;

}  // namespace

Rows16PairKernel* const rows16_q4_k_dot_pair_amx =
    dot_pair_tiles<AmxTiles, Q4_K, &rows16_q4_k_dot_pair_avx512>;
Rows16PairKernel* const rows16_q4_k_dot_pair_amx_model =
    dot_pair_tiles<AmxModel, Q4_K, &rows16_q4_k_dot_pair_avx512>;
Rows16PairKernel* const rows16_q5_k_dot_pair_amx =
    dot_pair_tiles<AmxTiles, Q5_K, &rows16_q5_k_dot_pair_avx512>;
Rows16PairKernel* const rows16_q5_k_dot_pair_amx_model =
    dot_pair_tiles<AmxModel, Q5_K, &rows16_q5_k_dot_pair_avx512>;
Rows16PairKernel* const rows16_q6_k_dot_pair_amx =
    dot_pair_tiles<AmxTiles, Q6_KPlanes, &rows16_q6_k_dot_pair_avx512>;
Rows16PairKernel* const rows16_q6_k_dot_pair_amx_model =
    dot_pair_tiles<AmxModel, Q6_KPlanes, &rows16_q6_k_dot_pair_avx512>;

}  // namespace hearth::quant
