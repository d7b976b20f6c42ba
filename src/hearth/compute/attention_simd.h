// The attention kernel written against simd::VecF; include only from simd_kernels.inc.
//
// One call handles the query rows of one kv head that share a causal length. Positions are
// taken in chunks: scores of a chunk for every row, an online-softmax update (rescale the
// running sum and accumulator when the running max grows), then the weighted V rows, four
// positions per pass over the accumulator. K is read as tiles of 16 positions held
// transposed (kv_cache.h "K tiles"): a score vector has one position per lane, so a K value
// converted once serves every row with one multiply-add and no sum across lanes is needed.
// K tiles of a block type are multiplied in integers (int16 query by int8 K, pairs of dims
// per instruction; detail::quantize_query_block), and each block's exact sum scaled once. V
// rows are read in place when f16, f32 or q8_0 (each vector converted as it is loaded); q4_0
// rows are converted four at a time into a scratch tile first, and q4_0 K tiles into int8.
// Every conversion is exact. Everything stays on the stack (under 48 KiB).
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
// Q8_0 rows in place (34-byte blocks: f16 scale d, 32 int8 q; x = d * q). kLanes divides 32,
// so a vector never straddles two blocks, and head_dim is a multiple of 32, so no partial
// vector is ever asked for.
struct Q8View {
  const uint8_t* p;
  int64_t row_bytes;
  VecF load(int i, int d) const { return scale(i, d) * values(i, d); }
  // The scale of the block holding element d, and the block's int8 values from d on: the
  // kernels take the scale once per block.
  VecF scale(int i, int d) const {
    uint16_t d16;
    __builtin_memcpy(&d16, p + i * row_bytes + (d >> 5) * 34, 2);
    return VecF::set1(_cvtsh_ss(d16));
  }
  VecF values(int i, int d) const {
    return VecF::load_i8(
        reinterpret_cast<const int8_t*>(p + i * row_bytes + (d >> 5) * 34 + 2 + (d & 31)));
  }
  VecF load_partial(int /*i*/, int /*d*/, int /*n*/) const { return VecF::zero(); }
};

// Where a kernel reads rows of K or V: rows(pos, n, scratch) is a view of n consecutive rows
// from position pos, in place or (q4_0) converted into scratch (n * hd floats). The kernels
// ask for n <= 4 rows at a multiple of n, which never straddle two blocks of the cache.
struct F16Rows {
  detail::KvRows r;
  int hd;
  F16View rows(int64_t pos, int /*n*/, float* /*scratch*/) const {
    return {reinterpret_cast<const uint16_t*>(r.row(pos)), hd};
  }
};
struct F32Rows {
  detail::KvRows r;
  int hd;
  F32View rows(int64_t pos, int /*n*/, float* /*scratch*/) const {
    return {reinterpret_cast<const float*>(r.row(pos)), hd};
  }
};
struct Q8Rows {
  detail::KvRows r;
  Q8View rows(int64_t pos, int /*n*/, float* /*scratch*/) const {
    return {r.row(pos), r.row_bytes};
  }
};

// Q4_0 block: f16 scale, 16 bytes; value i < 16 is the low nibble of byte i, value 16 + i
// its high nibble; x = d * (nibble - 8).
inline void q4_0_row_to_float(const uint8_t* row, int hd, float* dst) {
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int b = 0; b < hd / 32; ++b, row += 18, dst += 32) {
    uint16_t d16;
    __builtin_memcpy(&d16, row, 2);
    const VecF d = VecF::set1(_cvtsh_ss(d16));
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2));
    alignas(16) int8_t q[32];
    _mm_store_si128(reinterpret_cast<__m128i*>(q),
                    _mm_sub_epi8(_mm_and_si128(packed, low4), eight));
    _mm_store_si128(reinterpret_cast<__m128i*>(q + 16),
                    _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), eight));
    for (int i = 0; i < 32; i += VecF::kLanes) (d * VecF::load_i8(q + i)).store(dst + i);
  }
}

struct Q4Rows {
  detail::KvRows r;
  int hd;
  F32View rows(int64_t pos, int n, float* scratch) const {
    for (int i = 0; i < n; ++i) q4_0_row_to_float(r.row(pos + i), hd, scratch + i * hd);
    return {scratch, hd};
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
    const uint8_t* nibbles = t + hd;  // after (hd / 32, 16) f16 scales: hd bytes
    const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    for (int g = 0; g < hd / 2; ++g) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibbles + g * 16));
      const __m128i lo = _mm_sub_epi8(_mm_and_si128(x, low4), eight);
      const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), low4), eight);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(scratch + g * 32), lo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(scratch + g * 32 + 16), hi);
    }
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
  alignas(64) float tile[4 * kMaxHeadDim];                 // (4, hd) converted V rows (q4_0)
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

  // Blocks of at most a chunk (a paged cache's): each chunk's K and V start a new run in
  // memory, where the hardware prefetcher starts over, so the next chunk is asked into L2
  // while this one is computed.
  const bool next_block_ahead = (int64_t{1} << ks.r.block_shift) <= kChunk;
  for (int64_t c0 = 0; c0 < n_pos; c0 += kChunk) {
    const int n = n_pos - c0 < kChunk ? static_cast<int>(n_pos - c0) : kChunk;

    // Scores of whole K tiles: c0 and p are multiples of 16 and p + 16 <= kChunk; slots past
    // the cache's length (any bytes, even NaN) are overwritten with -inf just below.
    const bool prefetch = next_block_ahead && c0 + kChunk < n_pos;
    for (int p = 0; p < n; p += kKTileRows) {
      if (prefetch && c0 + kChunk + p < n_pos) {
        prefetch_l2(ks.r.row(c0 + kChunk + p), kKTileRows * ks.r.row_bytes);
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

    int p = 0;
    for (; p + 4 <= n; p += 4) {
      if (prefetch && c0 + kChunk + p < n_pos) {
        prefetch_l2(vs.r.row(c0 + kChunk + p), 4 * vs.r.row_bytes);
      }
      const auto vp = vs.rows(c0 + p, 4, tile);  // 4 rows
      // acc[j][d..] += s[j][p + i] * v_i[d..] for the 4 rows, in row order.
      auto accumulate4 = [&](int d, VecF v0, VecF v1, VecF v2, VecF v3) {
        for (int j = 0; j < NB; ++j) {
          VecF a = VecF::load(acc[j] + d);
          a = fma(VecF::set1(s[j][p]), v0, a);
          a = fma(VecF::set1(s[j][p + 1]), v1, a);
          a = fma(VecF::set1(s[j][p + 2]), v2, a);
          a = fma(VecF::set1(s[j][p + 3]), v3, a);
          a.store(acc[j] + d);
        }
      };
      if constexpr (std::is_same_v<std::decay_t<decltype(vp)>, Q8View>) {
        for (int b = 0; b < full; b += 32) {  // one scale per row and block
          const VecF s0 = vp.scale(0, b), s1 = vp.scale(1, b);
          const VecF s2 = vp.scale(2, b), s3 = vp.scale(3, b);
          for (int d = b; d < b + 32; d += kL) {
            accumulate4(d, s0 * vp.values(0, d), s1 * vp.values(1, d), s2 * vp.values(2, d),
                        s3 * vp.values(3, d));
          }
        }
      } else {
        for (int d = 0; d < full; d += kL) {
          accumulate4(d, vp.load(0, d), vp.load(1, d), vp.load(2, d), vp.load(3, d));
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
      const auto vp = vs.rows(c0 + p, 1, tile);  // 1 row
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
      return f(Q8Rows{r});
    case KvType::kQ4_0:
      return f(Q4Rows{r, hd});
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
