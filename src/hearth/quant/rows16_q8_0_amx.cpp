// Q8_0 row-interleaved matmul on AMX tiles (Intel AMX-INT8), for Rows16::dot_pair: 16 tokens
// against two groups per tile step. A rows16 Q8_0 block column is already the B operand of
// tdpbsud as the tile unit wants it (each 64-byte line holds 4 consecutive quants of each of
// 16 rows: rows16_kernels.h), and a token's prepared activation block holds its 32 quants in
// a row, so one block column of 16 tokens is a tile of 16 rows of 32 bytes at the activation
// stride. tdpbsud multiplies the signed activations by the offset (unsigned) weights, the
// integer sum vpdpbusd gives; the tile is stored and scaled per token and row with block's
// AVX-512 float steps, so every (row, token) keeps dot's bits. The per-block scales are what
// limit it: each 32-element block needs its sums stored and scaled, so a step is 2 x 8192
// multiply-adds against 32 AVX-512 rows of scaling.
//
// The tile instructions sit behind a policy so that the same loop also runs on a software
// model of them (AmxModel): tests check the arrangement on every AVX-512 machine, and the real
// tiles where the CPU has them (amx_usable()).
#include "hearth/quant/amx_tile_config.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

constexpr int kTileTokens = 16;
// Tile registers: A (activations), B0 / B1 (the two groups' weights), C0 / C1 (sums). The
// tile intrinsics take the register as a literal (GCC pastes it into the instruction), so
// AmxTiles writes these numbers out.
constexpr int kTileA = 0, kTileB0 = 1, kTileB1 = 2, kTileC0 = 3, kTileC1 = 4;

// The tile configuration: rows and bytes per row of each tile used.
AmxTileConfig q8_0_tile_config() {
  AmxTileConfig c;
  c.rows[kTileA] = kTileTokens;
  c.colsb[kTileA] = kQK0;  // one block of 32 activation quants per token
  for (int b : {kTileB0, kTileB1}) {
    c.rows[b] = kQK0 / 4;  // 8 lines of 4 quants per row
    c.colsb[b] = 64;
  }
  for (int s : {kTileC0, kTileC1}) {
    c.rows[s] = kTileTokens;
    c.colsb[s] = 64;  // 16 rows' int32 sums
  }
  return c;
}

struct AmxTiles {
  static void begin() {
    static const AmxTileConfig config = q8_0_tile_config();
    _tile_loadconfig(&config);
  }
  static void end() { _tile_release(); }
  // c0 / c1 (16 tokens x 16 rows of int32) = the block column's products: activation quants
  // a (16 rows of 32 bytes, a_stride apart) by the weight lines b0 / b1.
  static void block(const uint8_t* a, size_t a_stride, const uint8_t* b0, const uint8_t* b1,
                    int32_t* c0, int32_t* c1) {
    static_assert(kTileA == 0 && kTileB0 == 1 && kTileB1 == 2 && kTileC0 == 3 && kTileC1 == 4);
    _tile_zero(3);
    _tile_zero(4);
    _tile_loadd(0, a, static_cast<long>(a_stride));
    _tile_loadd(1, b0, 64);
    _tile_loadd(2, b1, 64);
    _tile_dpbsud(3, 0, 1);
    _tile_dpbsud(4, 0, 2);
    _tile_stored(3, c0, 64);
    _tile_stored(4, c1, 64);
  }
};

// What AmxTiles::block computes, in plain code, to check the arrangement without AMX.
struct AmxModel {
  static void begin() {}
  static void end() {}
  static void block(const uint8_t* a, size_t a_stride, const uint8_t* b0, const uint8_t* b1,
                    int32_t* c0, int32_t* c1) {
    for (int t = 0; t < kTileTokens; ++t) {
      const auto* at = reinterpret_cast<const int8_t*>(a + static_cast<size_t>(t) * a_stride);
      for (int r = 0; r < kRows16; ++r) {
        int32_t s0 = 0, s1 = 0;
        for (int k = 0; k < kQK0; ++k) {
          const size_t at_b = static_cast<size_t>(64 * (k / 4) + 4 * r + k % 4);
          s0 += at[k] * b0[at_b];
          s1 += at[k] * b1[at_b];
        }
        c0[kRows16 * t + r] = s0;
        c1[kRows16 * t + r] = s1;
      }
    }
  }
};

// 16 tokens of Rows16::dot_pair (acts: their prepared rows act_stride apart). The tile's sums
// end as the AVX-512 pair kernel's do (rows16_q8_0_pair_scale), so the bits are the same.
// Meanwhile `ahead` is fetched into L2 (Rows16FetchAhead).
template <typename Tiles>
void q8_0_pair_16_tokens(int64_t cols, const uint8_t* g0, const uint8_t* acts, size_t act_stride,
                         float* out, size_t out_stride, Rows16Ahead ahead) {
  using L = Rows16Q8_0;
  const uint8_t* g1 = g0 + rows16_group_bytes<L>(cols);
  Rows16Acc<kTileTokens> acc0{}, acc1{};
  alignas(64) int32_t sums[2][kTileTokens * kRows16];
  const int64_t n_blocks = cols / L::kBlockCols;
  Rows16FetchAhead fetch(ahead, n_blocks);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const size_t at = static_cast<size_t>(b) * L::kBlockBytes;
    fetch.block(b);
    const uint8_t* ab[kTileTokens];
    for (int t = 0; t < kTileTokens; ++t) {
      ab[t] =
          acts + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * L::kActBlockBytes;
    }
    Tiles::block(ab[0] + 8, act_stride, g0 + at + 32, g1 + at + 32, sums[0], sums[1]);
    __m512i s0[kTileTokens], s1[kTileTokens];
    for (int t = 0; t < kTileTokens; ++t) {
      s0[t] = _mm512_load_si512(sums[0] + kRows16 * t);
      s1[t] = _mm512_load_si512(sums[1] + kRows16 * t);
    }
    rows16_q8_0_pair_scale<kTileTokens>(g0 + at, g1 + at, ab, s0, s1, acc0, acc1);
  }
  for (int t = 0; t < kTileTokens; ++t) {
    Rows16Lanes::store(out + static_cast<size_t>(t) * out_stride, acc0[t]);
    Rows16Lanes::store(out + static_cast<size_t>(t) * out_stride + kRows16, acc1[t]);
  }
}

// Rows16::dot_pair: whole tiles of 16 tokens, the rest on the AVX-512 pair kernel (same bits).
// The lines of next_bytes at next are dealt out over the tiles and that rest.
template <typename Tiles>
void q8_0_dot_pair_tiles(int64_t cols, const void* groups, const void* acts, size_t act_stride,
                         int n_tokens, float* out, size_t out_stride, const void* next,
                         size_t next_bytes) {
  const auto* g = static_cast<const uint8_t*>(groups);
  const auto* a = static_cast<const uint8_t*>(acts);
  const Rows16Ahead ahead = Rows16Ahead::of(next, next_bytes);
  const int tiles = n_tokens / kTileTokens;
  const int steps = tiles + (n_tokens % kTileTokens != 0 ? 1 : 0);
  int t = 0;
  if (tiles > 0) {
    Tiles::begin();
    for (int i = 0; i < tiles; ++i, t += kTileTokens) {
      q8_0_pair_16_tokens<Tiles>(cols, g, a + static_cast<size_t>(t) * act_stride, act_stride,
                                 out + static_cast<size_t>(t) * out_stride, out_stride,
                                 ahead.part(i, steps));
    }
    Tiles::end();
  }
  if (t < n_tokens) {
    const Rows16Ahead rest = ahead.part(tiles, steps);
    rows16_q8_0_dot_pair_avx512(cols, groups, a + static_cast<size_t>(t) * act_stride, act_stride,
                                n_tokens - t, out + static_cast<size_t>(t) * out_stride, out_stride,
                                rest.at, static_cast<size_t>(rest.lines) * 64);
  }
}

}  // namespace

Rows16PairKernel* const rows16_q8_0_dot_pair_amx = q8_0_dot_pair_tiles<AmxTiles>;
Rows16PairKernel* const rows16_q8_0_dot_pair_amx_model = q8_0_dot_pair_tiles<AmxModel>;

}  // namespace hearth::quant
