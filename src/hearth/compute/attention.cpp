#include "hearth/compute/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "hearth/base/error.h"
#include "hearth/base/half.h"

namespace hearth::compute {

namespace {

float effective_scale(const AttentionShape& shape) {
  return shape.scale != 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
}

void validate(const AttentionShape& shape, const KvLayerView& kv, int64_t q_stride,
              int64_t out_stride, int64_t pos0, int64_t n_tokens, int h_begin, int h_end) {
  if (shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.n_heads % shape.n_kv_heads != 0) {
    throw UsageError(fmt::format(
        "attention: n_heads {} must be a positive multiple of n_kv_heads {} (head_dim {})",
        shape.n_heads, shape.n_kv_heads, shape.head_dim));
  }
  if (kv.n_kv_heads != shape.n_kv_heads || kv.head_dim != shape.head_dim) {
    throw UsageError(
        fmt::format("attention: cache has {} kv heads of dim {}, the layer expects {} of dim {}",
                    kv.n_kv_heads, kv.head_dim, shape.n_kv_heads, shape.head_dim));
  }
  if (!kv_type_fits(kv.k_type, kv.head_dim) || !kv_type_fits(kv.v_type, kv.head_dim) ||
      kv.k_row_bytes != static_cast<int64_t>(kv_row_bytes(kv.k_type, kv.head_dim)) ||
      kv.v_row_bytes != static_cast<int64_t>(kv_row_bytes(kv.v_type, kv.head_dim))) {
    throw UsageError(fmt::format("attention: cache rows of {} / {} do not match head_dim {}",
                                 kv_type_name(kv.k_type), kv_type_name(kv.v_type), kv.head_dim));
  }
  if (kv.blocks == nullptr || kv.n_pos < 0 || kv.n_pos > kv.n_ctx || kv.block_shift < 4 ||
      kv.block_shift > 62) {
    throw UsageError(
        fmt::format("attention: invalid cache view ({} positions of {})", kv.n_pos, kv.n_ctx));
  }
  const int64_t row = static_cast<int64_t>(shape.n_heads) * shape.head_dim;
  if (q_stride < row || out_stride < row) {
    throw UsageError(fmt::format("attention: q_stride {} / out_stride {} < n_heads * head_dim {}",
                                 q_stride, out_stride, row));
  }
  if (h_begin < 0 || h_end < h_begin || h_end > shape.n_heads) {
    throw UsageError(fmt::format("attention: head range [{}, {}) outside [0, {})", h_begin, h_end,
                                 shape.n_heads));
  }
  if (pos0 < 0 || n_tokens < 0 || pos0 > kv.n_pos || n_tokens > kv.n_pos - pos0) {
    throw UsageError(
        fmt::format("attention: tokens at positions [{}, {}) but the cache holds {} positions "
                    "(store K/V of the block before attending)",
                    pos0, pos0 + n_tokens, kv.n_pos));
  }
}

// Kv head `kvh`'s rows of K (or V) in the view.
detail::KvRows head_rows(const KvLayerView& kv, int kvh, bool v) {
  const int64_t row_bytes = v ? kv.v_row_bytes : kv.k_row_bytes;
  return {kv.blocks, (v ? kv.v_offset : kv.k_offset) + kvh * kv.head_rows * row_bytes,
          kv.block_shift, row_bytes, v ? kv.v_type : kv.k_type};
}

// f16 -> f32 without branches per element, so the loop vectorizes on any baseline CPU:
// placing the 15 exponent+mantissa bits at the top of a float's and multiplying by 2^112
// rebiases the exponent (15 -> 127) exactly, subnormal halves included; exponent 31
// (inf, NaN) is patched separately. Bit-identical to hearth::half_to_float.
void half_row_to_float(const uint16_t* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) {
    const uint32_t h = src[i];
    const uint32_t magnitude = h & 0x7fffu;
    float f = bits_float(magnitude << 13) * 0x1p112f;
    if (magnitude >= 0x7c00u) f = bits_float(0x7f800000u | (magnitude & 0x3ffu) << 13);
    dst[i] = bits_float(float_bits(f) | (h & 0x8000u) << 16);
  }
}

// Reads V rows as f32: f16 and f32 rows in place, the block types' out of their V tiles.
struct RowReader {
  RowReader(const detail::KvRows& r, int hd)
      : rows(r),
        f16(r.type == KvType::kF16),
        tiled(r.type == KvType::kQ8_0 || r.type == KvType::kQ4_0),
        convert(f16 ? nullptr : kv_row_converter(r.type)),
        hd(hd),
        gathered(static_cast<size_t>(r.row_bytes)) {}
  // Row pos -> dst (hd).
  void get(int64_t pos, float* dst) {
    if (tiled) {
      v_tile_get(rows.type, hd, rows.row(pos & ~int64_t{kKTileRows - 1}),
                 static_cast<int>(pos & (kKTileRows - 1)), gathered.data());
      return convert(gathered.data(), dst, hd);
    }
    const uint8_t* row = rows.row(pos);
    if (f16) return half_row_to_float(reinterpret_cast<const uint16_t*>(row), dst, hd);
    convert(row, dst, hd);
  }
  detail::KvRows rows;
  bool f16;
  bool tiled;  // q8_0, q4_0: rows gathered from V tiles
  KvRowToFloat convert;
  int hd;
  std::vector<uint8_t> gathered;  // (row_bytes) one row in its GGUF layout
};

// Reads K tiles transposed as stored (value d of slot i at d * 16 + i): f16 and f32 as f32,
// the block types as their int8 values and f32 scales (block b of slot i at b * 16 + i).
struct KTileReader {
  KTileReader(const detail::KvRows& r, int hd)
      : rows(r),
        blocks(r.type == KvType::kQ8_0 || r.type == KvType::kQ4_0),
        hd(hd),
        gathered(static_cast<size_t>(r.row_bytes)) {}
  // The tile of positions [pos, pos + 16), pos a multiple of 16 -> dst (hd * 16), f16/f32.
  void get(int64_t pos, float* dst) const {
    const uint8_t* tile = rows.row(pos);
    if (rows.type == KvType::kF16) {  // elementwise, so the transposed order carries over
      return half_row_to_float(reinterpret_cast<const uint16_t*>(tile), dst, hd * kKTileRows);
    }
    std::memcpy(dst, tile, sizeof(float) * hd * kKTileRows);
  }
  // The same tile of a block type -> values (hd * 16), scales (hd / 32 * 16).
  void get_blocks(int64_t pos, int8_t* values, float* scales) {
    const uint8_t* tile = rows.row(pos);
    const bool q8 = rows.type == KvType::kQ8_0;
    const int block_bytes = q8 ? 34 : 18;
    for (int i = 0; i < kKTileRows; ++i) {  // each slot back to a row in its GGUF layout
      k_tile_get(rows.type, hd, tile, i, gathered.data());
      for (int b = 0; b < hd / 32; ++b) {
        const uint8_t* block = gathered.data() + b * block_bytes;
        uint16_t d16;
        std::memcpy(&d16, block, 2);
        scales[b * kKTileRows + i] = half_to_float(d16);
        for (int e = 0; e < 32; ++e) {
          const int x = q8 ? static_cast<int8_t>(block[2 + e])
                           : (e < 16 ? block[2 + e] & 0x0f : block[2 + e - 16] >> 4) - 8;
          values[(b * 32 + e) * kKTileRows + i] = static_cast<int8_t>(x);
        }
      }
    }
  }
  detail::KvRows rows;
  bool blocks;  // q8_0, q4_0: read with get_blocks
  int hd;
  std::vector<uint8_t> gathered;  // (row_bytes) one slot as a row in its GGUF layout
};

// The Isa::kScalar kernel (CPUs without the x86 variants, e.g. ARM until NEON variants
// exist): the chunked online softmax of attention_simd.h in plain loops, each K tile and V
// row converted to float once for the whole group of query rows. Same contract as
// detail::attend_rows_avx2; hd <= kAttentionMaxHeadDim.
void attend_rows_portable(const float* q, float* out, int n_rows, const int64_t* row_len,
                          const detail::KvRows& k, const detail::KvRows& v, int hd, float scale) {
  constexpr int kRows = 8;
  constexpr int kChunk = 128;
  constexpr int kMaxHd = detail::kAttentionMaxHeadDim;
  KTileReader k_tiles(k, hd);
  RowReader v_rows(v, hd);
  const int n_blocks = hd / 32;                                     // of a block type
  std::vector<float> k_tile(static_cast<size_t>(hd) * kKTileRows);  // (hd, 16) one K tile
  std::vector<int8_t> k_ints(static_cast<size_t>(hd) * kKTileRows);         // (hd, 16) block types
  std::vector<float> k_scales(static_cast<size_t>(n_blocks) * kKTileRows);  // (n_blocks, 16)
  std::vector<int16_t> q16(static_cast<size_t>(kRows) * hd);          // (rows, hd) block types
  std::vector<float> q_scale(static_cast<size_t>(kRows) * n_blocks);  // (rows, n_blocks)
  for (int r0 = 0; r0 < n_rows; r0 += kRows) {
    const int nb = std::min(kRows, n_rows - r0);
    const int64_t* len = row_len + r0;                       // (nb)
    const int64_t n_pos = *std::max_element(len, len + nb);  // longest row of the block
    const float* qb = q + static_cast<int64_t>(r0) * hd;     // (nb, hd)
    float* ob = out + static_cast<int64_t>(r0) * hd;         // (nb, hd)
    float row[kMaxHd];                                       // (hd) one V row as f32
    float s[kRows][kChunk];                                  // (nb, chunk) scores, then weights
    float acc[kRows][kMaxHd];                                // (nb, hd) unnormalised weighted V sum
    float run_max[kRows];
    float run_sum[kRows];
    for (int j = 0; j < nb; ++j) {
      run_max[j] = -INFINITY;
      run_sum[j] = 0.0f;
      std::fill(acc[j], acc[j] + hd, 0.0f);
      for (int b = 0; k_tiles.blocks && b < n_blocks; ++b) {
        const int at = j * hd + b * 32;
        q_scale[j * n_blocks + b] = detail::quantize_query_block(qb + at, &q16[at]) * scale;
      }
    }
    for (int64_t c0 = 0; c0 < n_pos; c0 += kChunk) {
      const int n = static_cast<int>(std::min<int64_t>(kChunk, n_pos - c0));
      for (int p = 0; p < n; p += kKTileRows) {  // c0 and p are multiples of 16
        float dot[kRows][kKTileRows] = {};       // one position per slot, scaled
        if (k_tiles.blocks) {
          // The integer sums of attention_simd.h's block kernel, then the same float steps.
          k_tiles.get_blocks(c0 + p, k_ints.data(), k_scales.data());
          for (int j = 0; j < nb; ++j) {
            for (int i = 0; i < kKTileRows; ++i) {
              float acc = 0.0f;
              for (int b = 0; b < n_blocks; ++b) {
                int32_t sum = 0;
                for (int d = b * 32; d < b * 32 + 32; ++d) {
                  sum += int32_t{q16[j * hd + d]} * k_ints[d * kKTileRows + i];
                }
                const float m = k_scales[b * kKTileRows + i] * q_scale[j * n_blocks + b];
                acc = std::fma(static_cast<float>(sum), m, acc);
              }
              dot[j][i] = acc;
            }
          }
        } else {
          k_tiles.get(c0 + p, k_tile.data());
          for (int j = 0; j < nb; ++j) {
            const float* qj = qb + j * hd;
            for (int d = 0; d < hd; ++d) {  // each slot summed in order of d
              for (int i = 0; i < kKTileRows; ++i) dot[j][i] += qj[d] * k_tile[d * kKTileRows + i];
            }
            for (float& x : dot[j]) x *= scale;
          }
        }
        // Past the row's causal length (or the cache's, where the tile holds any bytes):
        // weight exactly 0 (see attention_simd.h).
        for (int j = 0; j < nb; ++j) {
          for (int i = 0; i < kKTileRows && p + i < n; ++i) {
            s[j][p + i] = c0 + p + i < len[j] ? dot[j][i] : -INFINITY;
          }
        }
      }
      for (int j = 0; j < nb; ++j) {
        const float new_max = std::max(run_max[j], *std::max_element(s[j], s[j] + n));
        const float correction = std::exp(run_max[j] - new_max);  // 0 on the first chunk
        float sum = 0.0f;
        for (int p = 0; p < n; ++p) sum += (s[j][p] = std::exp(s[j][p] - new_max));
        run_sum[j] = run_sum[j] * correction + sum;
        run_max[j] = new_max;
        if (correction != 1.0f) {
          for (int d = 0; d < hd; ++d) acc[j][d] *= correction;
        }
      }
      for (int p = 0; p < n; ++p) {
        v_rows.get(c0 + p, row);
        for (int j = 0; j < nb; ++j) {
          const float w = s[j][p];
          for (int d = 0; d < hd; ++d) acc[j][d] += w * row[d];
        }
      }
    }
    for (int j = 0; j < nb; ++j) {
      const float inv = 1.0f / run_sum[j];
      for (int d = 0; d < hd; ++d) ob[j * hd + d] = acc[j][d] * inv;
    }
  }
}

}  // namespace

float detail::quantize_query_block(const float* x, int16_t* q) {
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < 32; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  if (!finite || amax == 0.0f) {
    std::fill(q, q + 32, int16_t{0});
    return finite ? 0.0f : NAN;
  }
  const float inv = 32767.0f / amax;  // |x[i] * inv| <= 32767 after rounding
  // Adding and taking away 1.5 * 2^23 rounds a float of magnitude below 2^22 to an integer,
  // nearest even, in two plain additions (std::nearbyint is a library call on baseline x86).
  constexpr float kRound = 0x1.8p23f;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int16_t>((x[i] * inv + kRound) - kRound);
  return amax / 32767.0f;
}

HeadRange attention_split(const AttentionShape& shape, int n_parts, int part) {
  if (n_parts <= 0 || part < 0 || part >= n_parts || shape.n_kv_heads <= 0 ||
      shape.n_heads % shape.n_kv_heads != 0) {
    throw UsageError(fmt::format("attention_split: part {} of {} for {} heads / {} kv heads", part,
                                 n_parts, shape.n_heads, shape.n_kv_heads));
  }
  auto cut = [&](int n, int i) { return static_cast<int>(static_cast<int64_t>(n) * i / n_parts); };
  if (n_parts <= shape.n_kv_heads) {
    const int group = shape.n_heads / shape.n_kv_heads;
    return {cut(shape.n_kv_heads, part) * group, cut(shape.n_kv_heads, part + 1) * group};
  }
  return {cut(shape.n_heads, part), cut(shape.n_heads, part + 1)};
}

void ref::attention(const AttentionShape& shape, const KvLayerView& kv, const float* q,
                    int64_t q_stride, float* out, int64_t out_stride, int64_t pos0,
                    int64_t n_tokens, int h_begin, int h_end) {
  const int group = shape.n_heads / shape.n_kv_heads;
  const int hd = shape.head_dim;
  const double scale = effective_scale(shape);
  std::vector<double> w;    // (n_pos) f64 softmax weights
  std::vector<double> acc;  // (head_dim) f64
  std::vector<float> row(hd);  // (head_dim) one K or V row as f32
  std::vector<uint8_t> k_row(static_cast<size_t>(kv.k_row_bytes));  // one K row, GGUF layout
  std::vector<uint8_t> v_row(static_cast<size_t>(kv.v_row_bytes));  // one V row, GGUF layout
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t n_pos = pos0 + t + 1;  // causal: positions [0, pos0 + t]
    w.resize(n_pos);
    acc.resize(hd);
    for (int h = h_begin; h < h_end; ++h) {
      const int kvh = h / group;
      const float* qh = q + t * q_stride + static_cast<int64_t>(h) * hd;  // (head_dim)
      double max = -INFINITY;
      for (int64_t p = 0; p < n_pos; ++p) {
        kv.copy_k_row(kvh, p, k_row.data());
        kv_row_to_float(kv.k_type, k_row.data(), hd, row.data());
        double dot = 0.0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(qh[d]) * row[d];
        w[p] = dot * scale;
        max = std::max(max, w[p]);
      }
      double sum = 0.0;
      for (int64_t p = 0; p < n_pos; ++p) {
        w[p] = std::exp(w[p] - max);
        sum += w[p];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t p = 0; p < n_pos; ++p) {
        kv.copy_v_row(kvh, p, v_row.data());
        kv_row_to_float(kv.v_type, v_row.data(), hd, row.data());
        for (int d = 0; d < hd; ++d) acc[d] += w[p] * row[d];
      }
      float* oh = out + t * out_stride + static_cast<int64_t>(h) * hd;  // (head_dim)
      for (int d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[d] / sum);
    }
  }
}

void attention(const AttentionShape& shape, const KvLayerView& kv, const float* q, int64_t q_stride,
               float* out, int64_t out_stride, int64_t pos0, int64_t n_tokens, int h_begin,
               int h_end, Isa isa) {
  const int64_t row = static_cast<int64_t>(shape.n_heads) * shape.head_dim;
  if (q_stride == 0) q_stride = row;
  if (out_stride == 0) out_stride = row;
  validate(shape, kv, q_stride, out_stride, pos0, n_tokens, h_begin, h_end);

  using Kernel = void (*)(const float*, float*, int, const int64_t*, const detail::KvRows&,
                          const detail::KvRows&, int, float);
  Kernel kernel = &attend_rows_portable;
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) kernel = &detail::attend_rows_avx512;
  if (isa == Isa::kAvx2) kernel = &detail::attend_rows_avx2;
#endif
  (void)isa;
  if (shape.head_dim > detail::kAttentionMaxHeadDim) {
    return ref::attention(shape, kv, q, q_stride, out, out_stride, pos0, n_tokens, h_begin, h_end);
  }
  const int group = shape.n_heads / shape.n_kv_heads;
  const int hd = shape.head_dim;
  const float scale = effective_scale(shape);
  // Rows handed to one kernel call: the query heads of one kv head for a tile of
  // consecutive tokens, so every K/V row the kernel loads serves up to kTileRows queries
  // (in prefill several tokens share it, not only the GQA group).
  constexpr int kTileRows = 16;
  alignas(64) float q_tile[kTileRows * detail::kAttentionMaxHeadDim];    // (rows, hd) f32
  alignas(64) float out_tile[kTileRows * detail::kAttentionMaxHeadDim];  // (rows, hd) f32
  int64_t row_len[kTileRows];                                            // (rows)
  // The part of a group inside [h_begin, h_end) is one run of adjacent heads.
  for (int h = h_begin; h < h_end;) {
    const int kvh = h / group;
    const int heads = std::min(h_end, (kvh + 1) * group) - h;
    const int64_t tile_tokens = std::max(1, kTileRows / heads);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += tile_tokens) {
      const int64_t tokens = std::min(tile_tokens, n_tokens - t0);
      for (int start = 0; start < heads; start += kTileRows) {  // groups wider than a tile
        const int tile_heads = std::min(kTileRows, heads - start);
        int rows = 0;
        for (int64_t t = t0; t < t0 + tokens; ++t) {
          for (int i = 0; i < tile_heads; ++i, ++rows) {
            const float* src = q + t * q_stride + static_cast<int64_t>(h + start + i) * hd;
            std::copy(src, src + hd, q_tile + rows * hd);
            row_len[rows] = pos0 + t + 1;  // causal: positions [0, pos0 + t]
          }
        }
        kernel(q_tile, out_tile, rows, row_len, head_rows(kv, kvh, false), head_rows(kv, kvh, true),
               hd, scale);
        rows = 0;
        for (int64_t t = t0; t < t0 + tokens; ++t) {
          for (int i = 0; i < tile_heads; ++i, ++rows) {
            float* dst = out + t * out_stride + static_cast<int64_t>(h + start + i) * hd;
            std::copy(out_tile + rows * hd, out_tile + (rows + 1) * hd, dst);
          }
        }
      }
    }
    h += heads;
  }
}

void attention(const AttentionShape& shape, const KvLayerView& kv, const float* q, float* out,
               int64_t pos0, int64_t n_tokens, Isa isa) {
  attention(shape, kv, q, 0, out, 0, pos0, n_tokens, 0, shape.n_heads, isa);
}

}  // namespace hearth::compute
