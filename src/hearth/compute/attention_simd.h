// The attention kernel written against simd::VecF; include only from simd_kernels.inc.
//
// One call handles the query rows of one kv head that share a causal length. Positions are
// taken in chunks: scores of a chunk for every row, an online-softmax update (rescale the
// running sum and accumulator when the running max grows), then the weighted V rows. K is
// read as tiles of 16 positions held transposed (kv_cache.h "K tiles"): a score vector has
// one position per lane, so a K value converted once serves every row with one multiply-add
// and no sum across lanes is needed. K tiles of a block type are multiplied in integers
// (int16 query by int8 K, pairs of dims per instruction; detail::quantize_query_block), and
// each block's exact sum scaled once. V rows of f16 and f32 are read in place, four
// positions per pass over the accumulator, each vector converted as it is loaded; V of a
// block type is read as V tiles (kv_cache.h "V tiles") and also summed in integers: the
// weights times V's scales rounded to int16 per row and block, pairs of positions per
// instruction (weigh_v_tiles). q4_0 tiles are widened to int8 first. Everything stays on
// the stack (under 48 KiB).
#pragma once

#include <cmath>
#include <type_traits>

#include "hearth/compute/activation_simd.h"
#include "hearth/compute/attention.h"
#include "hearth/compute/softmax_simd.h"

namespace hearth::compute::simd {
namespace {

constexpr int kChunk = 128;  // positions per online-softmax step: scores fit in L1

// Asks for [p, p + bytes) into L2 (into L1 it would evict the chunk being computed).
inline void prefetch_l2(const uint8_t* p, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T1);
  }
}
// Rows processed together: their accumulators plus one K vector fit the register file
// (32 zmm with AVX-512, 16 ymm with AVX2).
constexpr int kMaxRows = VecF::kLanes == 16 ? 8 : 4;
constexpr int kMaxHeadDim = detail::kAttentionMaxHeadDim;

inline VecF load_f16_partial(const uint16_t* p, int n) {
  uint16_t tmp[VecF::kLanes] = {};  // (kLanes) f16, zero padded
  for (int i = 0; i < n; ++i) tmp[i] = p[i];
  return VecF::load_f16(tmp);
}

// A run of K or V rows from one position on: load(i, d) is row i's values [d, d + kLanes) as
// f32, load_partial the first n of them (the rest 0).
struct F16View {
  const uint16_t* p;
  int hd;
  VecF load(int i, int d) const { return VecF::load_f16(p + i * hd + d); }
  VecF load_partial(int i, int d, int n) const { return load_f16_partial(p + i * hd + d, n); }
};
struct F32View {
  const float* p;
  int hd;
  VecF load(int i, int d) const { return VecF::load(p + i * hd + d); }
  VecF load_partial(int i, int d, int n) const { return VecF::load_partial(p + i * hd + d, n); }
};
// Where the kernel reads V rows of f16 or f32: rows(pos) is a view of the rows from
// position pos on. The kernel asks for up to 4 rows at a multiple of their count, which
// never straddle two blocks of the cache.
struct F16Rows {
  static constexpr bool kBlocks = false;
  detail::KvRows r;
  int hd;
  F16View rows(int64_t pos) const { return {reinterpret_cast<const uint16_t*>(r.row(pos)), hd}; }
};
struct F32Rows {
  static constexpr bool kBlocks = false;
  detail::KvRows r;
  int hd;
  F32View rows(int64_t pos) const { return {reinterpret_cast<const float*>(r.row(pos)), hd}; }
};

// q4_0 runs of 16 bytes (place j in byte j % 16, the low nibble for j < 16) -> the same
// places as int8 (nibble - 8), 32 bytes per run: the layout of the q8_0 tiles.
inline void widen_nibble_runs(const uint8_t* nibbles, int n_runs, int8_t* dst) {
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int g = 0; g < n_runs; ++g) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibbles + g * 16));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(x, low4), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), low4), eight);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + g * 32), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + g * 32 + 16), hi);
  }
}

// Where the kernel reads V of a block type (kv_cache.h "V tiles"), a block of 32 dims at a
// time: scales(pos) the f16 scales of the tile of [pos, pos + 16) (block b of slot i at
// b * 16 + i); values(pos, b, scratch) that tile's int8 values of block b, one run of 64
// bytes per pair of slots (value e of slot i at (i / 2) * 64 + e * 2 + i % 2), in place or
// (q4_0) widened into scratch (512 bytes). pos is a multiple of 16.
constexpr int kVBlockBytes = kKTileRows * 32;  // int8 values of one block of a V tile
struct Q8VTiles {
  static constexpr bool kBlocks = true;
  detail::KvRows r;
  int hd;
  const uint16_t* scales(int64_t pos) const {
    return reinterpret_cast<const uint16_t*>(r.row(pos));
  }
  const int8_t* values(int64_t pos, int b, int8_t* /*scratch*/) const {
    return reinterpret_cast<const int8_t*>(r.row(pos) + hd + b * kVBlockBytes);
  }
};
struct Q4VTiles : Q8VTiles {  // the same scales; values stored as nibbles
  const int8_t* values(int64_t pos, int b, int8_t* scratch) const {
    widen_nibble_runs(r.row(pos) + hd + b * kVBlockBytes / 2, kVBlockBytes / 32, scratch);
    return scratch;
  }
};

// K tiles as the score kernel reads them: load(d, v) is value d of the tile's slots
// [v * kLanes, (v + 1) * kLanes) as f32.
constexpr int kTileVecs = kKTileRows / VecF::kLanes;  // vectors across one tile's slots
struct F16KTile {
  static constexpr bool kBlocks = false;
  const uint16_t* t;  // (hd, 16) f16
  VecF load(int d, int v) const { return VecF::load_f16(t + d * kKTileRows + v * VecF::kLanes); }
};
struct F32KTile {
  static constexpr bool kBlocks = false;
  const float* t;  // (hd, 16) f32
  VecF load(int d, int v) const { return VecF::load(t + d * kKTileRows + v * VecF::kLanes); }
};

// A vector of kLanes int32 sums and the two operations the block kernels need: widen a run
// of int8 pairs (one pair per lane) to int16 and add the lanes' dot products with a pair of
// query values. Exact: a block's sum is at most 32 * 32767 * 128 < 2^31.
#if defined(__AVX512F__)
struct VecI {
  __m512i v;
  static VecI zero() { return {_mm512_setzero_si512()}; }
  static __m512i widen_pairs(const int8_t* p) {  // 16 pairs
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // v[i] += k[2i] * q[0] + k[2i + 1] * q[1]
  void add_pair_dots(__m512i k, const int16_t* q) {
    int32_t pair;
    __builtin_memcpy(&pair, q, 4);
    v = _mm512_dpwssd_epi32(v, k, _mm512_set1_epi32(pair));
  }
  VecI operator+(VecI o) const { return {_mm512_add_epi32(v, o.v)}; }
  VecF to_float() const { return {_mm512_cvtepi32_ps(v)}; }
  // x: (kLanes) integral values within int16 -> p (kLanes) int16.
  static void store_i16(VecF x, int16_t* p) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(x.v)));
  }
};
#else
struct VecI {
  __m256i v;
  static VecI zero() { return {_mm256_setzero_si256()}; }
  static __m256i widen_pairs(const int8_t* p) {  // 8 pairs
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  void add_pair_dots(__m256i k, const int16_t* q) {
    int32_t pair;
    __builtin_memcpy(&pair, q, 4);
    v = _mm256_add_epi32(v, _mm256_madd_epi16(k, _mm256_set1_epi32(pair)));
  }
  VecI operator+(VecI o) const { return {_mm256_add_epi32(v, o.v)}; }
  VecF to_float() const { return {_mm256_cvtepi32_ps(v)}; }
  static void store_i16(VecF x, int16_t* p) {
    const __m256i i = _mm256_cvtps_epi32(x.v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1)));
  }
};
#endif

// A K tile of a block type: scale(b, v) the f16 scales of block b for slots
// [v * kLanes, (v + 1) * kLanes), pairs(g, v) the same slots' int8 values of dims 2g, 2g + 1
// widened, one pair per lane (x = scale * int8).
struct Q8KTile {
  static constexpr bool kBlocks = true;
  const uint16_t* scales;  // (hd / 32, 16) f16
  const int8_t* values;    // (hd / 2, 16, 2)
  VecF scale(int b, int v) const {
    return VecF::load_f16(scales + b * kKTileRows + v * VecF::kLanes);
  }
  auto pairs(int g, int v) const {
    return VecI::widen_pairs(values + g * 2 * kKTileRows + v * 2 * VecF::kLanes);
  }
};

// Where the kernel reads K: tile(pos, scratch) is the tile of positions [pos, pos + 16), pos a
// multiple of 16, in place or (q4_0) with its values widened into scratch ((hd / 2, 16, 2)
// int8).
struct F16KTiles {
  detail::KvRows r;
  F16KTile tile(int64_t pos, int8_t* /*scratch*/) const {
    return {reinterpret_cast<const uint16_t*>(r.row(pos))};
  }
};
struct F32KTiles {
  detail::KvRows r;
  F32KTile tile(int64_t pos, int8_t* /*scratch*/) const {
    return {reinterpret_cast<const float*>(r.row(pos))};
  }
};
struct Q8KTiles {
  detail::KvRows r;
  int hd;
  Q8KTile tile(int64_t pos, int8_t* /*scratch*/) const {
    const uint8_t* t = r.row(pos);
    return {reinterpret_cast<const uint16_t*>(t), reinterpret_cast<const int8_t*>(t + hd)};
  }
};
struct Q4KTiles {
  detail::KvRows r;
  int hd;
  // 16 bytes per pair of dims: byte j holds place j (low nibble) and 16 + j (high) of the
  // pair's run; x = scale * (nibble - 8).
  Q8KTile tile(int64_t pos, int8_t* scratch) const {
    const uint8_t* t = r.row(pos);
    widen_nibble_runs(t + hd, hd / 2, scratch);  // after (hd / 32, 16) f16 scales: hd bytes
    return {reinterpret_cast<const uint16_t*>(t), scratch};
  }
};

// Independent sums per lane: enough multiply-adds in flight to cover their latency (AVX-512
// has twice the registers for them).
constexpr int kDotSplit = VecF::kLanes == 16 ? 2 : 1;

// part[j][v] = sum over d < hd of q_j[d] * k(d, v), lane by lane: kDotSplit sums of every
// kDotSplit-th d in order, then added.
template <int NB, typename Tile>
__attribute__((always_inline)) inline void tile_dot(const float* q, const Tile& k, int hd,
                                                    VecF (&part)[NB][kTileVecs]) {
  VecF acc[kDotSplit][NB][kTileVecs];
  for (auto& a : acc) {
    for (auto& row : a) {
      for (auto& x : row) x = VecF::zero();
    }
  }
  int d = 0;
  for (; d + kDotSplit <= hd; d += kDotSplit) {
    for (int s = 0; s < kDotSplit; ++s) {
      for (int v = 0; v < kTileVecs; ++v) {
        const VecF kv = k.load(d + s, v);
        for (int j = 0; j < NB; ++j) {
          acc[s][j][v] = fma(VecF::set1(q[j * hd + d + s]), kv, acc[s][j][v]);
        }
      }
    }
  }
  for (; d < hd; ++d) {
    for (int v = 0; v < kTileVecs; ++v) {
      const VecF kv = k.load(d, v);
      for (int j = 0; j < NB; ++j) acc[0][j][v] = fma(VecF::set1(q[j * hd + d]), kv, acc[0][j][v]);
    }
  }
  for (int j = 0; j < NB; ++j) {
    for (int v = 0; v < kTileVecs; ++v) {
      part[j][v] = acc[0][j][v];
      for (int s = 1; s < kDotSplit; ++s) part[j][v] = part[j][v] + acc[s][j][v];
    }
  }
}

// scores[j * score_stride + i] = scale * (q_j . k_i) for rows j < NB and the 16 positions i
// of a K tile. A lane's arithmetic involves only its own position and row, so a score does
// not depend on NB or on the tile's other positions: prefill equals decode, and paged
// caches equal contiguous ones.
template <int NB, typename Tile>
inline void score_tile(const float* q, const Tile& k, int hd, float scale, float* scores,
                       int score_stride) {
  VecF score[NB][kTileVecs];
  tile_dot<NB>(q, k, hd, score);
  const VecF vs = VecF::set1(scale);
  for (int j = 0; j < NB; ++j) {
    for (int v = 0; v < kTileVecs; ++v) {
      (score[j][v] * vs).store(scores + j * score_stride + v * VecF::kLanes);
    }
  }
}

// The query rows as the block kernels read them: q16 (NB, hd) each row rounded to int16 per
// block of 32 (detail::quantize_query_block); scale (NB, hd / 32) each block's scale times
// the attention scale.
struct QueryInts {
  const int16_t* q16;
  const float* scale;
};

inline QueryInts quantize_query(const float* q, int n_rows, int hd, float scale, int16_t* q16,
                                float* q_scale) {
  const int nb = hd / 32;
  for (int j = 0; j < n_rows; ++j) {
    for (int b = 0; b < nb; ++b) {
      const int at = j * hd + b * 32;
      q_scale[j * nb + b] = detail::quantize_query_block(q + at, q16 + at) * scale;
    }
  }
  return {q16, q_scale};
}

// score_tile for a K tile of a block type: per lane and block, the exact sum of int16 query
// by int8 K, then score = fma(float(sum), k_scale * q_scale, score) block after block.
template <int NB, typename Tile>
inline void score_tile(const QueryInts& q, const Tile& k, int hd, float* scores, int score_stride) {
  const int nb = hd / 32;
  VecF score[NB][kTileVecs];
  for (auto& row : score) {
    for (auto& x : row) x = VecF::zero();
  }
  for (int b = 0; b < nb; ++b) {
    VecI sum[kDotSplit][NB][kTileVecs];
    for (auto& part : sum) {
      for (auto& row : part) {
        for (auto& x : row) x = VecI::zero();
      }
    }
    // Unrolled: GCC otherwise copies every accumulator once per turn of the loop.
#pragma GCC unroll 16
    for (int g = b * 16; g < b * 16 + 16; g += kDotSplit) {  // pairs of dims of block b
      for (int s = 0; s < kDotSplit; ++s) {
        for (int v = 0; v < kTileVecs; ++v) {
          const auto kv = k.pairs(g + s, v);
          for (int j = 0; j < NB; ++j) sum[s][j][v].add_pair_dots(kv, q.q16 + j * hd + 2 * (g + s));
        }
      }
    }
    for (int v = 0; v < kTileVecs; ++v) {
      const VecF k_scale = k.scale(b, v);
      for (int j = 0; j < NB; ++j) {
        VecI total = sum[0][j][v];
        for (int s = 1; s < kDotSplit; ++s) total = total + sum[s][j][v];
        score[j][v] = fma(total.to_float(), k_scale * VecF::set1(q.scale[j * nb + b]), score[j][v]);
      }
    }
  }
  for (int j = 0; j < NB; ++j) {
    for (int v = 0; v < kTileVecs; ++v) {
      score[j][v].store(scores + j * score_stride + v * VecF::kLanes);
    }
  }
}

// acc[j][d] += sum over the chunk's positions p < n of w[j][p] * v_p[d], for V tiles of a
// block type (c0 a multiple of 16). Per row and block of 32 dims, the weights times the V
// rows' scales are rounded to int16 (nearest even, step: their largest magnitude in the
// chunk / 32767), and their sum of products with the int8 values, two positions per
// instruction, is exact (at most 128 * 32767 * 128 < 2^31); it is scaled once. A row's
// arithmetic involves only its own weights, so it does not depend on NB. Weights of
// positions >= n are ignored, as are the V bytes there (which may be anything).
template <int NB, typename VTiles>
inline void weigh_v_tiles(float (&w)[NB][kChunk], int n, int64_t c0, const VTiles& vs, int hd,
                          float (&acc)[NB][kMaxHeadDim]) {
  constexpr int kL = VecF::kLanes;
  constexpr int kPairs = kKTileRows / 2;  // pairs of positions in a tile
  const int n_tiles = (n + kKTileRows - 1) / kKTileRows;
  const int padded = n_tiles * kKTileRows;
  for (int j = 0; j < NB; ++j) {
    for (int i = n; i < padded; ++i) w[j][i] = 0.0f;
  }
  alignas(64) float scale[kChunk];      // (padded) V scales of one block, 0 past n
  alignas(64) int16_t w16[NB][kChunk];  // (NB, padded) weights times scales, rounded
  alignas(64) int8_t scratch[kChunk / kKTileRows][kVBlockBytes];  // q4_0 values widened
  const int8_t* values[kChunk / kKTileRows];                      // (n_tiles) of one block
  for (int b = 0; b < hd / 32; ++b) {
    for (int t = 0; t < n_tiles; ++t) {
      const uint16_t* sc = vs.scales(c0 + t * kKTileRows) + b * kKTileRows;
      for (int i = 0; i < kKTileRows; i += kL) {
        const int at = t * kKTileRows + i;
        VecF x = VecF::load_f16(sc + i);
        if (n - at < kL) x = x.keep_first(n - at > 0 ? n - at : 0);
        x.store(scale + at);
      }
      values[t] = vs.values(c0 + t * kKTileRows, b, scratch[t]);
    }
    float step[NB];
    for (int j = 0; j < NB; ++j) {
      VecF big = VecF::zero();
      for (int i = 0; i < padded; i += kL) {
        big = vmax(big, vabs(VecF::load(w[j] + i) * VecF::load(scale + i)));
      }
      const float m = reduce_max(big);
      const VecF inv = VecF::set1(m > 0.0f ? 32767.0f / m : 0.0f);
      step[j] = m / 32767.0f;
      for (int i = 0; i < padded; i += kL) {
        VecI::store_i16(round_nearest(VecF::load(w[j] + i) * VecF::load(scale + i) * inv),
                        w16[j] + i);
      }
    }
    // Two vectors of dims at a time: their sums for every row stay in registers.
    for (int v0 = 0; v0 < 32 / kL; v0 += 2) {
      VecI sum[NB][2];
      for (auto& row : sum) row[0] = row[1] = VecI::zero();
      for (int t = 0; t < n_tiles; ++t) {
#pragma GCC unroll 8  // as in score_tile
        for (int pr = 0; pr < kPairs; ++pr) {
          const int8_t* run = values[t] + pr * 64 + v0 * 2 * kL;
          const auto k0 = VecI::widen_pairs(run), k1 = VecI::widen_pairs(run + 2 * kL);
          for (int j = 0; j < NB; ++j) {
            const int16_t* pair = w16[j] + t * kKTileRows + 2 * pr;
            sum[j][0].add_pair_dots(k0, pair);
            sum[j][1].add_pair_dots(k1, pair);
          }
        }
      }
      for (int j = 0; j < NB; ++j) {
        for (int u = 0; u < 2; ++u) {
          float* a = acc[j] + b * 32 + (v0 + u) * kL;
          fma(sum[j][u].to_float(), VecF::set1(step[j]), VecF::load(a)).store(a);
        }
      }
    }
  }
}

// acc[j][d] += sum over the chunk's positions p < n of w[j][p] * v_p[d], for V rows of f16
// or f32, in order of p, four rows per pass over the accumulators.
template <int NB, typename VRows>
inline void weigh_v_rows(const float (&s)[NB][kChunk], int n, int64_t c0, const VRows& vs, int hd,
                         float (&acc)[NB][kMaxHeadDim]) {
  constexpr int kL = VecF::kLanes;
  const int full = hd / kL * kL;  // dims covered by whole vectors
  const int rest = hd - full;
  int p = 0;
  for (; p + 4 <= n; p += 4) {
    const auto vp = vs.rows(c0 + p);  // 4 rows
    // acc[j][d..] += s[j][p + i] * v_i[d..] for the 4 rows, in row order.
    for (int d = 0; d < full; d += kL) {
      const VecF v0 = vp.load(0, d), v1 = vp.load(1, d), v2 = vp.load(2, d), v3 = vp.load(3, d);
      for (int j = 0; j < NB; ++j) {
        VecF a = VecF::load(acc[j] + d);
        a = fma(VecF::set1(s[j][p]), v0, a);
        a = fma(VecF::set1(s[j][p + 1]), v1, a);
        a = fma(VecF::set1(s[j][p + 2]), v2, a);
        a = fma(VecF::set1(s[j][p + 3]), v3, a);
        a.store(acc[j] + d);
      }
    }
    if (rest != 0) {
      for (int i = 0; i < 4; ++i) {
        const VecF vv = vp.load_partial(i, full, rest);
        for (int j = 0; j < NB; ++j) {
          fma(VecF::set1(s[j][p + i]), vv, VecF::load_partial(acc[j] + full, rest))
              .store_partial(acc[j] + full, rest);
        }
      }
    }
  }
  for (; p < n; ++p) {
    const auto vp = vs.rows(c0 + p);  // 1 row
    for (int d = 0; d < full; d += kL) {
      const VecF vv = vp.load(0, d);
      for (int j = 0; j < NB; ++j) {
        fma(VecF::set1(s[j][p]), vv, VecF::load(acc[j] + d)).store(acc[j] + d);
      }
    }
    if (rest != 0) {
      const VecF vv = vp.load_partial(0, full, rest);
      for (int j = 0; j < NB; ++j) {
        fma(VecF::set1(s[j][p]), vv, VecF::load_partial(acc[j] + full, rest))
            .store_partial(acc[j] + full, rest);
      }
    }
  }
}

// q, out: (NB, hd) f32; row j attends to positions [0, row_len[j]) of the rows of ks, vs.
// Positions past a row's length but inside the block's longest get score -inf, hence
// weight exactly 0, and leave that row's sums bit-identical to a call without them.
template <int NB, typename KTiles, typename VRows>
void attend_block(const float* q, float* out, const int64_t* row_len, const KTiles& ks,
                  const VRows& vs, int hd, float scale) {
  constexpr int kL = VecF::kLanes;
  int64_t n_pos = 0;
  for (int j = 0; j < NB; ++j) n_pos = row_len[j] > n_pos ? row_len[j] : n_pos;
  const int full = hd / kL * kL;  // dims covered by whole vectors
  const int rest = hd - full;
  alignas(64) float s[NB][kChunk];         // (NB, kChunk) scores, then weights
  alignas(64) float acc[NB][kMaxHeadDim];  // (NB, hd) weighted V sum, unnormalised
  float run_max[NB];                       // running max score per row
  float run_sum[NB];                       // running sum of exp(score - run_max)
  alignas(64) int8_t k_scratch[kMaxHeadDim * kKTileRows];  // (hd, 16) widened K tile (q4_0)
  constexpr bool kIntK = decltype(ks.tile(0, k_scratch))::kBlocks;
  alignas(64) int16_t q16[kIntK ? NB * kMaxHeadDim : 1];  // (NB, hd) query rounded (block K)
  float q_scale[kIntK ? NB * kMaxHeadDim / 32 : 1];       // (NB, hd / 32) its block scales
  QueryInts q_ints{};
  if constexpr (kIntK) q_ints = quantize_query(q, NB, hd, scale, q16, q_scale);
  for (int j = 0; j < NB; ++j) {
    run_max[j] = -INFINITY;
    run_sum[j] = 0.0f;
    for (int d = 0; d < hd; ++d) acc[j][d] = 0.0f;
  }

  // The next chunk's K and V are asked into L2 while this one is computed (into L1 they
  // would evict the chunk at work). The hardware prefetcher alone falls behind: a paged
  // cache's blocks start a new run in memory where it starts over, and V tiles of a block
  // type are read a block of dims at a time across the chunk, a pattern it does not follow
  // (so the first chunk's V tiles are asked for too).
  for (int64_t c0 = 0; c0 < n_pos; c0 += kChunk) {
    const int n = n_pos - c0 < kChunk ? static_cast<int>(n_pos - c0) : kChunk;

    // Scores of whole K tiles: c0 and p are multiples of 16 and p + 16 <= kChunk; slots past
    // the cache's length (any bytes, even NaN) are overwritten with -inf just below.
    for (int p = 0; p < n; p += kKTileRows) {
      if (c0 + kChunk + p < n_pos) {
        prefetch_l2(ks.r.row(c0 + kChunk + p), kKTileRows * ks.r.row_bytes);
        prefetch_l2(vs.r.row(c0 + kChunk + p), kKTileRows * vs.r.row_bytes);
      }
      if constexpr (VRows::kBlocks) {
        if (c0 == 0) prefetch_l2(vs.r.row(p), kKTileRows * vs.r.row_bytes);
      }
      if constexpr (kIntK) {
        score_tile<NB>(q_ints, ks.tile(c0 + p, k_scratch), hd, &s[0][0] + p, kChunk);
      } else {
        score_tile<NB>(q, ks.tile(c0 + p, k_scratch), hd, scale, &s[0][0] + p, kChunk);
      }
    }
    for (int j = 0; j < NB; ++j) {
      for (int64_t i = row_len[j] - c0 < 0 ? 0 : row_len[j] - c0; i < n; ++i) s[j][i] = -INFINITY;
    }

    for (int j = 0; j < NB; ++j) {
      const float chunk_max = max_row(s[j], n);
      const float new_max = chunk_max > run_max[j] ? chunk_max : run_max[j];
      const float correction = __builtin_expf(run_max[j] - new_max);  // 0 on the first chunk
      // One explicit rounding: a * b + c left to the compiler may become a fused
      // multiply-add in one instantiation and not in another, and prefill would then
      // differ from decode in the last bit.
      run_sum[j] = std::fma(run_sum[j], correction, exp_shift_sum(s[j], n, new_max));
      run_max[j] = new_max;
      if (correction != 1.0f) scale_row(acc[j], hd, correction);
    }

    if constexpr (VRows::kBlocks) {
      weigh_v_tiles<NB>(s, n, c0, vs, hd, acc);
    } else {
      weigh_v_rows<NB>(s, n, c0, vs, hd, acc);
    }
  }

  for (int j = 0; j < NB; ++j) {
    const VecF inv = VecF::set1(1.0f / run_sum[j]);
    int d = 0;
    for (; d < full; d += kL) (VecF::load(acc[j] + d) * inv).store(out + j * hd + d);
    if (rest != 0)
      (VecF::load_partial(acc[j] + d, rest) * inv).store_partial(out + j * hd + d, rest);
  }
}

template <int NB, typename KTiles, typename VRows>
void attend_rows_upto(const float* q, float* out, int n_rows, const int64_t* row_len,
                      const KTiles& ks, const VRows& vs, int hd, float scale) {
  if constexpr (NB > 1) {
    if (n_rows < NB) return attend_rows_upto<NB - 1>(q, out, n_rows, row_len, ks, vs, hd, scale);
  }
  attend_block<NB>(q, out, row_len, ks, vs, hd, scale);
}

template <typename KTiles, typename VRows>
void attend_rows_typed(const float* q, float* out, int n_rows, const int64_t* row_len,
                       const KTiles& ks, const VRows& vs, int hd, float scale) {
  for (int r = 0; r < n_rows; r += kMaxRows) {
    const int rows = n_rows - r < kMaxRows ? n_rows - r : kMaxRows;
    attend_rows_upto<kMaxRows>(q + static_cast<int64_t>(r) * hd, out + static_cast<int64_t>(r) * hd,
                               rows, row_len + r, ks, vs, hd, scale);
  }
}

// Calls f with the tile source of K.
template <typename F>
void with_k_tiles(const detail::KvRows& r, int hd, F&& f) {
  switch (r.type) {
    case KvType::kF16:
      return f(F16KTiles{r});
    case KvType::kF32:
      return f(F32KTiles{r});
    case KvType::kQ8_0:
      return f(Q8KTiles{r, hd});
    case KvType::kQ4_0:
      return f(Q4KTiles{r, hd});
  }
}

// Calls f with the row source of V.
template <typename F>
void with_rows(const detail::KvRows& r, int hd, F&& f) {
  switch (r.type) {
    case KvType::kF16:
      return f(F16Rows{r, hd});
    case KvType::kF32:
      return f(F32Rows{r, hd});
    case KvType::kQ8_0:
      return f(Q8VTiles{r, hd});
    case KvType::kQ4_0:
      return f(Q4VTiles{{r, hd}});
  }
}

// q, out: (n_rows, hd) f32; row r attends to positions [0, row_len[r]) (>= 1) of k (K
// tiles) and v (rows); hd <= kMaxHeadDim.
inline void attend_rows_impl(const float* q, float* out, int n_rows, const int64_t* row_len,
                             const detail::KvRows& k, const detail::KvRows& v, int hd,
                             float scale) {
  with_k_tiles(k, hd, [&](const auto& ks) {
    with_rows(v, hd, [&](const auto& vs) {
      attend_rows_typed(q, out, n_rows, row_len, ks, vs, hd, scale);
    });
  });
}

}  // namespace
}  // namespace hearth::compute::simd
