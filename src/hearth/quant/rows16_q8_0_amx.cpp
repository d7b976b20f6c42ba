// Q8_0 and Q4_0 row-interleaved matmul on AMX tiles (Intel AMX-INT8), for Rows16::dot_pair: 16
// tokens against two groups per tile step. A token's prepared activation block holds its 32
// quants in a row, so one block column of 16 tokens is a tile of 16 rows of 32 bytes at the
// activation stride; the weights' B tile is 8 lines of 64 bytes, each holding 4 consecutive
// quants of each of the group's 16 rows, as a rows16 Q8_0 block column already is.
//
// Once per call the pair's block columns are copied into B lines of signed weights (Q8_0:
// the layout's q + 128 flipped back to q; Q4_0: each nibble minus 8, low nibbles then high),
// so that tdpbssd's sums are the exact integer sums with the activation's offset correction
// already in them (x86 vpdpbusd needs unsigned weights and the correction; the tiles do not).
// That leaves the vectors one convert, one multiply and one fma per token, group and block:
// the tile is stored and scaled with the AVX-512 pair kernel's float steps (Q4_0 in its
// quads), so every (row, token) keeps dot's bits. The per-block scales are what limit it: each
// 32-element block needs its sums stored and scaled, so a step is 2 x 8192 multiply-adds
// against 32 AVX-512 rows of scaling.
//
#include <algorithm>
#include <vector>

#include "hearth/quant/amx_tile_config.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

constexpr int kTileTokens = 16;
// Tile registers: A (activations), B0 / B1 (the two groups' weights), and two sets of sums,
// C0 / C1 and C2 / C3, taken by block columns in turn (AmxTiles::block<Set>). The tile
// intrinsics take the register as a literal (GCC pastes it into the instruction), so AmxTiles
// writes these numbers out.
constexpr int kTileA = 0, kTileB0 = 1, kTileB1 = 2, kTileC0 = 3, kTileC1 = 4, kTileC2 = 5,
              kTileC3 = 6;

// The tile configuration: rows and bytes per row of each tile used.
AmxTileConfig q8_0_tile_config() {
  AmxTileConfig c;
  c.rows[kTileA] = kTileTokens;
  c.colsb[kTileA] = kQK0;  // one block of 32 activation quants per token
  for (int b : {kTileB0, kTileB1}) {
    c.rows[b] = kQK0 / 4;  // 8 lines of 4 quants per row
    c.colsb[b] = 64;
  }
  for (int s : {kTileC0, kTileC1, kTileC2, kTileC3}) {
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
  // a (16 rows of 32 bytes, a_stride apart) by the signed weight lines b0 / b1, through sum
  // tiles C0 / C1 (Set 0) or C2 / C3 (Set 1).
  template <int Set>
  static void block(const uint8_t* a, size_t a_stride, const uint8_t* b0, const uint8_t* b1,
                    int32_t* c0, int32_t* c1) {
    static_assert(kTileA == 0 && kTileB0 == 1 && kTileB1 == 2 && kTileC0 == 3 && kTileC1 == 4 &&
                  kTileC2 == 5 && kTileC3 == 6);
    _tile_loadd(0, a, static_cast<long>(a_stride));
    _tile_loadd(1, b0, 64);
    _tile_loadd(2, b1, 64);
    // The register numbers are pasted into the instruction text, hence a macro per set.
#define HEARTH_Q8_0_TILE_SUMS(C0, C1) \
  _tile_zero(C0);                     \
  _tile_zero(C1);                     \
  _tile_dpbssd(C0, 0, 1);             \
  _tile_dpbssd(C1, 0, 2);             \
  _tile_stored(C0, c0, 64);           \
  _tile_stored(C1, c1, 64)
    if constexpr (Set == 0) {
      HEARTH_Q8_0_TILE_SUMS(3, 4);
    } else {
      HEARTH_Q8_0_TILE_SUMS(5, 6);
    }
#undef HEARTH_Q8_0_TILE_SUMS
  }
};

// What AmxTiles::block computes, in plain code, to check the arrangement without AMX.
struct AmxModel {
  static void begin() {}
  static void end() {}
  template <int Set>
  static void block(const uint8_t* a, size_t a_stride, const uint8_t* b0, const uint8_t* b1,
                    int32_t* c0, int32_t* c1) {
    for (int t = 0; t < kTileTokens; ++t) {
      const auto* at = reinterpret_cast<const int8_t*>(a + static_cast<size_t>(t) * a_stride);
      for (int r = 0; r < kRows16; ++r) {
        int32_t s0 = 0, s1 = 0;
        for (int k = 0; k < kQK0; ++k) {
          const int at_b = 64 * (k / 4) + 4 * r + k % 4;
          s0 += at[k] * static_cast<int8_t>(b0[at_b]);
          s1 += at[k] * static_cast<int8_t>(b1[at_b]);
        }
        c0[kRows16 * t + r] = s0;
        c1[kRows16 * t + r] = s1;
      }
    }
  }
};

// A call's B lines: block column b of group k at (2b + k) * 512 bytes in a buffer of the
// calling thread, which grows to the longest rows seen (1 KiB a block column). Q8_0: the
// layout's lines with q + 128 flipped back to q; Q4_0: low nibbles (elements 0-15) then high
// (16-31), minus 8 (kQuads: Q4_0's quad steps).
struct Q8_0Lines {
  using L = Rows16Q8_0;
  static constexpr bool kQuads = false;
  static constexpr Rows16PairKernel* const* kRest = &rows16_q8_0_dot_pair_avx512;
  static void column(const uint8_t* src, uint8_t* dst) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int s = 0; s < 8; ++s) {
      _mm512_storeu_si512(dst + 64 * s, _mm512_xor_si512(_mm512_loadu_si512(src + 64 * s), flip));
    }
  }
};

struct Q4_0Lines {
  using L = Rows16Q4_0;
  static constexpr bool kQuads = true;
  static constexpr Rows16PairKernel* const* kRest = &rows16_q4_0_dot_pair_avx512;
  static void column(const uint8_t* src, uint8_t* dst) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_loadu_si512(src + 64 * s);
      _mm512_storeu_si512(dst + 64 * s, _mm512_sub_epi8(_mm512_and_si512(v, m4), eight));
      _mm512_storeu_si512(dst + 256 + 64 * s,
                          _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight));
    }
  }
};

constexpr size_t kColumnBytes = 8 * 64;

// The pair's B lines (W::column for every block column of both groups) in the thread's buffer.
template <typename W>
const uint8_t* signed_lines(const uint8_t* g0, int64_t cols) {
  using L = typename W::L;
  thread_local std::vector<uint8_t> buffer;
  const int64_t n_blocks = cols / L::kBlockCols;
  buffer.resize(std::max(buffer.size(), static_cast<size_t>(n_blocks) * 2 * kColumnBytes));
  const uint8_t* g[2] = {g0, g0 + rows16_group_bytes<L>(cols)};
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int k = 0; k < 2; ++k) {
      W::column(g[k] + b * L::kBlockBytes + 32,
                buffer.data() + static_cast<size_t>(2 * b + k) * kColumnBytes);
    }
  }
  return buffer.data();
}

// 16 tokens of Rows16::dot_pair (acts: their prepared rows act_stride apart; lines: the pair's
// signed B lines). Software-pipelined: block column b + 1 goes to the tiles (the other set of
// sum tiles and buffers) before the vectors scale block column b's sums, so the tile unit and
// the vectors work side by side. The sums end as the AVX-512 pair kernel's do
// (rows16_q8_0_pair_scale, the correction already in them; Q4_0 into its quads), so the bits
// are the same. Meanwhile `ahead` is fetched into L2 (Rows16FetchAhead).
template <typename Tiles, typename W>
void pair_16_tokens(int64_t cols, const uint8_t* g0, const uint8_t* lines, const uint8_t* acts,
                    size_t act_stride, float* out, size_t out_stride, Rows16Ahead ahead) {
  using L = typename W::L;
  const uint8_t* g1 = g0 + rows16_group_bytes<L>(cols);
  Rows16Acc<kTileTokens> acc0{}, acc1{}, q0{}, q1{};
  alignas(64) int32_t sums[2][2][kTileTokens * kRows16];  // [b % 2][group]
  const int64_t n_blocks = cols / L::kBlockCols;
  Rows16FetchAhead fetch(ahead, n_blocks);
  const auto issue = [&](int64_t b) {
    const uint8_t* a = acts + static_cast<size_t>(b) * L::kActBlockBytes + 8;
    const uint8_t* column = lines + static_cast<size_t>(2 * b) * kColumnBytes;
    int32_t(&s)[2][kTileTokens * kRows16] = sums[b % 2];
    if (b % 2 == 0) {
      Tiles::template block<0>(a, act_stride, column, column + kColumnBytes, s[0], s[1]);
    } else {
      Tiles::template block<1>(a, act_stride, column, column + kColumnBytes, s[0], s[1]);
    }
  };
  issue(0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const size_t at = static_cast<size_t>(b) * L::kBlockBytes;
    fetch.block(b);
    if (b + 1 < n_blocks) issue(b + 1);
    const uint8_t* ab[kTileTokens];
    for (int t = 0; t < kTileTokens; ++t) {
      ab[t] =
          acts + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * L::kActBlockBytes;
    }
    __m512i s0[kTileTokens], s1[kTileTokens];
    for (int t = 0; t < kTileTokens; ++t) {
      s0[t] = _mm512_load_si512(sums[b % 2][0] + kRows16 * t);
      s1[t] = _mm512_load_si512(sums[b % 2][1] + kRows16 * t);
    }
    if constexpr (W::kQuads) {
      rows16_q8_0_pair_scale<kTileTokens>(g0 + at, g1 + at, ab, s0, s1, q0, q1);
      rows16_end_quad<kTileTokens>(b, n_blocks, q0, acc0);
      rows16_end_quad<kTileTokens>(b, n_blocks, q1, acc1);
    } else {
      rows16_q8_0_pair_scale<kTileTokens>(g0 + at, g1 + at, ab, s0, s1, acc0, acc1);
    }
  }
  for (int t = 0; t < kTileTokens; ++t) {
    Rows16Lanes::store(out + static_cast<size_t>(t) * out_stride, acc0[t]);
    Rows16Lanes::store(out + static_cast<size_t>(t) * out_stride + kRows16, acc1[t]);
  }
}

// Rows16::dot_pair: whole tiles of 16 tokens, the rest on the AVX-512 pair kernel (same bits).
// The lines of next_bytes at next are dealt out over the tiles and that rest.
template <typename Tiles, typename W>
void dot_pair_tiles(int64_t cols, const void* groups, const void* acts, size_t act_stride,
                    int n_tokens, float* out, size_t out_stride, const void* next,
                    size_t next_bytes) {
  const auto* g = static_cast<const uint8_t*>(groups);
  const auto* a = static_cast<const uint8_t*>(acts);
  const Rows16Ahead ahead = Rows16Ahead::of(next, next_bytes);
  const int tiles = n_tokens / kTileTokens;
  const int steps = tiles + (n_tokens % kTileTokens != 0 ? 1 : 0);
  int t = 0;
  if (tiles > 0) {
    const uint8_t* lines = signed_lines<W>(g, cols);
    Tiles::begin();
    for (int i = 0; i < tiles; ++i, t += kTileTokens) {
      pair_16_tokens<Tiles, W>(cols, g, lines, a + static_cast<size_t>(t) * act_stride, act_stride,
                               out + static_cast<size_t>(t) * out_stride, out_stride,
                               ahead.part(i, steps));
    }
    Tiles::end();
  }
  if (t < n_tokens) {
    const Rows16Ahead rest = ahead.part(tiles, steps);
    (*W::kRest)(cols, groups, a + static_cast<size_t>(t) * act_stride, act_stride, n_tokens - t,
                out + static_cast<size_t>(t) * out_stride, out_stride, rest.at,
                static_cast<size_t>(rest.lines) * 64);
  }
}

}  // namespace

Rows16PairKernel* const rows16_q8_0_dot_pair_amx = dot_pair_tiles<AmxTiles, Q8_0Lines>;
Rows16PairKernel* const rows16_q8_0_dot_pair_amx_model = dot_pair_tiles<AmxModel, Q8_0Lines>;
Rows16PairKernel* const rows16_q4_0_dot_pair_amx = dot_pair_tiles<AmxTiles, Q4_0Lines>;
Rows16PairKernel* const rows16_q4_0_dot_pair_amx_model = dot_pair_tiles<AmxModel, Q4_0Lines>;

}  // namespace hearth::quant
