// Q6_K row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout and float sequence in rows16_kernels.h).
#include <cmath>
#include <cstring>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace rows16_q6_k {
namespace {

constexpr size_t kScaleOff = 3072;  // (16, 16) group scales
constexpr uint32_t k03 = 0x03030303u, k0C = 0x0c0c0c0cu, k0F = 0x0f0f0f0fu, k30 = 0x30303030u,
                   k3F = 0x3f3f3f3fu, kC0 = 0xc0c0c0c0u;

// Start of the per-column fp16 d array that follows the super-block columns.
size_t d_offset(int64_t nsb) {
  return static_cast<size_t>(nsb) * kSbBytes;
}

// Offset of byte k (0..2) of slice j (elements 4j..4j+3 of each quarter) of half h, row r.
size_t slice_offset(int h, int j, int k, int r) {
  return static_cast<size_t>(64 * (3 * (8 * h + j) + k) + 4 * r);
}

// Unsigned 6-bit quant (0..63) of element e (< 256) of row r in a super-block column.
int quant_at(const uint8_t* g, int r, int e) {
  const int h = e / 128, q = (e % 128) / 32, j = (e % 32) / 4, i = e % 4;
  if (q < 3) return g[slice_offset(h, j, q, r) + i] & 0x3f;
  int v = 0;
  for (int k = 0; k < 3; ++k) v |= (g[slice_offset(h, j, k, r) + i] >> 6) << (2 * k);
  return v;
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void store_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}

}  // namespace

size_t group_bytes(int64_t cols) {
  // 64-byte multiple, so consecutive groups keep their vectors aligned.
  const size_t bytes = static_cast<size_t>(cols / kQKK) * (kSbBytes + 32);
  return (bytes + 63) / 64 * 64;
}

void repack(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  const int64_t nsb = cols / kQKK;
  auto* base = static_cast<uint8_t*>(group);
  std::memset(base + d_offset(nsb) + 32 * static_cast<size_t>(nsb), 0,
              group_bytes(cols) - d_offset(nsb) - 32 * static_cast<size_t>(nsb));
  for (int64_t b = 0; b < nsb; ++b) {
    uint8_t* g = base + static_cast<size_t>(b) * kSbBytes;
    for (int r = 0; r < kRows16; ++r) {
      const auto& blk = reinterpret_cast<const BlockQ6_K*>(
          static_cast<const uint8_t*>(src) + static_cast<size_t>(r) * src_row_bytes)[b];
      // Four elements (one per byte) at a time, so repacking a large model stays cheap.
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 8; ++j) {
          const uint32_t ql0 = load_u32(blk.ql + 64 * h + 4 * j);
          const uint32_t ql1 = load_u32(blk.ql + 64 * h + 32 + 4 * j);
          const uint32_t qh = load_u32(blk.qh + 32 * h + 4 * j);
          const uint32_t q0 = (ql0 & k0F) | ((qh << 4) & k30);
          const uint32_t q1 = (ql1 & k0F) | ((qh << 2) & k30);
          const uint32_t q2 = ((ql0 >> 4) & k0F) | (qh & k30);
          const uint32_t q3 = ((ql1 >> 4) & k0F) | ((qh >> 2) & k30);
          store_u32(g + slice_offset(h, j, 0, r), q0 | ((q3 << 6) & kC0));
          store_u32(g + slice_offset(h, j, 1, r), q1 | ((q3 << 4) & kC0));
          store_u32(g + slice_offset(h, j, 2, r), q2 | ((q3 << 2) & kC0));
        }
      }
      for (int k = 0; k < 16; ++k) g[kScaleOff + 16 * k + r] = static_cast<uint8_t>(blk.scales[k]);
      std::memcpy(base + d_offset(nsb) + 32 * static_cast<size_t>(b) + 2 * r, &blk.d, 2);
    }
  }
}

void unpack(int64_t cols, const void* group, void* dst, size_t dst_row_bytes) {
  const int64_t nsb = cols / kQKK;
  const auto* base = static_cast<const uint8_t*>(group);
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* g = base + static_cast<size_t>(b) * kSbBytes;
    for (int r = 0; r < kRows16; ++r) {
      auto& blk = reinterpret_cast<BlockQ6_K*>(static_cast<uint8_t*>(dst) +
                                               static_cast<size_t>(r) * dst_row_bytes)[b];
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 8; ++j) {
          const uint32_t b0 = load_u32(g + slice_offset(h, j, 0, r));
          const uint32_t b1 = load_u32(g + slice_offset(h, j, 1, r));
          const uint32_t b2 = load_u32(g + slice_offset(h, j, 2, r));
          const uint32_t q0 = b0 & k3F, q1 = b1 & k3F, q2 = b2 & k3F;
          const uint32_t q3 = ((b0 >> 6) & k03) | ((b1 >> 4) & k0C) | ((b2 >> 2) & k30);
          store_u32(blk.ql + 64 * h + 4 * j, (q0 & k0F) | ((q2 & k0F) << 4));
          store_u32(blk.ql + 64 * h + 32 + 4 * j, (q1 & k0F) | ((q3 & k0F) << 4));
          store_u32(blk.qh + 32 * h + 4 * j,
                    ((q0 >> 4) & k03) | ((q1 >> 2) & k0C) | (q2 & k30) | ((q3 << 2) & kC0));
        }
      }
      for (int k = 0; k < 16; ++k) blk.scales[k] = static_cast<int8_t>(g[kScaleOff + 16 * k + r]);
      std::memcpy(&blk.d, base + d_offset(nsb) + 32 * static_cast<size_t>(b) + 2 * r, 2);
    }
  }
}

size_t act_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQKK) * kActSbBytes;
}

void prepare_act(int64_t cols, const void* act_row, void* dst) {
  const auto* a = static_cast<const BlockQ8_K*>(act_row);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < cols / kQKK; ++b, out += kActSbBytes) {
    std::memcpy(out, a[b].qs, kQKK);
    std::memcpy(out + 256, &a[b].d, 4);
    // From the quants themselves rather than bsums (|corr| <= 32 * 16 * 128).
    for (int grp = 0; grp < 16; ++grp) {
      int32_t sum = 0;
      for (int l = 0; l < 16; ++l) sum += a[b].qs[16 * grp + l];
      const int32_t corr = -32 * sum;
      std::memcpy(out + 260 + 4 * grp, &corr, 4);
    }
  }
}

void dot_scalar(int64_t cols, const void* group, const void* acts, size_t act_stride, int n_tokens,
                float* out, size_t out_stride) {
  const int64_t nsb = cols / kQKK;
  const auto* base = static_cast<const uint8_t*>(group);
  for (int t = 0; t < n_tokens; ++t) {
    const uint8_t* act = static_cast<const uint8_t*>(acts) + static_cast<size_t>(t) * act_stride;
    for (int r = 0; r < kRows16; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nsb; ++b) {
        const uint8_t* g = base + static_cast<size_t>(b) * kSbBytes;
        const uint8_t* ab = act + static_cast<size_t>(b) * kActSbBytes;
        const auto* aq = reinterpret_cast<const int8_t*>(ab);  // (256) activation quants
        int32_t isum = 0;
        for (int grp = 0; grp < 16; ++grp) {
          int32_t dot;
          std::memcpy(&dot, ab + 260 + 4 * grp, 4);
          for (int l = 0; l < 16; ++l) dot += quant_at(g, r, 16 * grp + l) * aq[16 * grp + l];
          const auto sc = static_cast<int8_t>(g[kScaleOff + 16 * grp + r]);
          isum += sc * dot;
        }
        float da;
        std::memcpy(&da, ab + 256, 4);
        uint16_t dh;
        std::memcpy(&dh, base + d_offset(nsb) + 32 * static_cast<size_t>(b) + 2 * r, 2);
        acc = std::fma(half_to_float(dh) * da, static_cast<float>(isum), acc);
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

}  // namespace rows16_q6_k

constinit const Rows16 kRows16Q6_KScalar = rows16_q6_k::with_dot(rows16_q6_k::dot_scalar);

}  // namespace hearth::quant
