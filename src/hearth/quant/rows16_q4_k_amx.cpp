// Q4_K and Q5_K row-interleaved matmul on AMX tiles (Intel AMX-INT8), for Rows16::dot_pair.
//
// The VNNI pair kernels scale each 32-element sub-block's sums by its row's scale, in vectors,
// per token: on CPUs whose 512-bit instructions share two ports with vpdpbusd, that work is
// what bounds them (docs/kernels.md, "Two 512-bit ports"). Here the scales go into the weights
// instead, once per block column and call, so that a tile product over the whole 256-element
// super-block gives a token's scaled sum at once. A scale (6 bits) times a quant (4 or 5 bits)
// does not fit in a byte, so each scale is split as sc = 8 (sc >> 3) + (sc & 7), and each half
// times the quant (at most 7 x 31) makes a byte plane: S1 = 8 T8 + T1, where T8 and T1 are the
// tile products with the two planes. The mins part, S2 = sum_j m[j] * bsum[j], is 4 vpdpwssd
// per token and row, with the float steps. Both are exact integer sums, and the float steps per
// (row, token) are the scalar kernel's, so the bits are dot's (rows16_kernels.h, Rows16Q4_K).
//
// On an Intel Xeon Emerald Rapids a tile load took about as long as a tile product, so the
// products' rate is bound by their operands' loads: each step loads 16 tokens' activations per
// pair and both planes, 3 loads for 2 products (docs/kernels.md, "AMX tiles").
//
// A call takes up to kRows16CallTokens tokens: the planes of a block column are built once and
// serve every tile of 16 tokens of the call; what is left below 16 tokens goes to the AVX-512
// pair kernel (same bits).
//
// As in rows16_q8_0_amx.cpp, the tile instructions sit behind a policy, so that tests run the
// same loop on a software model of them on every AVX-512 machine.
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

constexpr int kTileTokens = 16;
// Tiles of 16 tokens whose sums a call keeps at once (as many as a matmul call brings).
constexpr int kBatchTiles = kRows16CallTokens / kTileTokens;
static_assert(kRows16CallTokens % kTileTokens == 0);

// One group's block column as the tiles take it: per pair p of sub-blocks (2p, 2p + 1), 16 lines
// of 64 bytes, line k holding elements 4k .. 4k + 3 of the pair's 64 of each of the 16 rows
// (tdpbsud's B layout): lines 0-7 sub-block 2p, 8-15 sub-block 2p + 1.
struct alignas(64) Planes {
  uint8_t sc8[4][16][64];  // quant * (scale >> 3)
  uint8_t sc1[4][16][64];  // quant * (scale & 7)
};

// Tile registers: A (16 tokens' activation quants of a pair), three for the planes (B, taken in
// turn so that a load need not wait for the product before it), and the four sums (two groups,
// two planes).
// The 64-byte tile configuration (palette 1): every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

TileConfig q4_k_tile_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  return c;
}

// The two plane sums of a super-block for 16 tokens (rows: tokens, 16 int32 lanes: rows).
struct alignas(64) Sums {
  int32_t sc8[kTileTokens * kRows16];
  int32_t sc1[kTileTokens * kRows16];
};

struct AmxTiles {
  static void begin() {
    static const TileConfig config = q4_k_tile_config();
    _tile_loadconfig(&config);
  }
  static void end() { _tile_release(); }
  // s[k] = the super-block's products for 16 tokens: activation quants a (token t's 256 at
  // a + t * a_stride) by group k's planes w[k]. Each activation tile serves both groups' two
  // planes: 5 tile loads for 4 products.
  static void super_block(const uint8_t* a, size_t a_stride, const Planes (&w)[2], Sums (&s)[2]) {
    const auto stride = static_cast<long>(a_stride);
    // The tile intrinsics paste their register numbers into the instruction text, so the
    // pairs' rotation of the three B registers is written out by a macro.
#define HEARTH_Q4_K_PAIR(P, B0, B1, B2, B3) \
  _tile_loadd(0, a + 64 * (P), stride);     \
  _tile_loadd(B0, w[0].sc8[P], 64);         \
  _tile_dpbsud(4, 0, B0);                   \
  _tile_loadd(B1, w[0].sc1[P], 64);         \
  _tile_dpbsud(5, 0, B1);                   \
  _tile_loadd(B2, w[1].sc8[P], 64);         \
  _tile_dpbsud(6, 0, B2);                   \
  _tile_loadd(B3, w[1].sc1[P], 64);         \
  _tile_dpbsud(7, 0, B3)
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    HEARTH_Q4_K_PAIR(0, 1, 2, 3, 1);
    HEARTH_Q4_K_PAIR(1, 2, 3, 1, 2);
    HEARTH_Q4_K_PAIR(2, 3, 1, 2, 3);
    HEARTH_Q4_K_PAIR(3, 1, 2, 3, 1);
#undef HEARTH_Q4_K_PAIR
    _tile_stored(4, s[0].sc8, 64);
    _tile_stored(5, s[0].sc1, 64);
    _tile_stored(6, s[1].sc8, 64);
    _tile_stored(7, s[1].sc1, 64);
  }
};

// What AmxTiles::super_block computes, in plain code, to check the arrangement without AMX.
struct AmxModel {
  static void begin() {}
  static void end() {}
  static void super_block(const uint8_t* a, size_t a_stride, const Planes (&w)[2], Sums (&s)[2]) {
    for (int k = 0; k < 2; ++k) {
      for (int t = 0; t < kTileTokens; ++t) {
        const auto* at = reinterpret_cast<const int8_t*>(a + static_cast<size_t>(t) * a_stride);
        for (int r = 0; r < kRows16; ++r) {
          int32_t s8 = 0, s1 = 0;
          for (int p = 0; p < 4; ++p) {
            for (int e = 0; e < 64; ++e) {
              const int line = e / 4, at_line = 4 * r + e % 4;
              s8 += at[64 * p + e] * w[k].sc8[p][line][at_line];
              s1 += at[64 * p + e] * w[k].sc1[p][line][at_line];
            }
          }
          s[k].sc8[kRows16 * t + r] = s8;
          s[k].sc1[kRows16 * t + r] = s1;
        }
      }
    }
  }
};

// Each 32-bit lane (a row) holding a byte x, as x in both of its 16-bit halves.
[[gnu::always_inline]] inline __m512i rows_in_words(__m128i bytes) {
  const __m512i x = _mm512_cvtepu8_epi32(bytes);
  return _mm512_or_si512(x, _mm512_slli_epi32(x, 16));
}

// Pair p's lines of the planes of block column g (kQuants, kHighBits as in Q4_KAvx512). A
// plane byte is a quant times a 3-bit half of its row's scale: vpmullw on 16-bit lanes holding
// two quants gives both products at once, the low one never carrying into the high byte (at
// most 7 x 31 < 256).
template <int kQuants, int kHighBits>
[[gnu::always_inline]] inline void build_pair_planes(const uint8_t* g, int p, Planes& w) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m128i low3 = _mm_set1_epi8(0x07);
  const __m128i sc_lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p));
  const __m128i sc_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p + 16));
  const __m512i a8_lo = rows_in_words(_mm_and_si128(_mm_srli_epi16(sc_lo, 3), low3));
  const __m512i a1_lo = rows_in_words(_mm_and_si128(sc_lo, low3));
  const __m512i a8_hi = rows_in_words(_mm_and_si128(_mm_srli_epi16(sc_hi, 3), low3));
  const __m512i a1_hi = rows_in_words(_mm_and_si128(sc_hi, low3));
  __m512i h = _mm512_setzero_si512();  // Q5_K: the high bits of slices 4(s/4) .. +3
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    const __m512i v = _mm512_loadu_si512(g + kQuants + 512 * p + 64 * s);
    __m512i lo, hi;
    if constexpr (kHighBits >= 0) {
      if (s % 4 == 0) h = _mm512_loadu_si512(g + kHighBits + 128 * p + 16 * s);
      rows16_q5_k_decode_pair(v, h, s, lo, hi);
    } else {
      lo = _mm512_and_si512(v, low4);
      hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    _mm512_store_si512(w.sc8[p][s], _mm512_mullo_epi16(lo, a8_lo));
    _mm512_store_si512(w.sc1[p][s], _mm512_mullo_epi16(lo, a1_lo));
    _mm512_store_si512(w.sc8[p][8 + s], _mm512_mullo_epi16(hi, a8_hi));
    _mm512_store_si512(w.sc1[p][8 + s], _mm512_mullo_epi16(hi, a1_hi));
  }
}

// A step of the tile loop: one group's super-block for one tile of 16 tokens.
struct Step {
  const uint8_t* g = nullptr;  // the group's block column
  const uint8_t* a = nullptr;  // the tile's first token's activation block
  float* acc = nullptr;        // the tile's sums for the group (16 tokens x 16 rows)
};

// The float steps of a finished step from its plane sums s: per (row, token) S1 = 8 T8 + T1,
// S2 = sum_j m[j] * bsum[j] (vpdpwssd on the mins, as u16 pairs, and the token's sub-block sum
// pairs), then the scalar kernel's two fma.
[[gnu::always_inline]] inline void scale_sums(const Step& st, size_t a_stride, const Sums& s) {
  const __m512 dw = Rows16Lanes::f16(st.g, 0);
  const __m512 dm = Rows16Lanes::f16(st.g + 32, 0);
  __m512i m16[4];
  for (int p = 0; p < 4; ++p) {
    m16[p] = _mm512_cvtepu8_epi16(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(st.g + 192 + 32 * p)));
  }
  for (int t = 0; t < kTileTokens; ++t) {
    const uint8_t* at = st.a + static_cast<size_t>(t) * a_stride;
    const float da = rows16_load_f32(at);
    const __m512i s1 =
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(s.sc8 + kRows16 * t), 3),
                         _mm512_load_si512(s.sc1 + kRows16 * t));
    __m512i s2 = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      s2 = _mm512_dpwssd_epi32(s2, m16[p], _mm512_set1_epi32(rows16_load_i32(at + 16 + 4 * p)));
    }
    float* acc = st.acc + kRows16 * t;
    __m512 v = Rows16Lanes::fma_scaled(dw, da, s1, _mm512_load_ps(acc));
    v = Rows16Lanes::fnma_scaled(dm, da, s2, v);
    _mm512_store_ps(acc, v);
  }
}

// Rows16::dot_pair for n_tiles (<= kBatchTiles) whole tiles of tokens from acts. The steps
// (a tile's super-block, both groups) run in turn on the tiles; while the tiles work on one,
// the vectors scale the last one's sums and build a share of the next block column's planes,
// so the tiles rarely wait for either.
template <typename Tiles, typename L, int kQuants, int kHighBits>
void pair_tiles(int64_t cols, const uint8_t* g0, const uint8_t* acts, size_t act_stride,
                int n_tiles, float* out, size_t out_stride, Rows16Ahead ahead) {
  const size_t group_bytes = rows16_group_bytes<L>(cols);
  // acc[i][k]: group k's sums for tile i, token-major (16 floats per token).
  alignas(64) float acc[kBatchTiles][2][kTileTokens * kRows16] = {};
  // planes[b % 2]: the groups' for block column b, built while the tiles work on b - 1.
  Planes planes[2][2];
  Sums sums[2][2];  // [step % 2][group]
  const int64_t n_blocks = cols / L::kBlockCols;
  Rows16FetchAhead fetch(ahead, n_blocks);
  for (int u = 0; u < 8; ++u) {
    build_pair_planes<kQuants, kHighBits>(g0 + (u / 4) * group_bytes, u % 4, planes[0][u / 4]);
  }
  // The last step issued: its block column's offset and tile.
  size_t last_at = 0;
  int last_tile = 0;
  const auto scale_last = [&](const Sums(&s)[2]) {
    const uint8_t* a = acts + static_cast<size_t>(kTileTokens * last_tile) * act_stride +
                       last_at / L::kBlockBytes * L::kActBlockBytes;
    for (int k = 0; k < 2; ++k) {
      scale_sums(Step{g0 + k * group_bytes + last_at, a, acc[last_tile][k]}, act_stride, s[k]);
    }
  };
  int n = 0;  // steps issued
  for (int64_t b = 0; b < n_blocks; ++b) {
    const size_t at = static_cast<size_t>(b) * L::kBlockBytes;
    fetch.block(b);
    for (int i = 0; i < n_tiles; ++i, ++n) {
      const uint8_t* a = acts + static_cast<size_t>(kTileTokens * i) * act_stride +
                         static_cast<size_t>(b) * L::kActBlockBytes;
      Tiles::super_block(a + 32, act_stride, planes[b % 2], sums[n % 2]);
      if (n > 0) scale_last(sums[(n - 1) % 2]);
      last_at = at;
      last_tile = i;
      // This step's share of the next block column's eight (group, pair) plane builds.
      if (b + 1 < n_blocks) {
        for (int u = 8 * i / n_tiles; u < 8 * (i + 1) / n_tiles; ++u) {
          build_pair_planes<kQuants, kHighBits>(g0 + (u / 4) * group_bytes + at + L::kBlockBytes,
                                                u % 4, planes[(b + 1) % 2][u / 4]);
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
template <typename Tiles, typename L, int kQuants, int kHighBits, Rows16PairKernel* const* kRest>
void dot_pair_tiles(int64_t cols, const void* groups, const void* acts, size_t act_stride,
                    int n_tokens, float* out, size_t out_stride, const void* next,
                    size_t next_bytes) {
  const auto* g = static_cast<const uint8_t*>(groups);
  const auto* a = static_cast<const uint8_t*>(acts);
  const Rows16Ahead ahead = Rows16Ahead::of(next, next_bytes);
  const int tiles = n_tokens / kTileTokens;
  const int batches = (tiles + kBatchTiles - 1) / kBatchTiles;
  const int steps = batches + (n_tokens % kTileTokens != 0 ? 1 : 0);
  int t = 0;
  if (tiles > 0) {
    Tiles::begin();
    for (int i = 0; i < batches; ++i) {
      const int n = std::min(kBatchTiles, tiles - kBatchTiles * i);
      pair_tiles<Tiles, L, kQuants, kHighBits>(
          cols, g, a + static_cast<size_t>(t) * act_stride, act_stride, n,
          out + static_cast<size_t>(t) * out_stride, out_stride, ahead.part(i, steps));
      t += kTileTokens * n;
    }
    Tiles::end();
  }
  if (t < n_tokens) {
    const Rows16Ahead rest = ahead.part(batches, steps);
    (*kRest)(cols, groups, a + static_cast<size_t>(t) * act_stride, act_stride, n_tokens - t,
             out + static_cast<size_t>(t) * out_stride, out_stride, rest.at,
             static_cast<size_t>(rest.lines) * 64);
  }
}

template <typename Tiles>
constexpr Rows16PairKernel* q4_k_pair =
    dot_pair_tiles<Tiles, Rows16Q4_K, kRows16Q4_KQuants, -1, &rows16_q4_k_dot_pair_avx512>;
template <typename Tiles>
constexpr Rows16PairKernel* q5_k_pair =
    dot_pair_tiles<Tiles, Rows16Q5_K, kRows16Q5_KQuants, kRows16Q5_KHighBits,
                   &rows16_q5_k_dot_pair_avx512>;

}  // namespace

Rows16PairKernel* const rows16_q4_k_dot_pair_amx = q4_k_pair<AmxTiles>;
Rows16PairKernel* const rows16_q4_k_dot_pair_amx_model = q4_k_pair<AmxModel>;
Rows16PairKernel* const rows16_q5_k_dot_pair_amx = q5_k_pair<AmxTiles>;
Rows16PairKernel* const rows16_q5_k_dot_pair_amx_model = q5_k_pair<AmxModel>;

}  // namespace hearth::quant
