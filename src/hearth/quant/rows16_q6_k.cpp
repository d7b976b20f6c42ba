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

constexpr size_t kQhOff = 2048;     // (16 vectors) high bits
constexpr size_t kScaleOff = 3072;  // (4 vectors) group scales

// Start of the per-column fp16 d array that follows the super-block columns.
size_t d_offset(int64_t nsb) {
  return static_cast<size_t>(nsb) * kSbBytes;
}

// Unsigned 6-bit quant (0..63) of element e (< 256) of row r in a super-block column.
int quant_at(const uint8_t* g, int r, int e) {
  const int h = e / 128, q = (e % 128) / 32, j = (e % 32) / 4, i = e % 4;
  const uint8_t lo = g[64 * (16 * h + 8 * (q & 1) + j) + 4 * r + i];
  const uint8_t hi = g[kQhOff + 64 * (8 * h + j) + 4 * r + i];
  const int lo4 = q < 2 ? lo & 0x0f : lo >> 4;
  return lo4 | (((hi >> (2 * q)) & 3) << 4);
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
      // Whole 4-byte chunks, so repacking a large model stays a copy.
      for (int v = 0; v < 32; ++v) std::memcpy(g + 64 * v + 4 * r, blk.ql + 4 * v, 4);
      for (int v = 0; v < 16; ++v) std::memcpy(g + kQhOff + 64 * v + 4 * r, blk.qh + 4 * v, 4);
      for (int k = 0; k < 4; ++k)
        std::memcpy(g + kScaleOff + 64 * k + 4 * r, blk.scales + 4 * k, 4);
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
      for (int v = 0; v < 32; ++v) std::memcpy(blk.ql + 4 * v, g + 64 * v + 4 * r, 4);
      for (int v = 0; v < 16; ++v) std::memcpy(blk.qh + 4 * v, g + kQhOff + 64 * v + 4 * r, 4);
      for (int k = 0; k < 4; ++k)
        std::memcpy(blk.scales + 4 * k, g + kScaleOff + 64 * k + 4 * r, 4);
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
          const auto sc = static_cast<int8_t>(g[kScaleOff + 64 * (grp / 4) + 4 * r + grp % 4]);
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
