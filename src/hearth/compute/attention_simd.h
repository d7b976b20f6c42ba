// The attention kernel written against simd::VecF; include only from simd_kernels.inc.
//
// One call handles the query rows of one kv head that share a causal length. Positions are
// taken in chunks: scores of a chunk for every row (each K row converted to f32 once and
// used by all rows), an online-softmax update (rescale the running sum and accumulator
// when the running max grows), then the weighted V rows, four positions per pass over the
// accumulator. K and V rows are read in place when f16, f32 or q8_0 (each vector converted as
// it is loaded); q4_0 rows are converted four at a time into a scratch tile first. Every
// conversion is exact, so the result equals the kernel over f32 rows holding the same values.
// Everything stays on the stack (under 40 KiB).
#pragma once

#include <cmath>
#include <type_traits>

#include "hearth/compute/activation_simd.h"
#include "hearth/compute/attention.h"
#include "hearth/compute/softmax_simd.h"

namespace hearth::compute::simd {
namespace {

constexpr int kChunk = 128;  // positions per online-softmax step: scores fit in L1
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

// scores[j * score_stride + i] = scale * (q_j . k_i) for rows j < NB and positions i < P.
// q: (NB, hd) f32; k: a view of P rows. A dot product's arithmetic does not depend on NB or
// P, so results are identical however heads and tokens are grouped.
template <int NB, int P, typename View>
inline void score_tile(const float* q, const View& k, int hd, float scale, float* scores,
                       int score_stride) {
  constexpr int kL = VecF::kLanes;
  constexpr int kN = NB * P;                 // dot products in the tile
  constexpr int kPadded = (kN + 3) / 4 * 4;  // reduce4 takes them four at a time
  const int full = hd / kL * kL;
  const int rest = hd - full;
  VecF dot[kPadded];
  for (int i = 0; i < kPadded; ++i) dot[i] = VecF::zero();
  if constexpr (std::is_same_v<View, Q8View>) {
    for (int b = 0; b < full; b += 32) {  // one scale per row and block
      VecF sc[P];
      for (int i = 0; i < P; ++i) sc[i] = k.scale(i, b);
      for (int d = b; d < b + 32; d += kL) {
        for (int i = 0; i < P; ++i) {
          const VecF kv = sc[i] * k.values(i, d);
          for (int j = 0; j < NB; ++j) {
            dot[j * P + i] = fma(VecF::load(q + j * hd + d), kv, dot[j * P + i]);
          }
        }
      }
    }
  } else {
    for (int d = 0; d < full; d += kL) {
      for (int i = 0; i < P; ++i) {
        const VecF kv = k.load(i, d);
        for (int j = 0; j < NB; ++j) {
          dot[j * P + i] = fma(VecF::load(q + j * hd + d), kv, dot[j * P + i]);
        }
      }
    }
  }
  if (rest != 0) {
    for (int i = 0; i < P; ++i) {
      const VecF kv = k.load_partial(i, full, rest);
      for (int j = 0; j < NB; ++j) {
        dot[j * P + i] = fma(VecF::load_partial(q + j * hd + full, rest), kv, dot[j * P + i]);
      }
    }
  }
  alignas(16) float sums[kPadded];
  for (int g = 0; g < kPadded; g += 4) {
    _mm_store_ps(sums + g, reduce4(dot[g], dot[g + 1], dot[g + 2], dot[g + 3]));
  }
  for (int j = 0; j < NB; ++j) {
    for (int i = 0; i < P; ++i) scores[j * score_stride + i] = sums[j * P + i] * scale;
  }
}

// q, out: (NB, hd) f32; row j attends to positions [0, row_len[j]) of the rows of ks, vs.
// Positions past a row's length but inside the block's longest get score -inf, hence
// weight exactly 0, and leave that row's sums bit-identical to a call without them.
template <int NB, typename KRows, typename VRows>
void attend_block(const float* q, float* out, const int64_t* row_len, const KRows& ks,
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
  alignas(64) float tile[4 * kMaxHeadDim];  // (4, hd) converted K or V rows (block types)
  for (int j = 0; j < NB; ++j) {
    run_max[j] = -INFINITY;
    run_sum[j] = 0.0f;
    for (int d = 0; d < hd; ++d) acc[j][d] = 0.0f;
  }

  for (int64_t c0 = 0; c0 < n_pos; c0 += kChunk) {
    const int n = n_pos - c0 < kChunk ? static_cast<int>(n_pos - c0) : kChunk;

    // Scores in tiles of NB rows x kTileP positions, so that a tile holds four dot
    // products (when NB allows) for reduce4 to sum together.
    constexpr int kTileP = NB >= 3 ? 1 : 4 / NB;
    int p = 0;
    for (; p + kTileP <= n; p += kTileP) {
      score_tile<NB, kTileP>(q, ks.rows(c0 + p, kTileP, tile), hd, scale, &s[0][0] + p, kChunk);
    }
    for (; p < n; ++p) {
      score_tile<NB, 1>(q, ks.rows(c0 + p, 1, tile), hd, scale, &s[0][0] + p, kChunk);
    }
    for (int j = 0; j < NB; ++j) {
      for (int64_t i = row_len[j] - c0 < 0 ? 0 : row_len[j] - c0; i < n; ++i) s[j][i] = -INFINITY;
    }

    for (int j = 0; j < NB; ++j) {
      const float chunk_max = max_row(s[j], n);
      const float new_max = chunk_max > run_max[j] ? chunk_max : run_max[j];
      const float correction = __builtin_expf(run_max[j] - new_max);  // 0 on the first chunk
      run_sum[j] = run_sum[j] * correction + exp_shift_sum(s[j], n, new_max);
      run_max[j] = new_max;
      if (correction != 1.0f) scale_row(acc[j], hd, correction);
    }

    for (p = 0; p + 4 <= n; p += 4) {
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

template <int NB, typename KRows, typename VRows>
void attend_rows_upto(const float* q, float* out, int n_rows, const int64_t* row_len,
                      const KRows& ks, const VRows& vs, int hd, float scale) {
  if constexpr (NB > 1) {
    if (n_rows < NB) return attend_rows_upto<NB - 1>(q, out, n_rows, row_len, ks, vs, hd, scale);
  }
  attend_block<NB>(q, out, row_len, ks, vs, hd, scale);
}

template <typename KRows, typename VRows>
void attend_rows_typed(const float* q, float* out, int n_rows, const int64_t* row_len,
                       const KRows& ks, const VRows& vs, int hd, float scale) {
  for (int r = 0; r < n_rows; r += kMaxRows) {
    const int rows = n_rows - r < kMaxRows ? n_rows - r : kMaxRows;
    attend_rows_upto<kMaxRows>(q + static_cast<int64_t>(r) * hd, out + static_cast<int64_t>(r) * hd,
                               rows, row_len + r, ks, vs, hd, scale);
  }
}

// Calls f with the row source of one cache part.
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

// q, out: (n_rows, hd) f32; row r attends to positions [0, row_len[r]) (>= 1) of k, v:
// (*, hd) rows of their types; hd <= kMaxHeadDim.
inline void attend_rows_impl(const float* q, float* out, int n_rows, const int64_t* row_len,
                             const detail::KvRows& k, const detail::KvRows& v, int hd,
                             float scale) {
  with_rows(k, hd, [&](const auto& ks) {
    with_rows(v, hd, [&](const auto& vs) {
      attend_rows_typed(q, out, n_rows, row_len, ks, vs, hd, scale);
    });
  });
}

}  // namespace
}  // namespace hearth::compute::simd
